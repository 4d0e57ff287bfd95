// Scheduler: Orca-style iteration-level scheduling over a paged, per-channel KV cache.
//
// Role: decides, once per iteration, which requests run. Requests join and leave the batch at
// iteration boundaries (Orca); KV blocks come from the channel-partitioned BlockManager (vLLM
// paging; NeuPIMs puts each request's KV in one PIM channel). One step:
//   1. every decoding request reserves a slot for its newest token (the KV cache's decode
//      stream; after a refused tick one by one, TryAppendSlot); if its channel
//      is full, the most recently arrived running request of that channel is preempted
//      (recompute: its KV is freed, it waits again at its arrival position) until it fits;
//   2. if nothing was preempted, waiting requests are admitted FCFS (priority first) while the
//      batch limit, the prefill-token budget and the KV cache allow; a request that can never
//      fit a channel is rejected;
//   3. admitted requests get channels: round-robin (the NPU+PIM baseline) or greedy min-load
//      bin packing driven by the MHA estimate (Algorithm 2), longest first;
//   4. the decoding requests are split into two sub-batches per channel (Algorithm 3).
// The engine executes the step and reports back (CompleteStep / PrefillDone).
//
// Contract: single-threaded; Request objects are owned by the caller and must outlive their
// time in the scheduler; never reads the wall clock (times are passed in).
#ifndef NEUPIMS_SCHEDULER_SCHEDULER_H_
#define NEUPIMS_SCHEDULER_SCHEDULER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/enum_names.h"
#include "kv_cache/block_manager.h"
#include "scheduler/mha_estimator.h"
#include "scheduler/request.h"

namespace neupims::scheduler {

enum class ChannelPolicy { kRoundRobin, kMinLoad };
// "round_robin" (alias "rr"), "min_load" (alias "minload").
const EnumNames<ChannelPolicy>& ChannelPolicyNames();
const char* ToString(ChannelPolicy p);

struct SchedulerOptions {
  int max_batch = 256;                // requests running or prefilling at once
  int64_t max_prefill_tokens = 8192;  // prompt tokens admitted per step
  ChannelPolicy channel_policy = ChannelPolicy::kMinLoad;
  bool sub_batches = true;  // partition the decode batch (Algorithm 3)
  // Interleave only iterations with at least this many decoding requests (NeuPIMs Fig. 13: two
  // small sub-batches under-use the systolic arrays and each re-streams the weights). 0: always.
  int64_t sub_batch_min_decode = 0;
  bool standalone_prefill = false;  // admitted requests go to kPrefilling (not kRunning)
};

// A request and the index of the one token it produced in a step (CompleteStep).
using StepToken = std::pair<Request*, int64_t>;

// The tokens of a step as inter-token gaps (CompleteStep): `continuing` tokens whose request's
// previous token was at `previous` (the previous step's time: they all share the gap now -
// previous), and the others, each with the time of its request's previous token (kNoTime for a
// first token), in the step's token order. What an observer of inter-token gaps needs, without
// a visit per token.
struct StepGap {
  const Request* request;
  SimTime previous;
};
struct StepGaps {
  SimTime previous = kNoTime;
  int64_t continuing = 0;
  absl::Span<const StepGap> others;
};

struct ScheduleOutput {
  std::vector<Request*> prefill;    // admitted this step (local: prefilled in this step)
  std::vector<Request*> decode;     // running requests producing one token this step
  std::vector<Request*> preempted;  // evicted this step
  std::vector<Request*> rejected;   // can never fit a channel (finished, kRejected)
  std::array<std::vector<Request*>, 2> sub_batch;  // decode split; [1] empty without sub-batches

  bool has_work() const { return !prefill.empty() || !decode.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, kv_cache::BlockManager* kv, MhaEstimator* estimator);

  // Queues a request (state kWaiting).
  absl::Status Add(Request* r);
  // Removes a request wherever it is and frees its KV blocks.
  absl::Status Abort(Request* r);

