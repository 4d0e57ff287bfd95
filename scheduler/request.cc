#include "scheduler/request.h"

#include "absl/strings/str_cat.h"

namespace neupims::scheduler {

const char* ToString(RequestState s) {
  switch (s) {
    case RequestState::kWaiting:
      return "waiting";
    case RequestState::kPrefilling:
      return "prefilling";
    case RequestState::kRunning:
      return "running";
    case RequestState::kFinished:
      return "finished";
    case RequestState::kAborted:
      return "aborted";
  }
  return "?";
}

const char* ToString(FinishReason r) {
  switch (r) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAborted:
      return "abort";
    case FinishReason::kRejected:
      return "rejected";
  }
  return "?";
}

namespace {

// to - from, when both happened and in that order.
std::optional<SimTime> Span(SimTime from, SimTime to) {
  if (from == kNoTime || to == kNoTime || to < from) return std::nullopt;
  return to - from;
}

}  // namespace

RequestLatencies Latencies(const Request& r) {
  RequestLatencies l;
  l.queue_ns = Span(r.arrival, r.first_admitted);
  l.ttft_ns = Span(r.arrival, r.first_token);
  l.prefill_ns = Span(r.first_admitted, r.first_token);
  l.decode_ns = Span(r.first_token, r.finished);
  l.e2e_ns = Span(r.arrival, r.finished);
  if (l.decode_ns && r.generated > 1) {
    l.tpot_ns = static_cast<double>(*l.decode_ns) / static_cast<double>(r.generated - 1);
  }
  return l;
}

absl::Status Transition(Request& r, RequestState to) {
  using S = RequestState;
  const S from = r.state;
  bool ok = false;
  switch (from) {
    case S::kWaiting:
      ok = to == S::kRunning || to == S::kPrefilling || to == S::kAborted || to == S::kFinished;
      break;
    case S::kPrefilling:
      ok = to == S::kRunning || to == S::kAborted;
      break;
    case S::kRunning:
      ok = to == S::kWaiting || to == S::kFinished || to == S::kAborted;
      break;
    case S::kFinished:
    case S::kAborted:
      ok = false;
      break;
  }
  if (!ok) {
    return absl::FailedPreconditionError(absl::StrCat("request ", r.id, ": illegal transition ",
                                                      ToString(from), " -> ", ToString(to)));
  }
  r.state = to;
  return absl::OkStatus();
}

}  // namespace neupims::scheduler
