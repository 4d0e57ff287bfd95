// Engine: the serving simulation. One narrow API used by the offline replay CLI and the gRPC
// server alike (there is one engine, not two copies of the scheduling logic).
//
// Role: owns the requests, the paged KV cache on PIM channels (kv_cache/), the iteration-level
// scheduler (scheduler/), the iteration model on the hardware models (iteration_model.h) and,
// when prefill is delegated to standalone NPUs (NeuPIMs sec. 4), their pool and the KV-cache
// transfer link. Simulated time advances event by event:
//   arrival -> (scheduler admits at an iteration boundary) -> prefill (local: inside the next
//   iteration; standalone: on a prefill NPU group, then the KV cache crosses the link) ->
//   one token per iteration -> finished (or aborted / rejected)
// Tokens are produced at iteration ends (Orca: the batch changes only at iteration
// boundaries); a standalone prefill produces the first token when it completes.
//
// Driving it: Submit() requests (arrival >= now), then AdvanceTo(t) processes every event up to
// simulated time t; NextEventTime() tells when the next one is due, so a realtime driver can
// sleep until then and a fast driver calls RunToCompletion(). The engine never reads the wall
// clock; simulated results depend only on the submitted arrivals.
//
// Contract: not thread-safe: one thread drives it (the server's engine thread). Observer
// callbacks run on that thread, inside AdvanceTo().
#ifndef NEUPIMS_ENGINE_ENGINE_H_
#define NEUPIMS_ENGINE_ENGINE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/iteration_model.h"
#include "engine/options.h"
#include "engine/system_mode.h"
#include "kv_cache/block_manager.h"
#include "scheduler/mha_estimator.h"
#include "scheduler/request.h"
#include "scheduler/scheduler.h"

namespace neupims::engine {

using scheduler::Request;
using scheduler::RequestId;
using scheduler::SimTime;

struct EngineOptions {
  std::string model = "gpt3-7b";
  SystemModeKind mode = SystemModeKind::kNeuPims;
  std::optional<std::string> device;  // default: the mode's device (neupims, newton, npu-only)
  // An in-memory device, used instead of `device` (experiments that edit one switch at a time).
  std::optional<hw::DeviceConfig> device_config;
  // Ablation overrides of the mode (Figure 13); unset = the mode's choice.
  std::optional<bool> dual_row_buffers;
  std::optional<SubBatchInterleaving> sub_batch_interleaving;
  // Auto interleaving: only when each pipeline micro-batch decodes at least this many requests
  // (the NeuPIMs reference enables sub-batch interleaving from batch 256 on).
  int sbi_min_batch = 256;
  std::optional<scheduler::ChannelPolicy> channel_policy;
  std::optional<int> tp, pp;  // unset: the model's default (Table 3)
  int max_batch = 256;
  int64_t max_prefill_tokens = 8192;  // prompt tokens admitted per iteration
  int block_tokens = 32;              // KV block = one key tile of 32 banks
  double kv_watermark = 0.01;
  MhaEstimatorKind mha_estimator = MhaEstimatorKind::kAnalytic;
  PrefillPlacement prefill = PrefillPlacement::kStandalone;
  int prefill_groups = 1;               // standalone prefill instances (tp x pp NPUs each)
  int64_t prefill_batch_tokens = 4096;  // prompt tokens per standalone prefill batch
  LinkSpec prefill_link{64, 2000};      // KV transfer, prefill NPUs -> NeuPIMs devices
  LinkSpec interconnect{64, 1000};      // tensor/pipeline-parallel links between devices
  hw::DetailLevel level = hw::DetailLevel::kAnalytic;  // hardware detail
  std::optional<int64_t> max_waiting;                  // admission control: unset = unbounded
  // Longest prompt accepted (tokens); unset = the model's context is the only limit.
  std::optional<int64_t> max_prompt_tokens;
};

struct SubmitSpec {
  RequestId id = 0;
  int64_t prompt_tokens = 1;
  int64_t max_new_tokens = 1;
  SimTime arrival = 0;  // clamped to now() if earlier
  int priority = 0;
};

struct IterationRecord {
  int64_t index = 0;
  SimTime start = 0, end = 0;
  int64_t decode = 0, prefill = 0, preempted = 0;
  std::array<int64_t, 2> sub_batch{};
  int64_t prefill_tokens = 0;
  double kv_usage = 0;
  const IterationCost* cost = nullptr;  // valid during the callback
};

// A request and the index of the one token it produced in an iteration.
using EmittedToken = scheduler::StepToken;

class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // Tokens first_index .. first_index + count - 1 of `r` were produced at simulated time `t`.
  // For the token of a standalone prefill (the only tokens reported through OnTokens alone, not
  // through OnIterationTokens / OnIterationGaps) the call comes before the request is updated:
  // `r.last_token` is still the previous token's time (kNoTime before the first), so an observer
  // of gaps takes t - r.last_token there. Through OnIterationTokens' default, r is already
  // updated (r.last_token == t).
  virtual void OnTokens(const Request& /*r*/, int64_t /*first_index*/, int /*count*/,
                        SimTime /*t*/) {}
  // One token of every request in `tokens` (in batch order) at the end of an iteration at `t`.
  // The default reports each through OnTokens; an observer that counts every token overrides
  // it to spend one virtual call per iteration instead of one per token.
  virtual void OnIterationTokens(absl::Span<const EmittedToken> tokens, SimTime t) {
    for (const auto& [r, index] : tokens) OnTokens(*r, index, 1, t);
  }
  // The same tokens as inter-token gaps (scheduler::StepGaps: a count of tokens that share the
  // gap t - gaps.previous, and the others with their previous token's time), called after
  // OnIterationTokens when that is wanted (WantsIterationTokens): an observer of gaps visits only
  // the tokens that do not continue from the previous iteration. Standalone prefills' tokens (a
  // recompute after a preemption has a gap too) are not among them: they arrive only through
  // OnTokens, above.
  virtual void OnIterationGaps(const scheduler::StepGaps& /*gaps*/, SimTime /*t*/) {}
  // False: this observer needs no OnIterationTokens (it counts tokens from OnIterationGaps:
  // gaps.continuing + gaps.others.size()), so the scheduler does not list them per token.
  // Asked once per iteration.
  virtual bool WantsIterationTokens() const { return true; }
  // `r` ended (finish_reason says how); it is released after this call.
  virtual void OnFinished(const Request& /*r*/) {}
  virtual void OnIteration(const IterationRecord& /*it*/) {}
};

