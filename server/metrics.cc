#include "server/metrics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "hw/device.h"
#include "hw/dram/command.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/request.h"
#include "server/cnn_runner.h"
#include "server/engine_runner.h"

namespace neupims::server {
namespace {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;
using BucketBoundaries = prometheus::Histogram::BucketBoundaries;

constexpr double kNsPerSecond = 1e9;
// Sliding window of the utilisation and power gauges (docs/metrics.md): about one simulated
// second, at most this many iterations.
constexpr engine::SimTime kWindowNs = 1'000'000'000;
constexpr size_t kMaxWindowIterations = 1024;

// Time to first token: vLLM's buckets (1 ms .. 2560 s).
BucketBoundaries TtftBuckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

// Inter-token gaps and iteration latencies: 1 ms steps up to 10 ms (a NeuPIMs decode iteration
// of GPT3-7B is ~5-10 ms), then vLLM's time-per-output-token buckets up to 80 s.
BucketBoundaries TokenGapBuckets() {
  return {0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.01, 0.012, 0.014,
          0.016, 0.018, 0.02,  0.025, 0.03,  0.04,  0.05,  0.075, 0.1,  0.15,  0.2,
          0.3,   0.4,   0.5,   0.75,  1.0,   2.5,   5.0,   10.0,  20.0, 40.0,  80.0};
}

// Request phases (end-to-end, queue, prefill, decode): vLLM's request-latency buckets
// (0.3 s .. 7680 s) with millisecond buckets below them (simulated queue and prefill times).
BucketBoundaries RequestBuckets() {
  return {0.001, 0.0025, 0.005, 0.01,  0.025, 0.05,  0.1,   0.2,    0.3,   0.5,
          0.8,   1.0,    1.5,   2.0,   2.5,   5.0,   10.0,  15.0,   20.0,  30.0,
          40.0,  50.0,   60.0,  120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

// Tokens per iteration: powers of two (a local-prefill iteration carries up to
// --max-prefill-tokens prompt tokens plus the decoding requests).
BucketBoundaries IterationTokenBuckets() {
  BucketBoundaries b;
  for (double v = 1; v <= 16384; v *= 2) b.push_back(v);
  return b;
}

// Decoding requests per iteration and per sub-batch (--max-batch is 256 by default, 64-512 in
// the experiments). 0 has its own bucket: an iteration without decodes, or sub-batch 2 without
// interleaving.
BucketBoundaries BatchBuckets() {
  return {0,   1,   2,   4,   8,   16,  32,  48,  64,  96,  128,
          160, 192, 224, 256, 320, 384, 448, 512, 768, 1024};
}

// CNN inferences (simulated seconds): from a fraction of a millisecond (a GPU partition) to
// minutes (CIM-only over a slow wireless link).
BucketBoundaries CnnLatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,   0.5,     1.0,    2.5,   5.0,    10.0,  30.0, 60.0,  300.0};
}

const char* FinishLabel(Finish f) {
  switch (f) {
    case Finish::kLength:
      return "length";
    case Finish::kStop:
      return "stop";
    case Finish::kAborted:
      return "abort";
    case Finish::kRejected:
      return "rejected";
  }
  return "abort";
}

// Growth of a cumulative statistic; never negative (a smaller value, e.g. after an engine
// restart, adds nothing) and never NaN.
double Growth(double current, double previous) {
  const double d = current - previous;
  return d > 0 ? d : 0;
}

// Observes `to - from` in seconds when both simulated times are known and ordered.
void ObserveSpan(Histogram& h, std::optional<engine::SimTime> span_ns) {
  if (span_ns) h.Observe(static_cast<double>(*span_ns) / kNsPerSecond);
}

}  // namespace

struct ServerMetrics::Impl {
  // Quantities of the sliding window, accumulated from the growth of the engine's cumulative
  // statistics (so they never decrease).
  struct Totals {
    double busy_ns = 0;
    engine::HwCost hw;
    double prefill_j = 0;
    double energy_j() const { return hw.energy_j() + prefill_j; }
  };
  struct Snapshot {
    engine::SimTime t = 0;
    Totals totals;
  };

  Impl(std::shared_ptr<prometheus::Registry> reg, const std::string& model,
       const hw::DeviceConfig& device, int device_count);

