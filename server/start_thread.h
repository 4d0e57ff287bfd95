// StartThread: a thread the server cannot start is an error of its start, never an abort.
//
// std::thread's constructor throws std::system_error when the system refuses a thread (EAGAIN
// under RLIMIT_NPROC / `ulimit -u`, ENOMEM when `ulimit -v` leaves no room for its stack); left
// uncaught on a start-up path, that ended `neupims serve` in std::terminate. Every thread the
// server starts itself (the engine and CNN runner threads, the HTTP listener and its pool) goes
// through here, so a start that cannot get its threads fails with a Status naming what it was
// starting.
#ifndef NEUPIMS_SERVER_START_THREAD_H_
#define NEUPIMS_SERVER_START_THREAD_H_

#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"

namespace neupims::server {

// `what` names the thread for the error: "the engine thread".
template <typename F>
absl::StatusOr<std::thread> StartThread(absl::string_view what, F&& fn) {
  try {
    return std::thread(std::forward<F>(fn));
  } catch (const std::system_error& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start ", what, ": ", e.what(),
                     " (the process or user thread limit, `ulimit -u`, or address space, "
                     "`ulimit -v`, is too small)"));
  }
}

// Starts `n` threads at once, then ends them: OK if the system gave all of them. gRPC aborts the
// process (an assertion in its thread manager) when it cannot create a thread of its own, so the
// server asks for room for them before gRPC starts, and fails the start cleanly instead.
// `what` names whose threads they stand for.
inline absl::Status CheckThreadHeadroom(int n, absl::string_view what) {
  absl::Notification release;
  std::vector<std::thread> threads;
  absl::Status status;
  for (int i = 0; i < n && status.ok(); ++i) {
    absl::StatusOr<std::thread> t = StartThread(absl::StrCat(n, " threads for ", what),
                                                [&release] { release.WaitForNotification(); });
    if (t.ok()) {
      threads.push_back(*std::move(t));
    } else {
      status = t.status();
    }
  }
  release.Notify();
  for (std::thread& t : threads) t.join();
  return status;
}

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_START_THREAD_H_
