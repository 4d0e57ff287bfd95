// EngineRunner: the serving engine on its own thread, with a thread-safe front.
//
// Role: owns the one Engine of the server and the only thread that touches it. gRPC handlers
// (any thread) call Submit / Abort / Info; the calls are handed to the engine thread through a
// mutex-guarded command queue and answered synchronously, so validation errors reach the client
// as statuses. Tokens and completions come back through each request's RequestSink, called on
// the engine thread (sinks must not block).
//
// Pacing: in "realtime" simulated time follows the wall clock (times `speed`): the engine thread
// sleeps until the wall time at which the next simulated event is due, so tokens reach clients
// when the modelled hardware would emit them. It wakes at least every kIdleRefresh even without
// events, so that the simulated clock and the load gauges keep moving on an idle server (the
// utilisation and power gauges decay to 0 once their window holds no iteration). In "fast" the
// engine runs events as fast as it can and new requests arrive at the engine's current simulated
// time. Both give identical simulated results for identical arrivals. This is the only place below
// the gRPC layer that reads the wall clock.
//
// Faults: an error from the engine (Engine::AdvanceTo: a broken invariant in the scheduler, the KV
// cache or a hardware model) stops it for good: every live request ends with INTERNAL and the
// error, Submit answers UNAVAILABLE, the snapshot says faulted (health NOT_SERVING), the metrics
// count it (neupims:engine_faults_total), the fault handler runs and stderr says what broke.
//
// Shutdown: BeginDrain() makes Submit fail with UNAVAILABLE; WaitDrained() waits until no request
// is live (or a timeout), Stop() aborts what is left and joins the thread.
#ifndef NEUPIMS_SERVER_ENGINE_RUNNER_H_
#define NEUPIMS_SERVER_ENGINE_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/enum_names.h"
#include "engine/engine.h"
#include "server/busy_clock.h"
#include "server/tokenizer.h"

namespace neupims::server {

class ServerMetrics;

enum class Pacing { kRealtime, kFast };
// "realtime", "fast".
const EnumNames<Pacing>& PacingNames();
const char* ToString(Pacing p);

struct GeneratedToken {
  int64_t index = 0;
  int64_t id = 0;
  double sim_time_s = 0;
};

enum class Finish { kLength, kStop, kAborted, kRejected };

struct Completion {
  std::string request_id;
  Finish reason = Finish::kLength;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double queue_time_s = 0, ttft_s = 0, tpot_s = 0, e2e_latency_s = 0;
  int pim_channel = -1;
  int preemptions = 0;
  std::string error;
  // OK, or why the request could not end normally: INTERNAL when the engine faulted (a broken
  // invariant; `error` says what broke). Front ends end the call with this status.
  absl::Status status;
};

// Receives one request's output on the engine thread.
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // The engine accepted the request under `request_id`. Called on the engine thread inside
  // Submit, before any of the request's tokens: a sink that may abort its own request (a stream
  // that overflows its buffer) knows the id by its first token. (Learning it only when Submit
  // returned on the caller's thread let a fast-paced engine finish the request first, so an
  // overflow's abort found nothing to abort.)
  virtual void OnAccepted(const std::string& request_id) { (void)request_id; }
  // `tokens` is valid for the call only (the engine thread reuses the vector): copy what is kept.
  virtual void OnTokens(const std::vector<GeneratedToken>& tokens) = 0;
  virtual void OnComplete(const Completion& completion) = 0;
};

struct SubmitArgs {
  std::string request_id;  // empty: generated
  int64_t prompt_tokens = 1;
  int64_t max_new_tokens = 1;
  bool ignore_eos = false;
  uint64_t seed = 0;
  int priority = 0;
};

// Facts about the served engine, fixed when the runner creates it.
struct ServedEngine {
  models::ModelConfig model;
  hw::DeviceConfig device;
  std::string mode;  // system mode name
  models::Parallelism parallelism;
  int64_t max_waiting = 0;  // 0: unbounded
};

// What gRPC handlers may read of the engine: they never touch the engine itself, which belongs
// to the engine thread.
struct ServerSnapshot {
  std::shared_ptr<const ServedEngine> served;  // set at creation, never null
  int64_t running = 0, waiting = 0, prefilling = 0;
  double kv_usage = 0;
  std::vector<double> channel_kv_usage;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  double sim_time_s = 0;
  int64_t iterations = 0;
  int64_t live = 0;  // requests submitted and not yet completed
  bool draining = false;
  bool faulted = false;  // the engine met a broken invariant and stopped (EngineRunner::fault)
};

struct RunnerOptions {
  engine::EngineOptions engine;
  Pacing pacing = Pacing::kRealtime;
  double speed = 1.0;               // simulated seconds per wall second (realtime)
  double mean_output_tokens = 256;  // synthetic end-of-sequence (without ignore_eos)
  bool record_send_lag = false;     // keep every send-lag sample (benchmarks; RecordSendLag)
};

