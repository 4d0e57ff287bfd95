// What a load-generator run measured, and its summary (vLLM benchmark_serving style).
//
// Two views side by side, always labelled: the client's (wall clock, as a user of the endpoint
// sees it) and the hardware's (simulated times the server reports in each request's final
// message). Shared by the load generator (tools/loadgen/loadgen.cc), its JSON / CSV writers and
// the HTML report (report.h).
#ifndef NEUPIMS_TOOLS_LOADGEN_RESULTS_H_
#define NEUPIMS_TOOLS_LOADGEN_RESULTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace neupims::loadgen {

struct RequestResult {
  int64_t index = 0;  // position in the workload
  std::string request_id;
  double scheduled_s = 0;  // intended send time (wall, from the run's start)
  double sent_s = 0;       // actual send time
  bool ok = false;
  std::string error_code;  // gRPC status code name when !ok (e.g. "RESOURCE_EXHAUSTED")
  std::string error_message;
  std::string finish_reason;  // "length", "stop", "abort", "rejected"
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // tokens received
  // Client view (wall seconds).
  double ttft_s = 0;
  double e2el_s = 0;
  double tpot_s = 0;                 // (e2el - ttft) / (output_tokens - 1); 0 if one token
  std::vector<double> itl_s;         // gaps between consecutive token arrivals
  std::vector<double> token_recv_s;  // wall receipt time of every token (from the run's start)
  // Hardware view (simulated seconds, from the server's final message).
  double sim_queue_s = 0, sim_ttft_s = 0, sim_tpot_s = 0, sim_e2el_s = 0;
  int pim_channel = -1;
  int preemptions = 0;
};

// Periodic GetServerInfo samples during a run, with the server's /metrics when the load
// generator reads them (--metrics).
struct ServerSample {
  double t_s = 0;  // wall, from the run's start
  int64_t running = 0, waiting = 0;
  double kv_cache_usage = 0;
  double sim_time_s = 0;
  std::vector<double> channel_kv_usage;  // per PIM channel
  bool has_hardware = false;             // the fields below were scraped
  double npu_systolic = 0, npu_vector = 0, pim = 0, hbm_bandwidth = 0;  // utilisation 0..1
  double power_w = 0;
  double energy_j = 0, generation_tokens = 0;  // the server's cumulative counters
};

struct Percentiles {
  int64_t count = 0;  // samples behind the numbers (0: none, and every number is 0)
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};

struct SloTargets {  // <= 0: not set
  double ttft_ms = 0, tpot_ms = 0, e2el_ms = 0;
};

struct RunSummary {
  int64_t completed = 0, failed = 0;
  std::vector<std::pair<std::string, int64_t>> failures_by_code;
  double duration_s = 0;
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  int64_t good = 0;                               // requests meeting every set SLO
  double goodput = 0;                             // good requests per second
  Percentiles ttft_ms, tpot_ms, itl_ms, e2el_ms;  // client view
  Percentiles sim_ttft_ms, sim_tpot_ms, sim_e2el_ms, sim_queue_ms;  // hardware view
};

struct RunResult {
  std::string label;        // e.g. "rate 10/s"
  double request_rate = 0;  // requests/s; 0 = all at once
  int max_concurrency = 0;
  double wall_start_unix_s = 0;
  double duration_s = 0;  // first send to last completion
  std::vector<RequestResult> requests;
  std::vector<ServerSample> samples;
  RunSummary summary;
};

// The one summary of a run's requests, for the printed summary, the JSON and the HTML report
// (slo: goodput counts requests meeting every set target). Latencies are over completed
// requests; samples that are not finite or negative are left out, and the hardware view counts
// only requests the server reported simulated times for (sim_e2el_s > 0). The duration is
// run.duration_s when set, else first send to last completion.
RunSummary SummarizeRequests(const RunResult& run, const SloTargets& slo);

// run.summary = SummarizeRequests(run, slo).
void Summarize(RunResult& run, const SloTargets& slo);

// Results JSON (documented in docs/loadgen.md): for each run, vLLM-compatible keys
// (completed, failed, duration, total_input_tokens, total_output_tokens, request_throughput,
// output_throughput, total_token_throughput, goodput,
// {mean,median,p90,p99}_{ttft,tpot,itl,e2el}_ms) plus the simulated view under "sim_*" keys and the
// settings.
nlohmann::json RunJson(const RunResult& run);

// Per-request CSV, one line per request (header documented in docs/loadgen.md).
std::string RequestsCsv(const RunResult& run);

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_RESULTS_H_