  ScheduleOutput Schedule(SimTime now);
  // The same into `out`, whose vectors are cleared and reused (no allocation per step once they
  // have grown to the batch size).
  void Schedule(SimTime now, ScheduleOutput* out);

  // After the engine ran `out`: local prefills produced their first token, decodes one token.
  // Requests that reached max_new_tokens are finished and their KV freed; they are returned.
  // Each produced token is listed in step_tokens() as (request, the token's index: `generated`
  // before the token), decodes first, in `out`'s order (the engine's per-iteration token list,
  // without a second pass over the batch); with `tokens`, that list is also appended to it.
  std::vector<Request*> CompleteStep(const ScheduleOutput& out, SimTime now,
                                     std::vector<StepToken>* tokens = nullptr);
  // The tokens of the last CompleteStep (see there); valid until the next CompleteStep. Empty
  // when the list is off (set_list_step_tokens) and that step was given no `tokens`.
  absl::Span<const StepToken> step_tokens() const { return step_tokens_; }
  // Whether CompleteStep lists its tokens in step_tokens() (on by default). The engine turns it
  // off when its observer takes the tokens as gaps only (step_gaps() counts them either way).
  void set_list_step_tokens(bool on) { list_step_tokens_ = on; }
  // The same tokens as gaps (StepGaps); valid until the next CompleteStep.
  StepGaps step_gaps() const { return {gaps_previous_, gaps_continuing_, gap_others_}; }
  // A standalone prefill finished (first token produced, KV arrived): the request decodes next.
  absl::Status PrefillDone(Request* r, SimTime now);

  int64_t waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t running() const { return static_cast<int64_t>(running_.size()); }
  int64_t prefilling() const { return prefilling_; }
  // OK, or the first broken invariant met since construction: a KV-cache or state-transition
  // error while scheduling, preempting or finishing, or a failed MHA estimate. Once not OK the
  // scheduler's state is suspect; the engine stops (Engine::AdvanceTo returns it).
  absl::Status fault() const;
  // The scheduler's own consistency: the decoding requests (kRunning, prefill done) are listed
  // once each in admission order, and they are exactly the KV cache's streaming requests; the
  // per-channel lists split that list by channel, each in its order. The
  // first broken one as INTERNAL. Also that after a step without partition every decoding
  // request is in sub-batch 0. O(running requests); for tests and the engine's checks.
  absl::Status CheckInvariants() const;
  // Estimated MHA load of each channel (sum over its running requests).
  std::vector<double> ChannelLoads();
  const SchedulerOptions& options() const { return options_; }

