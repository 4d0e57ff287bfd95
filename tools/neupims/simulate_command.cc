#include "tools/neupims/simulate_command.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_io.h"
#include "common/heap_pages.h"
#include "common/stats.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"
#include "scheduler/request.h"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/engine_flags.h"
#include "tools/neupims/timeline_writer.h"
#include "tools/workload/range_flag.h"
#include "tools/workload/workload_flags.h"

namespace neupims::cli {
namespace {

using engine::SimTime;
using nlohmann::json;

struct RequestRecord {
  int64_t id = 0;
  int64_t prompt = 0, output = 0;
  SimTime arrival = 0, finished = -1;
  scheduler::RequestLatencies latency;
  int channel = -1;
  int preemptions = 0;
  scheduler::FinishReason reason = scheduler::FinishReason::kNone;
  std::string error;
};

// Collects per-request and per-iteration results as the engine runs; drives closed loops.
class Collector : public engine::EngineObserver {
 public:
  explicit Collector(engine::Engine* e) : engine_(e) {}

  // A prefill's token (standalone prefill; the engine reports it before it updates the
  // request, so r.last_token is still the request's previous token, kNoTime for a first one).
  void OnTokens(const engine::Request& r, int64_t, int count, SimTime t) override {
    tokens_ += count;
    AddGap(r.last_token, t, 1);
  }

  // Tokens are counted from the gaps (below), so the engine need not list them.
  bool WantsIterationTokens() const override { return false; }

  // Run-length inter-token gaps: the decoding requests of an iteration mostly share one gap
  // (the iteration), so memory grows with iterations, not tokens, and only the tokens that do
  // not continue from the previous iteration are visited. The runs' order differs from a
  // token-by-token pass (the continuing tokens' run comes first), which changes no quantile.
  void OnIterationGaps(const scheduler::StepGaps& gaps, SimTime t) override {
    tokens_ += gaps.continuing + static_cast<int64_t>(gaps.others.size());
    AddGap(gaps.previous, t, gaps.continuing);
    for (const scheduler::StepGap& g : gaps.others) AddGap(g.previous, t, 1);
  }

  void OnFinished(const engine::Request& r) override {
    RequestRecord rec;
    rec.id = r.id;
    rec.prompt = r.prompt_tokens;
    rec.output = r.generated;
    rec.arrival = r.arrival;
    rec.finished = r.finished;
    rec.latency = scheduler::Latencies(r);
    rec.channel = r.channel;
    rec.preemptions = r.preemptions;
    rec.reason = r.finish_reason;
    rec.error = r.error;
    records_.push_back(std::move(rec));
    // Closed loop: the next request arrives when one finishes.
    if (next_closed_ < closed_loop_.size()) {
      engine::SubmitSpec s = closed_loop_[next_closed_++];
      s.arrival = engine_->now();
      if (!engine_->Submit(s).ok()) ++submit_failures_;
    }
  }

  void OnIteration(const engine::IterationRecord& it) override {
    iterations_.push_back({it.end, it.decode, it.kv_usage});
    if (it.cost != nullptr && !it.cost->timeline.empty()) {
      for (const engine::TimelineEvent& e : it.cost->timeline) {
        engine::TimelineEvent x = e;
        x.start_ns += static_cast<double>(it.start);
        x.end_ns += static_cast<double>(it.start);
        timeline_.push_back(std::move(x));
      }
      iteration_marks_.push_back({it.index, it.start, it.end});
    }
  }

  struct IterSample {
    SimTime end;
    int64_t batch;
    double kv_usage;
  };
  using Mark = IterationMark;

  engine::Engine* engine_;
  std::vector<RequestRecord> records_;
  // `count` tokens at `t` whose previous token was at `previous` (kNoTime: none, no gap).
  void AddGap(SimTime previous, SimTime t, int64_t count) {
    if (previous == scheduler::kNoTime || count <= 0) return;
    const double gap_ns = static_cast<double>(t - previous);
    if (!itl_ns_.empty() && itl_ns_.back().value == gap_ns) {
      itl_ns_.back().count += count;
    } else {
      itl_ns_.push_back({gap_ns, count});
    }
  }