// Cumulative statistics: the decode device group's HwCost (hw_cost.h) plus event counters.
struct EngineStats : HwCost {
  int64_t iterations = 0;
  SimTime busy_ns = 0;  // decode-device time spent in iterations
  SimTime first_event = -1, last_event = 0;
  int64_t submitted = 0, finished = 0, aborted = 0, rejected = 0, preemptions = 0;
  int64_t decode_tokens = 0, prompt_tokens_computed = 0;
  int64_t batch_sum = 0;  // sum over iterations of decoding requests
  std::array<int64_t, 2> sub_batch_sum{};
  double channel_imbalance_sum = 0;
  int64_t pim_iterations = 0;
  double prefill_j = 0;        // standalone prefill NPUs
  double prefill_busy_ns = 0;  // summed over prefill groups

  // The decode group's energy plus the standalone prefill NPUs'.
  double energy_j() const { return HwCost::energy_j() + prefill_j; }
};

struct EngineLoad {
  int64_t running = 0, waiting = 0, prefilling = 0;
  double kv_usage = 0;
  std::vector<double> channel_kv_usage;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
};

// Engine::CheckRequest marks the errors of a request too long for the model's context or a PIM
// channel with this payload (the code stays InvalidArgument, as it is for gRPC), so that a front
// end whose protocol has a status of its own for it (HTTP 413) can tell them apart.
inline constexpr absl::string_view kRequestTooLargePayload = "type.neupims/RequestTooLarge";
bool IsRequestTooLarge(const absl::Status& status);

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  ~Engine();

  // The one validation of a request's contents, run by Submit and by callers that must check a
  // request before submitting it (the server checks what the client asked for before cutting it
  // to a synthetic end of sequence). InvalidArgument naming the field for lengths < 1, or for a
  // request that cannot fit the model's context or a PIM channel (those carry
  // kRequestTooLargePayload). Reads no engine state that
  // changes, so the answer does not depend on the load.
  absl::Status CheckRequest(const SubmitSpec& spec) const;
  // Queues a request: CheckRequest, then AlreadyExists for a live id and ResourceExhausted when
  // the waiting queue is at max_waiting; UNAVAILABLE once the engine has faulted (fault()).
  absl::Status Submit(const SubmitSpec& spec);
  // Ends a request wherever it is and frees its KV blocks; NotFound if unknown or ended.
  absl::Status Abort(RequestId id);

  void set_observer(EngineObserver* observer) { observer_ = observer; }
  // Timelines are recorded for the first `n` iterations (IterationRecord::cost->timeline).
  void set_timeline_iterations(int64_t n) { timeline_iterations_ = n; }

  SimTime now() const { return now_; }
  // Simulated time of the next pending event, or kNoTime when nothing is scheduled.
  SimTime NextEventTime() const;
  // Processes the events up to `t`. An error means a broken invariant (scheduler::fault(), a
  // KV-cache or hardware-model error): the engine's state is suspect and every later call
  // returns the same error (fault()); the caller ends the live requests.
  absl::Status AdvanceTo(SimTime t);
  absl::Status RunToCompletion();
  bool Idle() const { return events_.empty(); }
  // OK, or the first error AdvanceTo met (sticky).
  const absl::Status& fault() const { return fault_; }
  // The engine's consistency checks, for soak tests (O(blocks + requests)): the sticky fault,
  // the KV cache's own invariants (kv_cache::BlockManager::CheckInvariants), every request
  // holding KV blocks is a live request, the KV cache's decode stream holds exactly the
  // decoding requests (and the scheduler lists them: Scheduler::CheckInvariants), and the
  // scheduler's queues hold no more requests than are live. The first broken one as INTERNAL.
  absl::Status CheckInvariants() const;
  // Test hook: the KV cache's next Free fails (kv_cache::BlockManager::FailNextFreeForTesting).
  void InjectKvFaultForTesting() { kv_->FailNextFreeForTesting(); }

  const EngineStats& stats() const { return stats_; }
  EngineLoad Load() const;
  const Request* Find(RequestId id) const;

  // Single-iteration study (`neupims step`): one decode iteration of a given batch, channels
  // assigned by the mode's policy where `channel` < 0, sub-batches by Algorithm 3. `layers` = 0
  // runs the device's whole stage, else that many decoder layers. Does not touch the engine's
  // requests or KV cache.
  struct StepRequest {
    int64_t seq_len = 1;
    int channel = -1;
  };
  absl::StatusOr<IterationCost> SimulateStep(const std::vector<StepRequest>& batch, int layers,
                                             bool timeline);
  // SimulateStep's check of one request (InvalidArgument naming seq_len or channel), for callers
  // that can say where the request came from (a batch file's line).
  absl::Status CheckStepRequest(const StepRequest& r) const;

  const models::ModelConfig& model() const { return iteration_->options().model; }
  const hw::DeviceConfig& device() const { return iteration_->options().device; }
  const SystemMode& mode() const { return iteration_->options().mode; }
  const models::Parallelism& parallelism() const { return iteration_->options().parallelism; }
  const EngineOptions& options() const { return options_; }
  const IterationModel& iteration_model() const { return *iteration_; }
  int kv_channels() const;
  int64_t kv_blocks_per_channel() const;

 private:
  enum class EventKind { kArrival, kIterationEnd, kPrefillDone, kKvReady };
  struct Event {
    SimTime time;
    int64_t seq;
    EventKind kind;
    int64_t arg;  // request id / prefill batch id
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct PrefillBatch {
    std::vector<RequestId> requests;
    int group = 0;
  };

  explicit Engine(const EngineOptions& options);
  void Push(SimTime t, EventKind kind, int64_t arg);
  absl::Status Process(const Event& e);
  absl::Status MaybeStartIteration();
  absl::Status EndIteration();
  absl::Status DispatchPrefill();
  // A prefill batch's id list: one a finished batch gave back (empty, with its capacity) when
  // there is one.
  std::vector<RequestId> TakeRequestList();
  void GiveBackRequestList(std::vector<RequestId> list);
  void Release(Request* r);
  void Notify(Request* r);
  Request* Get(RequestId id);

  EngineOptions options_;
  std::unique_ptr<IterationModel> iteration_;
  std::unique_ptr<IterationModel> prefill_model_;  // standalone prefill NPUs (npu-only)
  std::unique_ptr<hw::PimModel> estimator_pim_;
  std::unique_ptr<scheduler::MhaEstimator> estimator_;
  std::unique_ptr<kv_cache::BlockManager> kv_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  EngineObserver* observer_ = nullptr;

  absl::flat_hash_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<std::unique_ptr<Request>> graveyard_;  // ended, freed at the next boundary
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t event_seq_ = 0;
  SimTime now_ = 0;

  // The iteration in flight.
  bool in_flight_ = false;
  scheduler::ScheduleOutput current_;
  IterationCost current_cost_;
  IterationInput iteration_input_;  // scratch of MaybeStartIteration
  SimTime iteration_start_ = 0;
  int64_t timeline_iterations_ = 0;

  // Requests submitted whose arrival event has not been processed (count toward max_waiting).
  int64_t pending_arrivals_ = 0;
  // Standalone prefill pool.
  std::deque<RequestId> prefill_queue_;
  // Time the standalone prefill produced a request's next token, until its KV cache arrives.
  absl::flat_hash_map<RequestId, SimTime> prefill_token_time_;
  std::vector<SimTime> prefill_free_at_;
  absl::flat_hash_map<int64_t, PrefillBatch> prefill_batches_;
  IterationInput prefill_input_;  // scratch of DispatchPrefill: the batch's prompts
  // Id lists of finished batches (at most one per batch in flight, so at most prefill_groups).
  std::vector<std::vector<RequestId>> spare_request_lists_;
  int64_t next_prefill_batch_ = 0;

  EngineStats stats_;
  absl::Status fault_;
};

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_ENGINE_H_