  void OnIteration(const engine::IterationRecord& it, const engine::EngineStats& stats);
  void SetLoad(const engine::EngineLoad& load, double sim_time_s, double sim_wall_ratio);
  void UpdateWindow(engine::SimTime now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  template <typename T>
  prometheus::Family<T>& Build(prometheus::detail::Builder<T> builder, const std::string& name,
                               const std::string& help) {
    return builder.Name(name).Help(help).Register(*registry);
  }
  // A series' labels: `extra` and model_name (a metric label, not a constant one, so the
  // exposition lists every series' labels in alphabetical order).
  prometheus::Labels With(prometheus::Labels extra) const {
    extra.emplace("model_name", model_name);
    return extra;
  }

  std::shared_ptr<prometheus::Registry> registry;
  std::string model_name;
  int channels = 1;
  int devices = 1;
  double peak_hbm_bytes_per_ns = 0;

  // Load.
  Gauge* running = nullptr;
  Gauge* waiting = nullptr;
  Gauge* prefilling = nullptr;
  Gauge* kv_usage = nullptr;
  prometheus::Family<Gauge>* channel_kv_family = nullptr;
  Gauge* sim_time = nullptr;
  Gauge* sim_wall_ratio_gauge = nullptr;
  Gauge* draining = nullptr;
  Counter* engine_faults = nullptr;
  std::array<Counter*, 2> stream_overflows{};  // by ServerMetrics::FrontEnd
  // Tokens and requests.
  Counter* prompt_tokens = nullptr;
  Counter* generation_tokens = nullptr;
  Counter* preemptions = nullptr;
  std::array<Counter*, 4> success{};  // by Finish
  prometheus::Family<Counter>* errors_family = nullptr;
  Histogram* ttft = nullptr;
  Histogram* tpot = nullptr;          // every inter-token gap (vLLM semantics)
  Histogram* itl = nullptr;           // the same samples under vLLM's newer name
  Histogram* request_tpot = nullptr;  // one per-request mean per request
  Histogram* e2e = nullptr;
  Histogram* queue = nullptr;
  Histogram* prefill = nullptr;
  Histogram* decode = nullptr;
  // Iterations.
  Counter* iterations = nullptr;
  Histogram* iteration_latency = nullptr;
  Histogram* send_lag = nullptr;  // wall seconds (realtime pacing)
  Histogram* iteration_tokens = nullptr;
  Histogram* batch_size = nullptr;
  std::array<Histogram*, 2> sub_batch_size{};
  Gauge* channel_imbalance = nullptr;
  // Hardware.
  Gauge* systolic_util = nullptr;
  Gauge* vector_util = nullptr;
  Gauge* pim_util = nullptr;
  Gauge* hbm_util = nullptr;
  Gauge* interconnect_util = nullptr;
  prometheus::Family<Counter>* pim_commands_family = nullptr;
  Counter* energy_npu_dynamic = nullptr;
  Counter* energy_npu_static = nullptr;
  Counter* energy_dram = nullptr;
  Counter* energy_pim = nullptr;
  Counter* energy_dram_background = nullptr;
  Counter* energy_prefill = nullptr;
  Gauge* power = nullptr;
  // CNN models (inference.GRPCInferenceService): labelled by the CNN model, not the LLM.
  prometheus::Family<Counter>* cnn_requests = nullptr;
  prometheus::Family<Counter>* cnn_images = nullptr;
  prometheus::Family<Histogram>* cnn_latency = nullptr;
  prometheus::Family<Histogram>* cnn_queue = nullptr;
  prometheus::Family<Counter>* cnn_busy = nullptr;
  prometheus::Family<Counter>* cnn_energy = nullptr;
  prometheus::Family<Gauge>* cnn_utilization = nullptr;
  prometheus::Family<Gauge>* cnn_sim_time = nullptr;

  const BucketBoundaries token_gap_buckets = TokenGapBuckets();

  // Engine-thread state, guarded so that OnIteration and SetLoad may come from any thread.
  absl::Mutex mu;
  engine::EngineStats previous ABSL_GUARDED_BY(mu);
  Totals totals ABSL_GUARDED_BY(mu);
  std::deque<Snapshot> window ABSL_GUARDED_BY(mu);
  engine::SimTime now ABSL_GUARDED_BY(mu) = 0;
  std::vector<Gauge*> channel_kv ABSL_GUARDED_BY(mu);
  std::array<Counter*, hw::kNumCommandTypes> pim_commands ABSL_GUARDED_BY(mu){};
};

ServerMetrics::Impl::Impl(std::shared_ptr<prometheus::Registry> reg, const std::string& model,
                          const hw::DeviceConfig& device, int device_count)
    : registry(std::move(reg)),
      model_name(model),
      channels(std::max(1, device.hbm.org.channels)),
      devices(std::max(1, device_count)),
      peak_hbm_bytes_per_ns(device.PeakHbmBytesPerSecond() / kNsPerSecond) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;