  std::vector<SampleRun> itl_ns_;  // inter-token gaps, run-length
  std::vector<IterSample> iterations_;
  std::vector<engine::TimelineEvent> timeline_;
  std::vector<Mark> iteration_marks_;
  std::vector<engine::SubmitSpec> closed_loop_;
  size_t next_closed_ = 0;
  int64_t tokens_ = 0;
  int64_t submit_failures_ = 0;
};

struct SimulateFlags {
  EngineFlags engine;
  workload::WorkloadFlags workload;
  std::string json_path;
  std::string csv_path;
  std::string timeline_path;
  int64_t timeline_iterations = 3;
  bool print_json = false;
  bool progress = true;
  std::optional<double> max_memory_gb;  // none: the machine's available memory
};

// Memory `simulate` keeps per request until its summary (the workload, the engine's request and
// the result record): 640 bytes measured as the max-RSS difference of `-n 100000` and
// `-n 400000 --synthetic 1:1`, rounded up for the CSV kept for --csv.
constexpr double kBytesPerRequest = 700;
// What a run holds besides its requests: the dataset's rows while sampling (ShareGPT's 391,726
// are about 10 MB), the engine's cost caches and schedules.
constexpr size_t kHeapBaseBytes = size_t{32} << 20;

// MemAvailable of /proc/meminfo (what can be allocated without swapping), else the physical
// memory, in bytes.
double AvailableMemoryBytes() {
  if (absl::StatusOr<std::string> info = ReadInputFile("/proc/meminfo", 1 << 20); info.ok()) {
    for (absl::string_view line : absl::StrSplit(*info, '\n')) {
      if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
      int64_t kb = 0;
      if (absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(line), " kB"), &kb)) {
        return static_cast<double>(kb) * 1024;
      }
    }
  }
  return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// Refuses a run whose requests would not fit in memory, before building any of them (issue 17:
// `-n 100000000` used to grow past 6 GB and keep climbing). A trace is bounded by its file.
absl::Status CheckMemory(const SimulateFlags& f) {
  if (!f.workload.trace.empty()) return absl::OkStatus();
  const double need = static_cast<double>(f.workload.num_requests) * kBytesPerRequest;
  const bool machine = !f.max_memory_gb.has_value();
  const double have = machine ? AvailableMemoryBytes() : *f.max_memory_gb * 1e9;
  if (need <= have) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "-n %d: simulate keeps about %.0f bytes per request until the summary, %.1f GB for this "
      "run, more than %s (%.1f GB); lower -n or run it in parts with different --seed values",
      f.workload.num_requests, kBytesPerRequest, need / 1e9,
      machine ? "the memory this machine has available" : "--max-memory-gb", have / 1e9));
}