 private:
  struct WaitOrder {
    bool operator()(const Request* a, const Request* b) const {
      if (a->priority != b->priority) return a->priority < b->priority;
      if (a->arrival != b->arrival) return a->arrival < b->arrival;
      return a->id < b->id;
    }
  };
  // Step 1 of Schedule, the common case: every decoding request's slot through the KV cache's
  // stream (the decoding requests are its streaming requests), and the decode list. False when
  // a channel lacks blocks (nothing changed): then the per-request pass below.
  bool AppendStream(ScheduleOutput* out);
  // Appends every decoding request's slot in running_ order until one does not fit, and returns
  // that request's index in running_ (running_.size() if all fit). AppendWithPreemption goes on
  // from that index, preempting.
  size_t AppendAllOrStop(ScheduleOutput* out);
  void AppendWithPreemption(size_t from, ScheduleOutput* out);
  // Step 2 (into admitted_) and step 3 of Schedule.
  void Admit(SimTime now, ScheduleOutput* out);
  void AssignChannels(SimTime now, ScheduleOutput* out);
  void Preempt(Request* r, ScheduleOutput* out);
  // ChannelLoads() into `loads` (overwritten).
  void ChannelLoads(std::vector<double>* loads);
  absl::Status Finish(Request* r, SimTime now);
  // CompleteStep's per-token pass: counts (and with kListTokens lists in step_tokens_) the
  // step's tokens, finishing requests into `finished`. Returns the count. With kCheckState it
  // skips decodes that no longer run (aborted since Schedule); without, it takes every decode as
  // running, which holds when no Abort came after the Schedule that listed them.
  template <bool kListTokens, bool kCheckState>
  size_t ProduceTokens(const ScheduleOutput& out, SimTime now, std::vector<Request*>* finished);
  // CompleteStep's rare case, out of line (inside, GCC stopped inlining the per-token code): a
  // token that does not continue from the previous step goes to gap_others_, and a first token
  // sets first_token.
  [[gnu::noinline]] void NoteOtherGap(Request* r, SimTime now);
  // A produced token was r's last: Finish, into `finished` if that worked (out of line, rare).
  [[gnu::noinline]] void FinishProduced(Request* r, SimTime now, std::vector<Request*>* finished);
  void RemoveRunning(Request* r);
  // A request starts decoding (its prefill is done): it joins the KV cache's stream, decoders_
  // and its channel's list. StopDecoding takes it out of both lists if it is there (its KV
  // blocks leave the stream when they are freed). ClearDecoders empties both lists.
  absl::Status StartDecoding(Request* r);
  void StopDecoding(Request* r);
  void ClearDecoders();
  // Step 4 of Schedule with partition: Algorithm 3 over channel_decoders_ (each channel's first
  // half to sub-batch 0, the rest to 1), the split
  // PartitionSubBatchesByChannel makes of the decode list.
  void PartitionByChannel(ScheduleOutput* out);
  // CheckInvariants' part for channel_decoders_: they split decoders_ by channel, in its order.
  absl::Status CheckChannelDecoders() const;
  // Keeps the first error (with `what` for context) in fault_.
  void Record(const absl::Status& s, const char* what, const Request& r);

  SchedulerOptions options_;
  kv_cache::BlockManager* kv_;
  MhaEstimator* estimator_;
  std::set<Request*, WaitOrder> waiting_;
  std::vector<Request*> running_;  // kRunning and kPrefilling, in admission order
  // The decoding requests of running_ (kRunning, prefill done), in running_'s order: each step's
  // decode list, kept as requests start and stop decoding instead of filtered from running_.
  std::vector<Request*> decoders_;
  // decoders_ by channel (each in decoders_' order), kept with it: Algorithm 3 splits each
  // channel's list in halves (PartitionByChannel), without a count pass and a placement pass
  // over the decode list.
  std::vector<std::vector<Request*>> channel_decoders_;
  int64_t admissions_ = 0;  // Request::admission of the next admitted request
  int64_t prefilling_ = 0;
  int rr_cursor_ = 0;
  absl::Status fault_;
  // Scratch of Schedule(), reused so that a steady-state step does not allocate per channel.
  std::vector<Request*> decoding_, admitted_;
  // An Abort came after the last Schedule: its decode list may hold a request that no longer
  // runs, which CompleteStep must skip (a check per token otherwise not needed).
  bool aborted_since_schedule_ = false;
  // Scratch of admission (per channel: tentative free blocks, loads; per admitted request: its
  // channel), reused so that a step that admits does not allocate.
  std::vector<int64_t> free_scratch_;
  std::vector<double> loads_scratch_;
  std::vector<int> channel_scratch_;
  // The last step's tokens; while listed, kept between steps (resized, not cleared and
  // refilled) so that making room for a step's tokens does not value-initialise the whole list
  // every step; cleared when a step does not list them (set_list_step_tokens(false)).
  std::vector<StepToken> step_tokens_;
  bool list_step_tokens_ = true;
  // step_gaps(): the time of the step before the last CompleteStep's (a value no token time
  // equals before the first), its count of continuing tokens, and the others.
  static constexpr SimTime kNoStep = std::numeric_limits<SimTime>::min();
  SimTime step_time_ = kNoStep;
  SimTime gaps_previous_ = kNoStep;
  int64_t gaps_continuing_ = 0;
  std::vector<StepGap> gap_others_;
};

}  // namespace neupims::scheduler

#endif  // NEUPIMS_SCHEDULER_SCHEDULER_H_