  // Load (vLLM).
  running = &Build(BuildGauge(), "neupims:num_requests_running",
                   "Number of requests decoding on the PIM devices (in the running batch).")
                 .Add(With({}));
  waiting = &Build(BuildGauge(), "neupims:num_requests_waiting",
                   "Number of requests waiting to be admitted (including preempted ones).")
                 .Add(With({}));
  prefilling = &Build(BuildGauge(), "neupims:num_requests_prefilling",
                      "Number of admitted requests on the standalone prefill NPUs or their KV "
                      "transfer link.")
                    .Add(With({}));
  kv_usage = &Build(BuildGauge(), "neupims:kv_cache_usage_perc",
                    "KV-cache usage of the device (used / total blocks, 0..1).")
                  .Add(With({}));
  channel_kv_family = &Build(BuildGauge(), "neupims:channel_kv_cache_usage_perc",
                             "KV-cache usage of one PIM channel's block pool (0..1).");
  sim_time =
      &Build(BuildGauge(), "neupims:sim_time_seconds", "Simulated time of the engine, seconds.")
           .Add(With({}));
  sim_wall_ratio_gauge = &Build(BuildGauge(), "neupims:sim_wall_time_ratio",
                                "Simulated seconds per wall-clock second while the engine has "
                                "work (idle wall time is not counted).")
                              .Add(With({}));

  draining = &Build(BuildGauge(), "neupims:server_draining",
                    "1 once the server drains (refuses new requests, finishes in-flight ones).")
                  .Add(With({}));

  engine_faults = &Build(BuildCounter(), "neupims:engine_faults_total",
                         "Broken invariants that stopped the engine (it then admits nothing and "
                         "health is NOT_SERVING); 0 on a healthy server.")
                       .Add(With({}));
  auto& overflows =
      Build(BuildCounter(), "neupims:stream_buffer_overflows_total",
            "Streams (gRPC Generate, HTTP SSE) ended because their client stopped reading and "
            "more than --max-stream-buffer tokens waited (the request is aborted), by front end.");
  stream_overflows = {&overflows.Add(With({{"front_end", "grpc"}})),
                      &overflows.Add(With({{"front_end", "http"}}))};

  // Tokens and requests (vLLM).
  prompt_tokens = &Build(BuildCounter(), "neupims:prompt_tokens_total",
                         "Number of prompt tokens of accepted requests.")
                       .Add(With({}));
  generation_tokens =
      &Build(BuildCounter(), "neupims:generation_tokens_total", "Number of generated tokens.")
           .Add(With({}));
  preemptions = &Build(BuildCounter(), "neupims:num_preemptions_total",
                       "Cumulative number of preemptions (recompute) by the scheduler.")
                     .Add(With({}));
  auto& success_family = Build(BuildCounter(), "neupims:request_success_total",
                               "Count of ended requests by finish reason.");
  for (Finish f : {Finish::kLength, Finish::kStop, Finish::kAborted, Finish::kRejected}) {
    success[static_cast<size_t>(f)] =
        &success_family.Add(With({{"finished_reason", FinishLabel(f)}}));
  }
  errors_family = &Build(BuildCounter(), "neupims:request_errors_total",
                         "Requests refused or failed by the API, by gRPC status code.");
  send_lag = &Build(BuildHistogram(), "neupims:token_send_lag_seconds",
                    "Realtime pacing: wall-clock seconds between a token's scheduled time (when "
                    "the simulated hardware produces it) and its hand-off to gRPC.")
                  .Add(With({}), prometheus::Histogram::BucketBoundaries{
                                     0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05,
                                     0.1, 0.25, 0.5, 1});
  ttft = &Build(BuildHistogram(), "neupims:time_to_first_token_seconds",
                "Histogram of time to first token in simulated seconds.")
              .Add(With({}), TtftBuckets());
  tpot = &Build(BuildHistogram(), "neupims:time_per_output_token_seconds",
                "Histogram of the gap between consecutive output tokens of a request in simulated "
                "seconds (one sample per decoded token).")
              .Add(With({}), TokenGapBuckets());
  itl = &Build(BuildHistogram(), "neupims:inter_token_latency_seconds",
               "Histogram of inter-token latency in simulated seconds (the samples of "
               "time_per_output_token_seconds).")
             .Add(With({}), TokenGapBuckets());
  request_tpot = &Build(BuildHistogram(), "neupims:request_time_per_output_token_seconds",
                        "Histogram of each finished request's mean time per output token in "
                        "simulated seconds.")
                      .Add(With({}), TokenGapBuckets());
  e2e = &Build(BuildHistogram(), "neupims:e2e_request_latency_seconds",
               "Histogram of end-to-end request latency in simulated seconds.")
             .Add(With({}), RequestBuckets());
  queue = &Build(BuildHistogram(), "neupims:request_queue_time_seconds",
                 "Histogram of time from arrival to first admission in simulated seconds.")
               .Add(With({}), RequestBuckets());
  prefill = &Build(BuildHistogram(), "neupims:request_prefill_time_seconds",
                   "Histogram of time from first admission to first token in simulated seconds.")
                 .Add(With({}), RequestBuckets());
  decode = &Build(BuildHistogram(), "neupims:request_decode_time_seconds",
                  "Histogram of time from first token to the last in simulated seconds.")
                .Add(With({}), RequestBuckets());