json SummaryJson(const Collector& c, const engine::Engine& e, double wall_s) {
  const engine::EngineStats& s = e.stats();
  std::vector<double> ttft, tpot, e2e, queue;
  for (std::vector<double>* v : {&ttft, &tpot, &e2e, &queue}) v->reserve(c.records_.size());
  int64_t completed = 0, rejected = 0, aborted = 0, in_tokens = 0, out_tokens = 0;
  SimTime first_arrival = -1, last_finish = 0;
  for (const RequestRecord& r : c.records_) {
    if (first_arrival < 0 || r.arrival < first_arrival) first_arrival = r.arrival;
    last_finish = std::max(last_finish, r.finished);
    if (r.reason == scheduler::FinishReason::kRejected) {
      ++rejected;
      continue;
    }
    if (r.reason == scheduler::FinishReason::kAborted) {
      ++aborted;
      continue;
    }
    ++completed;
    in_tokens += r.prompt;
    out_tokens += r.output;
    const scheduler::RequestLatencies& l = r.latency;
    if (l.ttft_ns) ttft.push_back(static_cast<double>(*l.ttft_ns) / 1e6);
    if (l.e2e_ns) e2e.push_back(static_cast<double>(*l.e2e_ns) / 1e6);
    if (l.queue_ns) queue.push_back(static_cast<double>(*l.queue_ns) / 1e6);
    if (l.tpot_ns) tpot.push_back(*l.tpot_ns / 1e6);
  }
  std::vector<SampleRun> itl = c.itl_ns_;
  for (SampleRun& run : itl) run.value /= 1e6;
  const double duration_s = first_arrival >= 0 ? (last_finish - first_arrival) / 1e9 : 0.0;
  const double d_ns = std::max(1.0, duration_s * 1e9);
  const hw::DeviceConfig& dev = e.device();
  const int channels = dev.hbm.org.channels;
  json j;
  j["completed"] = completed;
  j["rejected"] = rejected;
  j["aborted"] = aborted;
  j["duration_s"] = duration_s;
  j["total_input_tokens"] = in_tokens;
  j["total_output_tokens"] = out_tokens;
  j["request_throughput"] = duration_s > 0 ? completed / duration_s : 0;
  j["output_throughput"] = duration_s > 0 ? out_tokens / duration_s : 0;
  j["total_token_throughput"] = duration_s > 0 ? (in_tokens + out_tokens) / duration_s : 0;
  auto add = [&](const char* name, const Summary& m) {
    j[absl::StrCat("mean_", name, "_ms")] = m.mean;
    j[absl::StrCat("median_", name, "_ms")] = m.median;
    j[absl::StrCat("p90_", name, "_ms")] = m.p90;
    j[absl::StrCat("p99_", name, "_ms")] = m.p99;
  };
  add("ttft", Summarize(std::move(ttft)));
  add("tpot", Summarize(std::move(tpot)));
  add("itl", SummarizeRuns(std::move(itl)));
  add("e2el", Summarize(std::move(e2e)));
  add("queue", Summarize(std::move(queue)));
  j["iterations"] = s.iterations;
  j["mean_batch_size"] = s.iterations > 0 ? static_cast<double>(s.batch_sum) / s.iterations : 0;
  j["mean_sub_batch_sizes"] = {
      s.iterations > 0 ? static_cast<double>(s.sub_batch_sum[0]) / s.iterations : 0,
      s.iterations > 0 ? static_cast<double>(s.sub_batch_sum[1]) / s.iterations : 0};
  j["preemptions"] = s.preemptions;
  // Utilisation of one device over the run (and while iterating, as in NeuPIMs Table 4).
  const double busy = std::max<double>(1, static_cast<double>(s.busy_ns));
  auto util = [&](double per_device_ns, double denom_ns) { return per_device_ns / denom_ns; };
  const double hbm_bytes_per_ns = dev.PeakHbmBytesPerSecond() / 1e9;
  j["utilization"] = {{"npu_systolic", util(s.systolic_busy_ns, d_ns)},
                      {"npu_vector", util(s.vector_busy_ns, d_ns)},
                      {"pim", util(s.pim_mac_ns / channels, d_ns)},
                      {"hbm_bandwidth", s.npu_hbm_bytes / hbm_bytes_per_ns / d_ns},
                      {"interconnect", util(s.interconnect_busy_ns, d_ns)}};
  j["utilization_while_iterating"] = {{"npu_systolic", util(s.systolic_busy_ns, busy)},
                                      {"npu_vector", util(s.vector_busy_ns, busy)},
                                      {"pim", util(s.pim_mac_ns / channels, busy)},
                                      {"hbm_bandwidth", s.npu_hbm_bytes / hbm_bytes_per_ns / busy}};
  j["channel_load_imbalance"] =
      s.pim_iterations > 0 ? s.channel_imbalance_sum / s.pim_iterations : 1.0;
  json cmds = json::object();
  for (int t = 0; t < hw::kNumCommandTypes; ++t) {
    if (s.pim_commands[t] != 0) {
      cmds[hw::CommandName(static_cast<hw::CommandType>(t))] =
          s.pim_commands[t] * e.parallelism().devices();
    }
  }
  j["pim_commands"] = cmds;
  const double energy = s.energy_j();
  j["energy"] = {{"total_j", energy},
                 {"npu_dynamic_j", s.npu_dynamic_j},
                 {"npu_static_j", s.npu_static_j},
                 {"dram_j", s.dram_j},
                 {"pim_j", s.pim_j},
                 {"dram_background_j", s.dram_background_j},
                 {"prefill_npus_j", s.prefill_j},
                 {"avg_power_w", duration_s > 0 ? energy / duration_s : 0},
                 {"j_per_output_token", out_tokens > 0 ? energy / out_tokens : 0}};
  j["devices"] = e.parallelism().devices();
  j["wall_time_s"] = wall_s;
  j["sim_over_wall"] = wall_s > 0 ? duration_s / wall_s : 0;
  return j;
}

