#include "tools/loadgen/results.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/stats.h"

namespace neupims::loadgen {
namespace {

// Mean / median / p90 / p99 of seconds, in milliseconds (numpy-style linear interpolation, as
// vLLM's benchmark uses np.percentile). Empty: all zero.
Percentiles MsPercentiles(const std::vector<double>& seconds) {
  const neupims::Summary s = ::neupims::Summarize(seconds);
  Percentiles p;
  p.count = static_cast<int64_t>(s.count);
  p.mean = s.mean * 1e3;
  p.median = s.median * 1e3;
  p.p90 = s.p90 * 1e3;
  p.p99 = s.p99 * 1e3;
  return p;
}

void PutPercentiles(nlohmann::json& j, absl::string_view prefix, absl::string_view metric,
                    const Percentiles& p) {
  j[absl::StrCat(prefix, "mean_", metric, "_ms")] = p.mean;
  j[absl::StrCat(prefix, "median_", metric, "_ms")] = p.median;
  j[absl::StrCat(prefix, "p90_", metric, "_ms")] = p.p90;
  j[absl::StrCat(prefix, "p99_", metric, "_ms")] = p.p99;
}

// RFC 4180 quoting when a field needs it.
std::string CsvField(absl::string_view s) {
  if (s.find_first_of(",\"\n\r") == absl::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// A latency sample worth summarizing: a NaN or infinity would poison the percentiles.
bool Measured(double seconds) { return std::isfinite(seconds) && seconds >= 0; }

void AddSample(std::vector<double>& samples, double seconds) {
  if (Measured(seconds)) samples.push_back(seconds);
}

// First send to last completion over the requests with finite times; 0 without any.
double SpanOfRequests(const std::vector<RequestResult>& requests) {
  double first_send = 0, last_done = 0;
  bool any = false;
  for (const RequestResult& r : requests) {
    const double done = r.sent_s + r.e2el_s;
    if (!std::isfinite(r.sent_s) || !std::isfinite(done)) continue;
    first_send = any ? std::min(first_send, r.sent_s) : r.sent_s;
    last_done = any ? std::max(last_done, done) : done;
    any = true;
  }
  return std::max(0.0, last_done - first_send);
}

}  // namespace

RunSummary SummarizeRequests(const RunResult& run, const SloTargets& slo) {
  RunSummary s;
  std::map<std::string, int64_t> by_code;
  std::vector<double> ttft, tpot, itl, e2el, sim_ttft, sim_tpot, sim_e2el, sim_queue;
  for (const RequestResult& r : run.requests) {
    if (!r.ok) {
      ++s.failed;
      ++by_code[r.error_code.empty() ? std::string("UNKNOWN") : r.error_code];
      continue;
    }
    ++s.completed;
    s.total_input_tokens += r.prompt_tokens;
    s.total_output_tokens += r.output_tokens;
    AddSample(ttft, r.ttft_s);
    AddSample(e2el, r.e2el_s);
    if (r.output_tokens > 1) AddSample(tpot, r.tpot_s);
    for (double gap : r.itl_s) AddSample(itl, gap);
    if (r.sim_e2el_s > 0) {  // the server reported simulated times
      AddSample(sim_ttft, r.sim_ttft_s);
      AddSample(sim_e2el, r.sim_e2el_s);
      AddSample(sim_queue, r.sim_queue_s);
      if (r.output_tokens > 1) AddSample(sim_tpot, r.sim_tpot_s);
    }
    // An SLO is met when the measured value is at most the target (vLLM's goodput).
    const bool good = (slo.ttft_ms <= 0 || r.ttft_s * 1e3 <= slo.ttft_ms) &&
                      (slo.tpot_ms <= 0 || r.tpot_s * 1e3 <= slo.tpot_ms) &&
                      (slo.e2el_ms <= 0 || r.e2el_s * 1e3 <= slo.e2el_ms);
    if (good) ++s.good;
  }
  for (const auto& [code, n] : by_code) s.failures_by_code.emplace_back(code, n);
  std::stable_sort(s.failures_by_code.begin(), s.failures_by_code.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });

  s.duration_s = std::isfinite(run.duration_s) && run.duration_s > 0 ? run.duration_s
                                                                     : SpanOfRequests(run.requests);
  if (s.duration_s > 0) {
    s.request_throughput = static_cast<double>(s.completed) / s.duration_s;
    s.output_throughput = static_cast<double>(s.total_output_tokens) / s.duration_s;
    s.total_token_throughput =
        static_cast<double>(s.total_input_tokens + s.total_output_tokens) / s.duration_s;
    s.goodput = static_cast<double>(s.good) / s.duration_s;
  }
  s.ttft_ms = MsPercentiles(ttft);
  s.tpot_ms = MsPercentiles(tpot);
  s.itl_ms = MsPercentiles(itl);
  s.e2el_ms = MsPercentiles(e2el);
  s.sim_ttft_ms = MsPercentiles(sim_ttft);
  s.sim_tpot_ms = MsPercentiles(sim_tpot);
  s.sim_e2el_ms = MsPercentiles(sim_e2el);
  s.sim_queue_ms = MsPercentiles(sim_queue);
  return s;
}

void Summarize(RunResult& run, const SloTargets& slo) { run.summary = SummarizeRequests(run, slo); }

nlohmann::json RunJson(const RunResult& run) {
  const RunSummary& s = run.summary;
  nlohmann::json j;
  // Settings of this run.
  j["label"] = run.label;
  if (run.request_rate > 0) {
    j["request_rate"] = run.request_rate;
  } else {
    j["request_rate"] = "inf";
  }
  j["max_concurrency"] = run.max_concurrency;
  j["wall_start_unix_s"] = run.wall_start_unix_s;
  j["num_prompts"] = static_cast<int64_t>(run.requests.size());
  // vLLM benchmark_serving keys.
  j["completed"] = s.completed;
  j["failed"] = s.failed;
  nlohmann::json failures = nlohmann::json::object();
  for (const auto& [code, n] : s.failures_by_code) failures[code] = n;
  j["failures_by_code"] = failures;
  j["duration"] = s.duration_s;
  j["total_input_tokens"] = s.total_input_tokens;
  j["total_output_tokens"] = s.total_output_tokens;
  j["request_throughput"] = s.request_throughput;
  j["output_throughput"] = s.output_throughput;
  j["total_token_throughput"] = s.total_token_throughput;
  j["good"] = s.good;
  j["goodput"] = s.goodput;
  j["request_goodput"] = s.goodput;  // vLLM's name for the same number
  PutPercentiles(j, "", "ttft", s.ttft_ms);
  PutPercentiles(j, "", "tpot", s.tpot_ms);
  PutPercentiles(j, "", "itl", s.itl_ms);
  PutPercentiles(j, "", "e2el", s.e2el_ms);
  // Hardware (simulated) view.
  PutPercentiles(j, "sim_", "ttft", s.sim_ttft_ms);
  PutPercentiles(j, "sim_", "tpot", s.sim_tpot_ms);
  PutPercentiles(j, "sim_", "e2el", s.sim_e2el_ms);
  PutPercentiles(j, "sim_", "queue", s.sim_queue_ms);
  // Per-request arrays, in request order (vLLM: input_lens, output_lens, ttfts, itls, errors).
  nlohmann::json input_lens = nlohmann::json::array(), output_lens = nlohmann::json::array(),
                 ttfts = nlohmann::json::array(), itls = nlohmann::json::array(),
                 errors = nlohmann::json::array();
  for (const RequestResult& r : run.requests) {
    input_lens.push_back(r.prompt_tokens);
    output_lens.push_back(r.output_tokens);
    ttfts.push_back(r.ok ? r.ttft_s : 0.0);
    itls.push_back(r.itl_s);
    errors.push_back(r.ok ? std::string()
                          : (r.error_message.empty()
                                 ? r.error_code
                                 : absl::StrCat(r.error_code, ": ", r.error_message)));
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["errors"] = std::move(errors);
  nlohmann::json samples = nlohmann::json::array();
  for (const ServerSample& x : run.samples) {
    nlohmann::json sample = {{"t_s", x.t_s},
                             {"running", x.running},
                             {"waiting", x.waiting},
                             {"kv_cache_usage", x.kv_cache_usage},
                             {"channel_kv_usage", x.channel_kv_usage},
                             {"sim_time_s", x.sim_time_s}};
    if (x.has_hardware) {
      sample["hardware"] = {{"npu_systolic", x.npu_systolic},
                            {"npu_vector", x.npu_vector},
                            {"pim", x.pim},
                            {"hbm_bandwidth", x.hbm_bandwidth},
                            {"power_w", x.power_w},
                            {"energy_j", x.energy_j},
                            {"generation_tokens", x.generation_tokens}};
    }
    samples.push_back(std::move(sample));
  }
  j["server_samples"] = std::move(samples);
  return j;
}

std::string RequestsCsv(const RunResult& run) {
  std::string out =
      "index,request_id,scheduled_s,sent_s,ok,error_code,finish_reason,prompt_tokens,"
      "output_tokens,ttft_ms,tpot_ms,e2el_ms,mean_itl_ms,max_itl_ms,sim_queue_ms,sim_ttft_ms,"
      "sim_tpot_ms,sim_e2el_ms,pim_channel,preemptions,error_message\n";
  for (const RequestResult& r : run.requests) {
    double mean_itl = 0, max_itl = 0;
    for (double g : r.itl_s) {
      mean_itl += g;
      max_itl = std::max(max_itl, g);
    }
    if (!r.itl_s.empty()) mean_itl /= static_cast<double>(r.itl_s.size());
    absl::StrAppendFormat(
        &out,
        "%d,%s,%.6f,%.6f,%d,%s,%s,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%s\n",
        r.index, CsvField(r.request_id), r.scheduled_s, r.sent_s, r.ok ? 1 : 0,
        CsvField(r.error_code), CsvField(r.finish_reason), r.prompt_tokens, r.output_tokens,
        r.ttft_s * 1e3, r.tpot_s * 1e3, r.e2el_s * 1e3, mean_itl * 1e3, max_itl * 1e3,
        r.sim_queue_s * 1e3, r.sim_ttft_s * 1e3, r.sim_tpot_s * 1e3, r.sim_e2el_s * 1e3,
        r.pim_channel, r.preemptions, CsvField(r.error_message));
  }
  return out;
}

}  // namespace neupims::loadgen