  // Iterations.
  iterations = &Build(BuildCounter(), "neupims:iterations_total",
                      "Number of engine iterations on the decode devices.")
                    .Add(With({}));
  iteration_latency = &Build(BuildHistogram(), "neupims:iteration_latency_seconds",
                             "Histogram of iteration duration in simulated seconds.")
                           .Add(With({}), TokenGapBuckets());
  iteration_tokens = &Build(BuildHistogram(), "neupims:iteration_tokens_total",
                            "Histogram of tokens per iteration (decoded + locally prefilled).")
                          .Add(With({}), IterationTokenBuckets());
  batch_size = &Build(BuildHistogram(), "neupims:batch_size",
                      "Histogram of decoding requests per iteration.")
                    .Add(With({}), BatchBuckets());
  auto& sub_batch_family = Build(BuildHistogram(), "neupims:sub_batch_size",
                                 "Histogram of decoding requests per sub-batch per iteration "
                                 "(Algorithm 3; sub-batch 2 is empty without interleaving).");
  sub_batch_size[0] = &sub_batch_family.Add(With({{"sub_batch", "1"}}), BatchBuckets());
  sub_batch_size[1] = &sub_batch_family.Add(With({{"sub_batch", "2"}}), BatchBuckets());
  channel_imbalance = &Build(BuildGauge(), "neupims:channel_load_imbalance",
                             "Busiest / mean PIM channel attention load of the last decoding "
                             "iteration.")
                           .Add(With({}));
  channel_imbalance->Set(1);

  // Hardware over the sliding window.
  systolic_util = &Build(BuildGauge(), "neupims:npu_systolic_utilization",
                         "NPU systolic-array busy time / iteration time over the window.")
                       .Add(With({}));
  vector_util = &Build(BuildGauge(), "neupims:npu_vector_utilization",
                       "NPU vector-unit busy time / iteration time over the window.")
                     .Add(With({}));
  pim_util = &Build(BuildGauge(), "neupims:pim_utilization",
                    "PIM MAC time per channel / iteration time over the window.")
                  .Add(With({}));
  hbm_util = &Build(BuildGauge(), "neupims:hbm_bandwidth_utilization",
                    "NPU HBM traffic / (peak HBM bandwidth x iteration time) over the window.")
                  .Add(With({}));
  interconnect_util = &Build(BuildGauge(), "neupims:interconnect_utilization",
                             "Device-interconnect busy time / iteration time over the window.")
                           .Add(With({}));
  pim_commands_family = &Build(BuildCounter(), "neupims:pim_commands_total",
                               "DRAM and PIM commands issued by the device group, by type.");
  auto& energy_family = Build(BuildCounter(), "neupims:energy_joules_total",
                              "Simulated energy of the device group (and the standalone "
                              "prefill NPUs), joules, by component.");
  energy_npu_dynamic = &energy_family.Add(With({{"component", "npu_dynamic"}}));
  energy_npu_static = &energy_family.Add(With({{"component", "npu_static"}}));
  energy_dram = &energy_family.Add(With({{"component", "dram"}}));
  energy_pim = &energy_family.Add(With({{"component", "pim"}}));
  energy_dram_background = &energy_family.Add(With({{"component", "dram_background"}}));
  energy_prefill = &energy_family.Add(With({{"component", "prefill_npus"}}));
  power = &Build(BuildGauge(), "neupims:power_watts",
                 "Simulated energy / simulated time over the window, watts.")
               .Add(With({}));