void PrintSummary(const json& j, const json& settings, FILE* out) {
  auto f = [&](const char* key, int digits = 2) {
    return FormatFixed(j[key].get<double>(), digits);
  };
  KeyValueTable t("============ Serving simulation result ============");
  t.Add("model / mode / device", absl::StrCat(settings["model"].get<std::string>(), " / ",
                                              settings["mode"].get<std::string>(), " / ",
                                              settings["device"].get<std::string>()));
  t.Add("parallelism", absl::StrFormat("TP %d x PP %d (%d devices)", settings["tp"].get<int>(),
                                       settings["pp"].get<int>(), j["devices"].get<int>()));
  t.Add("workload", settings["workload"]["description"].get<std::string>());
  t.Add("successful requests", FormatCount(j["completed"].get<double>()));
  if (j["rejected"].get<int64_t>() > 0)
    t.Add("rejected requests", FormatCount(j["rejected"].get<double>()));
  t.Add("duration (simulated)", f("duration_s", 3) + " s");
  t.Add("total input tokens", FormatCount(j["total_input_tokens"].get<double>()));
  t.Add("total output tokens", FormatCount(j["total_output_tokens"].get<double>()));
  t.Add("request throughput", f("request_throughput") + " req/s");
  t.Add("output token throughput", f("output_throughput", 1) + " tok/s");
  t.Add("total token throughput", f("total_token_throughput", 1) + " tok/s");
  for (const char* m : {"ttft", "tpot", "itl", "e2el", "queue"}) {
    t.Add(absl::StrFormat("%s mean / median / p99", m),
          absl::StrFormat("%.2f / %.2f / %.2f ms", j[absl::StrCat("mean_", m, "_ms")].get<double>(),
                          j[absl::StrCat("median_", m, "_ms")].get<double>(),
                          j[absl::StrCat("p99_", m, "_ms")].get<double>()));
  }
  t.Add("iterations", FormatCount(j["iterations"].get<double>()));
  t.Add("mean batch (sub-batches)",
        absl::StrFormat("%.1f (%.1f + %.1f)", j["mean_batch_size"].get<double>(),
                        j["mean_sub_batch_sizes"][0].get<double>(),
                        j["mean_sub_batch_sizes"][1].get<double>()));
  t.Add("preemptions", FormatCount(j["preemptions"].get<double>()));
  const json& u = j["utilization"];
  const json& ui = j["utilization_while_iterating"];
  t.Add("NPU systolic utilisation",
        absl::StrFormat("%s (%s while iterating)", FormatPercent(u["npu_systolic"]),
                        FormatPercent(ui["npu_systolic"])));
  t.Add("NPU vector utilisation", FormatPercent(u["npu_vector"]));
  t.Add("PIM utilisation", absl::StrFormat("%s (%s while iterating)", FormatPercent(u["pim"]),
                                           FormatPercent(ui["pim"])));
  t.Add("HBM bandwidth utilisation",
        absl::StrFormat("%s (%s while iterating)", FormatPercent(u["hbm_bandwidth"]),
                        FormatPercent(ui["hbm_bandwidth"])));
  t.Add("channel load imbalance",
        FormatFixed(j["channel_load_imbalance"].get<double>(), 3) + " (busiest / mean)");
  const json& en = j["energy"];
  t.Add("energy", absl::StrFormat("%s (avg %s, %s per output token)",
                                  FormatSi(en["total_j"].get<double>(), "J"),
                                  FormatSi(en["avg_power_w"].get<double>(), "W"),
                                  FormatSi(en["j_per_output_token"].get<double>(), "J")));
  t.Add("simulated / wall time",
        absl::StrFormat("%.0fx (%.2f s wall)", j["sim_over_wall"].get<double>(),
                        j["wall_time_s"].get<double>()));
  t.Print(out);
}