class EngineRunner {
 public:
  // Realtime pacing: the longest the engine thread sleeps without an event or a command.
  static constexpr absl::Duration kIdleRefresh = absl::Milliseconds(250);

  // Creates the engine (errors: bad model/device/mode...) and starts the engine thread.
  static absl::StatusOr<std::unique_ptr<EngineRunner>> Create(const RunnerOptions& options,
                                                              ServerMetrics* metrics);
  ~EngineRunner();

  // Thread-safe. Returns the request id, or UNAVAILABLE (draining), the engine's verdict on the
  // request as asked (Engine::CheckRequest: INVALID_ARGUMENT naming the field), ALREADY_EXISTS
  // for a live request id, or the engine's admission error (RESOURCE_EXHAUSTED).
  absl::StatusOr<std::string> Submit(const SubmitArgs& args, std::shared_ptr<RequestSink> sink);
  // Thread-safe; NOT_FOUND if no live request has this id.
  absl::Status Abort(const std::string& request_id);
  // Thread-safe, asynchronous (for cancelled streams: never blocks the caller).
  void AbortAsync(const std::string& request_id);
  ServerSnapshot Snapshot();
  // Attaches the metrics sink (applied on the engine thread).
  void SetMetrics(ServerMetrics* metrics);

  // Realtime pacing: the wall-clock lag between a token's scheduled time (when the modelled
  // hardware produces it) and the moment the server hands its message to gRPC. Streams call it
  // for every token message they start writing; it feeds neupims:token_send_lag_seconds and, with
  // record_send_lag, the samples TakeSendLags() returns. No-op in fast pacing.
  void RecordSendLag(double first_token_sim_time_s);
  std::vector<double> TakeSendLags();

  // Called once, on the engine thread, when the engine faults (the server turns health
  // NOT_SERVING). Set it before requests arrive.
  void SetFaultHandler(std::function<void(const absl::Status&)> handler);
  // Thread-safe: Engine::CheckInvariants on the engine thread (soak tests); UNAVAILABLE once
  // the runner has stopped.
  absl::Status CheckInvariants();
  // Test hook: the engine's KV cache fails its next Free (applied on the engine thread).
  void InjectKvFaultForTesting();

  void BeginDrain();
  // Waits until no request is live or `timeout` passes; true if drained.
  bool WaitDrained(std::chrono::milliseconds timeout);
  // Aborts whatever is left and stops the engine thread.
  void Stop();

  const RunnerOptions& options() const { return options_; }
  const ByteTokenizer& tokenizer() const { return tokenizer_; }

 private:
  class Observer;
  struct Live {
    std::string id;
    std::shared_ptr<RequestSink> sink;
    uint64_t seed = 0;
    bool stop_early = false;  // synthetic EOS before max_new_tokens
    // Tokens handed to the sink. The completion reports this count: a standalone prefill's
    // token reaches the client before the engine counts it (when the KV cache has arrived), so
    // an abort in between must not report one token fewer than the client received.
    int64_t delivered = 0;
  };
  struct Command {
    std::function<void()> run;
  };

  EngineRunner(const RunnerOptions& options, ServerMetrics* metrics);
  void Loop();
  void Post(std::function<void()> fn);
  // Runs `fn` on the engine thread and waits for it.
  void Call(std::function<void()> fn);
  engine::SimTime SimNow() const;  // realtime: wall-clock-mapped simulated time
  double WallSeconds() const;      // since the engine started
  // The simulated time a client would see now: the wall-mapped time under realtime pacing (the
  // engine's clock only moves when the engine thread wakes), the engine's clock under fast.
  double CurrentSimSeconds() const;
  bool HasWork() const;  // live requests or pending events (engine thread)
  void ObserveBusy();    // feeds busy_clock_ (engine thread)
  void UpdateLoadMetrics();
  // Engine thread: the engine returned `error`; ends every live request (see Faults above).
  void EnterFault(const absl::Status& error);

  RunnerOptions options_;
  ServerMetrics* metrics_;
  ByteTokenizer tokenizer_;
  std::unique_ptr<engine::Engine> engine_;
  std::shared_ptr<const ServedEngine> served_;  // immutable after Create
  std::unique_ptr<Observer> observer_;
  std::chrono::steady_clock::time_point wall_start_;

  absl::Mutex mu_;
  std::deque<Command> commands_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fault_ ABSL_GUARDED_BY(mu_);
  int64_t live_count_ ABSL_GUARDED_BY(mu_) = 0;
  ServerSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
  absl::Mutex lag_mu_;
  std::vector<double> send_lags_ ABSL_GUARDED_BY(lag_mu_);

  // Engine-thread state.
  absl::flat_hash_map<int64_t, Live> live_;            // by engine id
  absl::flat_hash_map<std::string, int64_t> by_name_;  // request id -> engine id
  int64_t next_engine_id_ = 1;
  int64_t next_name_ = 1;
  BusyClock busy_clock_;
  bool busy_ = false;
  std::function<void(const absl::Status&)> fault_handler_;
  std::thread thread_;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_ENGINE_RUNNER_H_