  // CNN models (docs/metrics.md, "CNN models").
  cnn_requests = &Build(BuildCounter(), "neupims:cnn_requests_total",
                        "ModelInfer requests of a CNN model by outcome (success or the gRPC "
                        "status code).");
  cnn_images = &Build(BuildCounter(), "neupims:cnn_images_total",
                      "Images inferred by a CNN model (the batch dimensions of its requests).");
  cnn_latency = &Build(BuildHistogram(), "neupims:cnn_request_latency_seconds",
                       "Histogram of a CNN request's latency (arrival to its last image's "
                       "completion) in simulated seconds.");
  cnn_queue = &Build(BuildHistogram(), "neupims:cnn_request_queue_seconds",
                     "Histogram of the time a CNN request's first image waited for busy stages "
                     "and links, simulated seconds.");
  cnn_busy = &Build(BuildCounter(), "neupims:cnn_device_busy_seconds_total",
                    "Simulated seconds a CNN partition's device (kind compute) or link (kind "
                    "link) was busy.");
  cnn_energy = &Build(BuildCounter(), "neupims:cnn_device_energy_joules_total",
                      "Simulated energy of a CNN partition's device or link, joules.");
  cnn_utilization = &Build(BuildGauge(), "neupims:cnn_device_utilization",
                           "Busy seconds / simulated seconds of a CNN partition's device or link "
                           "since the server started (0..1).");
  cnn_sim_time = &Build(BuildGauge(), "neupims:cnn_sim_time_seconds",
                        "Simulated time of a CNN model's pipeline, seconds.");