// Milliseconds of a span; -1 (the CSV's documented "never happened") when absent.
double MsOrMinusOne(std::optional<SimTime> span_ns) {
  return span_ns ? static_cast<double>(*span_ns) / 1e6 : -1;
}

absl::Status WriteCsv(const std::string& path, const Collector& c) {
  std::string csv =
      "id,prompt_tokens,output_tokens,arrival_s,queue_ms,ttft_ms,tpot_ms,e2el_ms,channel,"
      "preemptions,finish_reason\n";
  for (const RequestRecord& r : c.records_) {
    const scheduler::RequestLatencies& l = r.latency;
    absl::StrAppendFormat(&csv, "%d,%d,%d,%.9f,%.4f,%.4f,%.4f,%.4f,%d,%d,%s\n", r.id, r.prompt,
                          r.output, r.arrival / 1e9, MsOrMinusOne(l.queue_ns),
                          MsOrMinusOne(l.ttft_ns), l.tpot_ns.value_or(0) / 1e6,
                          MsOrMinusOne(l.e2e_ns), r.channel, r.preemptions,
                          scheduler::ToString(r.reason));
  }
  return WriteFile(path, csv);
}

int RunSimulate(const SimulateFlags& f) {
  const auto wall_start = std::chrono::steady_clock::now();
  if (absl::Status s = CheckMemory(f); !s.ok()) return ReportError(s);
  // The run's memory on 2 MiB pages where the kernel offers them: 1.1x the speed of 10,000
  // ShareGPT requests (docs/benchmarks.md, fourteenth step). Without them the run is the same,
  // only slower, so a refusal (a sanitizer's malloc, a kernel without THP) is not an error.
  PrepareHugePageHeap(kHeapBaseBytes +
                      static_cast<size_t>(f.workload.num_requests * kBytesPerRequest))
      .IgnoreError();
  auto engine_or = engine::Engine::Create(f.engine.options);
  if (!engine_or.ok()) return ReportError(engine_or.status());
  engine::Engine& e = **engine_or;
  auto w = workload::BuildWorkload(f.workload, e.model().max_seq_len);
  if (!w.ok()) return ReportError(w.status());
  const workload::LoadReport& rep = w->report;
  if (rep.rows > rep.kept) {
    std::fprintf(stderr, "workload: %s: %s\n", rep.source.c_str(),
                 workload::DescribeKept(rep, e.model().max_seq_len).c_str());
  }
  Collector collector(&e);
  e.set_observer(&collector);
  if (!f.timeline_path.empty()) e.set_timeline_iterations(f.timeline_iterations);
  std::vector<engine::SubmitSpec> specs;
  for (const workload::RequestSpec& r : w->requests) {
    specs.push_back({r.id, r.prompt_tokens, r.output_tokens,
                     static_cast<SimTime>(std::llround(r.arrival_s * 1e9)), 0});
  }
  const bool closed = w->arrivals.kind == workload::ArrivalKind::kClosedLoop;
  size_t initial = closed ? std::min<size_t>(specs.size(), w->arrivals.concurrency) : specs.size();
  for (size_t i = 0; i < initial; ++i) {
    absl::Status s = e.Submit(specs[i]);
    if (!s.ok()) return ReportError(s);
  }
  if (closed) collector.closed_loop_.assign(specs.begin() + initial, specs.end());
  // Every submitted request ends with one record (finished, aborted or rejected): room for all
  // up front, not a reallocation that moves every record (and its string) as the list doubles.
  collector.records_.reserve(specs.size());

  // Run, with a progress bar on a terminal for runs longer than a second.
  const bool tty = f.progress && isatty(STDERR_FILENO);
  auto last_draw = wall_start;
  bool drew = false;
  int64_t loops = 0;
  const size_t total = specs.size();
  while (e.NextEventTime() != scheduler::kNoTime) {
    absl::Status s = e.AdvanceTo(e.NextEventTime());
    if (!s.ok()) return ReportError(s);
    if (tty && (++loops & 255) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now - wall_start > std::chrono::seconds(1) &&
          now - last_draw > std::chrono::milliseconds(100)) {
        last_draw = now;
        drew = true;
        const size_t done = collector.records_.size();
        const int width = 30;
        const int filled = static_cast<int>(width * done / std::max<size_t>(1, total));
        const double sim_s = e.now() / 1e9;
        std::fprintf(stderr, "\r[%s%s] %zu/%zu requests  sim %.2f s  %.0f tok/s  ",
                     std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(),
                     done, total, sim_s, sim_s > 0 ? collector.tokens_ / sim_s : 0.0);
        std::fflush(stderr);
      }
    }
  }
  if (drew) std::fprintf(stderr, "\r%*s\r", 100, "");
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();

  json settings = {{"model", e.model().name},
                   {"mode", e.mode().name},
                   {"device", e.device().name},
                   {"tp", e.parallelism().tp},
                   {"pp", e.parallelism().pp},
                   {"max_batch", e.options().max_batch},
                   {"prefill", engine::ToString(e.options().prefill)},
                   {"dual_row_buffers", e.mode().dual_row_buffers},
                   {"sub_batch_interleaving", e.mode().sub_batch_interleaving},
                   {"channel_policy", scheduler::ToString(e.mode().channel_policy)},
                   {"level", hw::ToString(e.options().level)},
                   {"workload", workload::WorkloadJson(f.workload, *w)}};
  json summary = SummaryJson(collector, e, wall_s);
  summary["settings"] = settings;
  if (f.print_json) {
    std::printf("%s\n", summary.dump(2).c_str());
  } else {
    PrintSummary(summary, settings, stdout);
  }
  if (!f.json_path.empty()) {
    absl::Status s = WriteFile(f.json_path, absl::StrCat(summary.dump(2), "\n"));
    if (!s.ok()) return ReportError(s);
  }
  if (!f.csv_path.empty()) {
    absl::Status s = WriteCsv(f.csv_path, collector);
    if (!s.ok()) return ReportError(s);
  }
  if (!f.timeline_path.empty()) {
    absl::Status s =
        WriteTimeline(f.timeline_path, collector.timeline_, collector.iteration_marks_, e);
    if (!s.ok()) return ReportError(s);
  }
  if (collector.submit_failures_ > 0) {
    return ReportError(absl::InternalError(
        absl::StrCat(collector.submit_failures_, " closed-loop submissions failed")));
  }
  return 0;
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SimulateFlags>();
  CLI::App* c = app.add_subcommand(
      "simulate",
      "Replay a workload (ShareGPT/Alpaca lengths, synthetic, or a trace) through the serving "
      "engine on the simulated device and print a vLLM-style summary");
  AddEngineFlags(c, &f->engine);
  workload::AddWorkloadFlags(c, &f->workload);
  c->add_flag("--json", f->print_json, "Print the summary as JSON instead of a table");
  c->add_option("--json-out", f->json_path, "Also write the summary JSON to this file")
      ->check(OutputFile());
  c->add_option("--csv", f->csv_path, "Write per-request results to this CSV file")
      ->check(OutputFile());
  c->add_option("--timeline", f->timeline_path,
                "Write a Chrome trace-event JSON (Perfetto / chrome://tracing) of the first "
                "iterations")
      ->check(OutputFile());
  c->add_option("--timeline-iterations", f->timeline_iterations,
                "Iterations recorded in the timeline")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  c->add_flag("!--no-progress", f->progress, "No progress bar");
  c->add_option("--max-memory-gb", f->max_memory_gb,
                "Refuse a run whose requests need more memory than this (about 700 bytes per "
                "request; default: the memory the machine has available)")
      ->check(InRange(DoubleRange{.min = 1e-3, .max = 1e6}));
  c->callback([f, exit_code] { *exit_code = RunSimulate(*f); });
}

}  // namespace neupims::cli
