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