  absl::MutexLock l(&mu);
  for (int t = 0; t < hw::kNumCommandTypes; ++t) {
    const auto type = static_cast<hw::CommandType>(t);
    if (hw::IsPim(type)) {
      pim_commands[t] = &pim_commands_family->Add(With({{"command", hw::CommandName(type)}}));
    }
  }
}

void ServerMetrics::Impl::OnIteration(const engine::IterationRecord& it,
                                      const engine::EngineStats& stats) {
  // Per-iteration samples.
  const double duration_s =
      static_cast<double>(std::max<engine::SimTime>(0, it.end - it.start)) / kNsPerSecond;
  iteration_latency->Observe(duration_s);
  iteration_tokens->Observe(static_cast<double>(it.decode + it.prefill_tokens));
  batch_size->Observe(static_cast<double>(it.decode));
  sub_batch_size[0]->Observe(static_cast<double>(it.sub_batch[0]));
  sub_batch_size[1]->Observe(static_cast<double>(it.sub_batch[1]));
  if (it.decode > 0) {
    // Every decoding request got one token whose gap since its previous token is the iteration
    // (iterations of a running request are back to back): it.decode samples of one value.
    std::vector<double> increments(token_gap_buckets.size() + 1, 0.0);
    const auto bucket =
        std::lower_bound(token_gap_buckets.begin(), token_gap_buckets.end(), duration_s);
    increments[static_cast<size_t>(std::distance(token_gap_buckets.begin(), bucket))] =
        static_cast<double>(it.decode);
    tpot->ObserveMultiple(increments, duration_s * static_cast<double>(it.decode));
    itl->ObserveMultiple(increments, duration_s * static_cast<double>(it.decode));
    if (it.cost != nullptr) channel_imbalance->Set(it.cost->channel_imbalance);
  }

  absl::MutexLock l(&mu);
  // Counters from the growth of the cumulative statistics.
  const engine::EngineStats& p = previous;
  iterations->Increment(
      Growth(static_cast<double>(stats.iterations), static_cast<double>(p.iterations)));
  preemptions->Increment(
      Growth(static_cast<double>(stats.preemptions), static_cast<double>(p.preemptions)));
  const engine::HwCost d = engine::Growth(stats, p);
  for (int t = 0; t < hw::kNumCommandTypes; ++t) {
    if (d.pim_commands[t] <= 0) continue;
    if (pim_commands[t] == nullptr) {
      pim_commands[t] = &pim_commands_family->Add(
          With({{"command", hw::CommandName(static_cast<hw::CommandType>(t))}}));
    }
    // Stats count one device's commands.
    pim_commands[t]->Increment(static_cast<double>(d.pim_commands[t]) * devices);
  }
  const double e_prefill = Growth(stats.prefill_j, p.prefill_j);
  energy_npu_dynamic->Increment(d.npu_dynamic_j);
  energy_npu_static->Increment(d.npu_static_j);
  energy_dram->Increment(d.dram_j);
  energy_pim->Increment(d.pim_j);
  energy_dram_background->Increment(d.dram_background_j);
  energy_prefill->Increment(e_prefill);

  // Sliding window. The first snapshot is the baseline before anything was counted: at the
  // engine's first event (or this iteration's start).
  if (window.empty()) {
    const engine::SimTime t0 =
        stats.first_event >= 0 ? std::min(stats.first_event, it.start) : it.start;
    window.push_back({t0, totals});
  }
  totals.busy_ns += Growth(static_cast<double>(stats.busy_ns), static_cast<double>(p.busy_ns));
  totals.hw += d;
  totals.prefill_j += e_prefill;
  previous = stats;
  const engine::SimTime t = std::max(it.end, window.back().t);
  window.push_back({t, totals});
  UpdateWindow(t);
  // The clock follows every iteration, not only the sampled load updates (SetLoad), so a scrape
  // after a response never shows a clock behind the iterations it already counts.
  sim_time->Set(static_cast<double>(now) / kNsPerSecond);
}

void ServerMetrics::Impl::UpdateWindow(engine::SimTime t) {
  now = std::max(now, t);
  if (window.empty()) return;
  // Keep the newest snapshot at least kWindowNs old as the window's start.
  while (window.size() > 1 && window[1].t <= now - kWindowNs) window.pop_front();
  while (window.size() > kMaxWindowIterations + 1) window.pop_front();
  const Totals& a = window.front().totals;
  const Totals& b = window.back().totals;
  const double busy = b.busy_ns - a.busy_ns;
  auto ratio = [busy](double x) { return busy > 0 ? std::max(0.0, x) / busy : 0.0; };
  systolic_util->Set(ratio(b.hw.systolic_busy_ns - a.hw.systolic_busy_ns));
  vector_util->Set(ratio(b.hw.vector_busy_ns - a.hw.vector_busy_ns));
  pim_util->Set(ratio((b.hw.pim_mac_ns - a.hw.pim_mac_ns) / channels));
  hbm_util->Set(peak_hbm_bytes_per_ns > 0
                    ? ratio((b.hw.npu_hbm_bytes - a.hw.npu_hbm_bytes) / peak_hbm_bytes_per_ns)
                    : 0.0);
  interconnect_util->Set(ratio(b.hw.interconnect_busy_ns - a.hw.interconnect_busy_ns));
  const double elapsed_s = static_cast<double>(now - window.front().t) / kNsPerSecond;
  power->Set(elapsed_s > 0 ? std::max(0.0, b.energy_j() - a.energy_j()) / elapsed_s : 0.0);
}

void ServerMetrics::Impl::SetLoad(const engine::EngineLoad& load, double sim_time_s,
                                  double sim_wall_ratio) {
  running->Set(static_cast<double>(load.running));
  waiting->Set(static_cast<double>(load.waiting));
  prefilling->Set(static_cast<double>(load.prefilling));
  kv_usage->Set(load.kv_usage);
  sim_wall_ratio_gauge->Set(std::isfinite(sim_wall_ratio) ? sim_wall_ratio : 0.0);

  absl::MutexLock l(&mu);
  for (size_t c = 0; c < load.channel_kv_usage.size(); ++c) {
    if (c >= channel_kv.size()) {
      channel_kv.push_back(&channel_kv_family->Add(With({{"channel", std::to_string(c)}})));
    }
    channel_kv[c]->Set(load.channel_kv_usage[c]);
  }
  if (sim_time_s >= 0) UpdateWindow(static_cast<engine::SimTime>(sim_time_s * kNsPerSecond));
  sim_time->Set(static_cast<double>(now) / kNsPerSecond);  // monotonic: the latest of both
}

ServerMetrics::ServerMetrics(std::shared_ptr<prometheus::Registry> registry,
                             const std::string& model_name, const hw::DeviceConfig& device,
                             int devices)
    : impl_(std::make_unique<Impl>(std::move(registry), model_name, device, devices)) {}

ServerMetrics::~ServerMetrics() = default;

void ServerMetrics::OnPromptTokens(int64_t n) {
  if (n > 0) impl_->prompt_tokens->Increment(static_cast<double>(n));
}

void ServerMetrics::OnGenerationTokens(int64_t n) {
  if (n > 0) impl_->generation_tokens->Increment(static_cast<double>(n));
}

void ServerMetrics::OnFinished(const engine::Request& r, const Completion& c) {
  Impl& m = *impl_;
  m.success[static_cast<size_t>(c.reason)]->Increment();
  if (c.reason == Finish::kRejected) return;  // never admitted: no latencies
  // A first token, an admission and its prefill happened whatever ended the request.
  const scheduler::RequestLatencies l = scheduler::Latencies(r);
  ObserveSpan(*m.ttft, l.ttft_ns);
  ObserveSpan(*m.queue, l.queue_ns);
  ObserveSpan(*m.prefill, l.prefill_ns);
  if (c.reason == Finish::kAborted) return;  // its end is the client's choice, not a latency
  ObserveSpan(*m.e2e, l.e2e_ns);
  ObserveSpan(*m.decode, l.decode_ns);
  if (l.tpot_ns) m.request_tpot->Observe(*l.tpot_ns / kNsPerSecond);
}

void ServerMetrics::OnIteration(const engine::IterationRecord& it,
                                const engine::EngineStats& stats) {
  impl_->OnIteration(it, stats);
}

void ServerMetrics::SetLoad(const engine::EngineLoad& load, double sim_time_s,
                            double sim_wall_ratio) {
  impl_->SetLoad(load, sim_time_s, sim_wall_ratio);
}

void ServerMetrics::OnRequestError(const std::string& code) {
  impl_->errors_family->Add(impl_->With({{"code", code.empty() ? std::string("UNKNOWN") : code}}))
      .Increment();
}

void ServerMetrics::OnEngineFault() { impl_->engine_faults->Increment(); }

void ServerMetrics::OnStreamBufferOverflow(FrontEnd front_end) {
  impl_->stream_overflows[static_cast<size_t>(front_end)]->Increment();
}

void ServerMetrics::SetDraining(bool draining) { impl_->draining->Set(draining ? 1.0 : 0.0); }

void ServerMetrics::OnTokenSendLag(double seconds) {
  if (std::isfinite(seconds)) impl_->send_lag->Observe(std::max(0.0, seconds));
}

void ServerMetrics::OnCnnRequest(const std::string& model, const std::string& outcome,
                                 const CnnResult* result) {
  Impl& m = *impl_;
  const prometheus::Labels labels{{"model_name", model}};
  m.cnn_requests->Add({{"model_name", model}, {"outcome", outcome}}).Increment();
  if (result == nullptr) return;
  m.cnn_images->Add(labels).Increment(static_cast<double>(result->images));
  m.cnn_latency->Add(labels, CnnLatencyBuckets()).Observe(result->latency_s());
  m.cnn_queue->Add(labels, CnnLatencyBuckets()).Observe(result->queue_s);
}

void ServerMetrics::OnCnnResource(const std::string& model, const std::string& resource, bool link,
                                  double busy_s, double energy_j, double utilization) {
  Impl& m = *impl_;
  const prometheus::Labels labels{
      {"model_name", model}, {"device", resource}, {"kind", link ? "link" : "compute"}};
  m.cnn_busy->Add(labels).Increment(std::max(0.0, busy_s));
  m.cnn_energy->Add(labels).Increment(std::max(0.0, energy_j));
  m.cnn_utilization->Add(labels).Set(std::isfinite(utilization) ? utilization : 0.0);
}

void ServerMetrics::SetCnnSimTime(const std::string& model, double sim_time_s) {
  impl_->cnn_sim_time->Add({{"model_name", model}}).Set(sim_time_s);
}

std::shared_ptr<prometheus::Registry> ServerMetrics::registry() const { return impl_->registry; }

}  // namespace neupims::server
