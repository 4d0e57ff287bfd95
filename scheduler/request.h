// Request: one generation request as the scheduler and engine see it, and its state machine.
//
//            Admit(local prefill)                 FinishPrefill (standalone prefill done)
//   kWaiting -----------------------> kRunning <------------------- kPrefilling
//      |  ^        Admit(standalone) -------------------------------------^  |
//      |  |  Preempt (recompute)          |  Finish                          |
//      |  +-------------------------------+---------> kFinished              |
//      +--------------------------------- Abort ------> kAborted <-----------+
//                                          (also from kRunning)
// Illegal transitions are errors (absl::FailedPrecondition), never silent. Times are simulated
// nanoseconds; the scheduler never reads the wall clock.
#ifndef NEUPIMS_SCHEDULER_REQUEST_H_
#define NEUPIMS_SCHEDULER_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace neupims::scheduler {

using RequestId = int64_t;
using SimTime = int64_t;  // simulated nanoseconds
inline constexpr SimTime kNoTime = -1;

enum class RequestState { kWaiting, kPrefilling, kRunning, kFinished, kAborted };
const char* ToString(RequestState s);

enum class FinishReason { kNone, kLength, kAborted, kRejected };
const char* ToString(FinishReason r);

struct Request {
  RequestId id = 0;
  int64_t prompt_tokens = 1;
  int64_t max_new_tokens = 1;  // generation stops after this many tokens
  int priority = 0;            // lower is served first; FCFS within a priority
  SimTime arrival = 0;

  // Mutable progress.
  RequestState state = RequestState::kWaiting;
  int64_t generated = 0;  // output tokens produced so far
  int channel = -1;       // PIM channel of its KV cache (kept after it ends; -1 while waiting)
  int kv_slot = -1;       // BlockManager::SlotOf while its KV cache is allocated (a lookup hint)
  int64_t admission = 0;  // the scheduler's count of admissions when it was last admitted
  int preemptions = 0;
  bool needs_prefill = true;  // the next step must (re)compute its prompt (+ generated) tokens
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // why a request was rejected

  // Timeline (kNoTime until it happens).
  SimTime first_admitted = kNoTime;
  SimTime first_token = kNoTime;
  SimTime last_token = kNoTime;
  SimTime finished = kNoTime;

  // Tokens in the KV cache: the prompt plus every generated token.
  int64_t context_tokens() const { return prompt_tokens + generated; }
  bool done() const { return DoneAt(generated); }
  // done() once `tokens` have been generated (the per-token loop keeps the count in a register).
  bool DoneAt(int64_t tokens) const { return tokens >= max_new_tokens; }
  // Running with its KV cache in place: it decodes a token every iteration (Scheduler's decode
  // list and the KV cache's stream hold exactly these requests).
  bool decoding() const { return state == RequestState::kRunning && !needs_prefill; }
  bool terminal() const {
    return state == RequestState::kFinished || state == RequestState::kAborted;
  }
};

// Validated state changes.
absl::Status Transition(Request& r, RequestState to);

// The spans of a request's timeline, in simulated nanoseconds. A span is absent when one of its
// ends has not happened (e.g. no first token for a request rejected while waiting) or would be
// negative (an abort before the arrival time); TPOT needs two or more generated tokens.
struct RequestLatencies {
  std::optional<SimTime> queue_ns;    // arrival -> first admission
  std::optional<SimTime> ttft_ns;     // arrival -> first token
  std::optional<SimTime> prefill_ns;  // first admission -> first token
  std::optional<SimTime> decode_ns;   // first token -> finished
  std::optional<SimTime> e2e_ns;      // arrival -> finished
  std::optional<double> tpot_ns;      // decode_ns / (generated - 1): per token after the first
};

// The one definition of a request's latencies, for the server, its metrics and the CLIs.
RequestLatencies Latencies(const Request& r);

}  // namespace neupims::scheduler

#endif  // NEUPIMS_SCHEDULER_REQUEST_H_
