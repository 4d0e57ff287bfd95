// ServerMetrics: the Prometheus metrics of the server (exposed on their own port at /metrics).
//
// Names carry the `neupims:` prefix (as vLLM's carry `vllm:`) and the label
// model_name="<served model>". Where vLLM has a metric with the same meaning, we use its name
// and semantics with our prefix; the rest shows what only this engine can: NPU systolic / vector
// and PIM utilisation, HBM bandwidth utilisation, PIM commands by type, channel load imbalance,
// sub-batch sizes, simulated energy and power, simulated-time / wall-time ratio. Every metric is
// documented in docs/metrics.md.
//
// Threading: the On* / Set* methods are called from the engine thread (and OnRequestError from
// gRPC handler threads); prometheus-cpp metrics are thread-safe.
#ifndef NEUPIMS_SERVER_METRICS_H_
#define NEUPIMS_SERVER_METRICS_H_

#include <memory>
#include <string>

#include "engine/engine.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace neupims::server {

struct Completion;
struct CnnResult;

class ServerMetrics {
 public:
  // `device` supplies channel count and peak bandwidth for the derived gauges; `devices` is the
  // size of the TP x PP device group (energy and PIM commands are totals over the group).
  ServerMetrics(std::shared_ptr<prometheus::Registry> registry, const std::string& model_name,
                const hw::DeviceConfig& device, int devices);
  ~ServerMetrics();

  // Tokens of prompts accepted / tokens generated.
  void OnPromptTokens(int64_t n);
  void OnGenerationTokens(int64_t n);
  // A request ended (finished, aborted or rejected): success counter by finish reason and the
  // latency histograms (TTFT, TPOT, end-to-end, queue, prefill, decode; simulated seconds).
  void OnFinished(const engine::Request& r, const Completion& c);
  // After every iteration: iteration latency, batch and sub-batch sizes, tokens per iteration,
  // preemptions, and the engine's cumulative statistics (utilisation over a sliding window,
  // PIM commands, energy, power).
  void OnIteration(const engine::IterationRecord& it, const engine::EngineStats& stats);
  // Load gauges: running / waiting / prefilling requests, KV usage (total and per channel),
  // simulated time, and simulated seconds per wall second while busy (BusyClock::ratio). A later
  // simulated time also moves the sliding window on, so idle gauges decay to 0.
  void SetLoad(const engine::EngineLoad& load, double sim_time_s, double sim_wall_ratio);
  // A request refused before reaching the engine or failed by the API, by gRPC code name.
  void OnRequestError(const std::string& code);
  // The engine met a broken invariant and stopped (EngineRunner's faults):
  // neupims:engine_faults_total.
  void OnEngineFault();
  // A stream whose client stopped reading outgrew --max-stream-buffer and was ended (gRPC:
  // RESOURCE_EXHAUSTED; HTTP SSE: an error event or a closed connection), its request aborted:
  // neupims:stream_buffer_overflows_total{front_end="grpc"|"http"}.
  enum class FrontEnd { kGrpc, kHttp };
  void OnStreamBufferOverflow(FrontEnd front_end);
  // The server stopped accepting requests (SIGTERM, Server::Drain): neupims:server_draining 1.
  void SetDraining(bool draining);
  // Realtime pacing: wall seconds between a token's scheduled time and its hand-off to gRPC
  // (neupims:token_send_lag_seconds; called from the engine and gRPC threads).
  void OnTokenSendLag(double seconds);

  // CNN models (KServe v2 ModelInfer; called from gRPC handler and CNN runner threads):
  // a request ended with `outcome` ("success" or a gRPC code name); with its `result` when it
  // succeeded (images, latency and queue histograms).
  void OnCnnRequest(const std::string& model, const std::string& outcome, const CnnResult* result);
  // Growth of one partition resource's busy time and energy, and its utilisation so far.
  void OnCnnResource(const std::string& model, const std::string& resource, bool link,
                     double busy_s, double energy_j, double utilization);
  void SetCnnSimTime(const std::string& model, double sim_time_s);

  std::shared_ptr<prometheus::Registry> registry() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_METRICS_H_
