// ThreadSanitizer builds only (NEUPIMS_SANITIZE=thread links this into every executable, with
// tsan_absl_sync.cc).
//
// Debian's gRPC is not built with -fsanitize=thread. A batch started on one thread completes on
// another (a completion-queue poller, or gRPC's executor for the callback API), and the two are
// ordered by gRPC's atomics and locks inside the uninstrumented library, which TSan cannot see:
// every access of ours (and of gRPC's header-only C++ code, compiled into our objects) on the two
// sides of a batch looked like a race (843 reports in one run of the server suites).
//
// As tsan_absl_sync.cc does for Abseil's locks, this file defines gRPC's entry points in the
// executable, where they interpose on the libraries' (libgrpc++, and libgrpc itself, call them
// through their PLTs), forwards each to the library (dlsym RTLD_NEXT), and adds the edge gRPC
// guarantees:
//  - a batch's tag is released when the batch is started (grpc_call_start_batch, the server's
//    request-call functions) and acquired when its completion is handed back: by
//    grpc_completion_queue_next / _pluck, or, for a callback completion queue, on entry to the
//    tag's functor (gRPC calls tag->functor_run; see SwapFunctor). grpc_cq_end_op, where every
//    completion passes, only releases the tag;
//  - the callback API's server call schedules OnDone once its count of outstanding reactions
//    drops to zero (ServerCallbackCall::ScheduleOnDone): the scheduling thread acquires the
//    count's atomic, which every decrement in gRPC's headers (compiled into our code, so seen by
//    TSan) released; the decrements inside libgrpc++ are not seen, which is why our reactors
//    publish their OnCancel themselves (server/tsan_handover.h);
//  - the last grpc_call_unref frees the call's arena, which holds the callback API's reactor
//    objects: every unref releases the call and then acquires it, so the thread that frees has
//    seen every other thread's accesses (as a reference count's acq_rel decrement does).
//
// Limits: the callback functors recognised are the four StaticRun functions of gRPC 1.51's C++
// API, found by name (CMakeLists.txt exports the executable's copies; another gRPC version:
// update kFunctorNames, where a missing name leaves its tags unannotated, never broken); the
// client's callback reactors are covered only through their tags (their own counters live in
// gRPC's headers, which TSan sees); member functions are forwarded with the Itanium ABI's
// `this`-first calling convention, as tsan_absl_sync.cc does.
#include <dlfcn.h>
#include <grpc/grpc.h>
#include <grpcpp/support/server_callback.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/base/options.h"
#include "absl/status/status.h"

struct grpc_cq_completion;

namespace {

template <typename Fn>
Fn Real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_grpc_sync: %s not found in the gRPC library\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

using FunctorRun = void (*)(grpc_completion_queue_functor*, int);

// The C++ API's callback tags (grpcpp/support/callback_common.h, server_cc.cc): the function
// each sets as functor_run. Looked up globally, as the dynamic linker binds them.
constexpr const char* kFunctorNames[] = {
    "_ZN4grpc8internal22CallbackWithSuccessTag9StaticRunEP29grpc_completion_queue_functori",
    "_ZN4grpc8internal21CallbackWithStatusTag9StaticRunEP29grpc_completion_queue_functori",
    "_ZN4grpc6Server15CallbackRequestINS_21CallbackServerContextEE15CallbackCallTag9StaticRunEP29"
    "grpc_completion_queue_functori",
    "_ZN4grpc6Server15CallbackRequestINS_28GenericCallbackServerContextEE15CallbackCallTag9StaticR"
    "unEP29grpc_completion_queue_functori",
};
constexpr int kFunctors = sizeof(kFunctorNames) / sizeof(kFunctorNames[0]);

struct Functors {
  FunctorRun real[kFunctors] = {};
  Functors() {
    for (int i = 0; i < kFunctors; ++i) {
      real[i] = reinterpret_cast<FunctorRun>(dlsym(RTLD_DEFAULT, kFunctorNames[i]));
    }
  }
};

const Functors& KnownFunctors() {
  static const Functors f;
  return f;
}

// Stands in for the real functor_run: the completion's thread acquires what the starting thread
// released on the tag, then runs the C++ API's callback.
template <int I>
void AcquiringRun(grpc_completion_queue_functor* tag, int ok) {
  __tsan_acquire(tag);
  KnownFunctors().real[I](tag, ok);
}

FunctorRun AcquiringFor(int i) {
  static constexpr FunctorRun table[] = {&AcquiringRun<0>, &AcquiringRun<1>, &AcquiringRun<2>,
                                         &AcquiringRun<3>};
  static_assert(sizeof(table) / sizeof(table[0]) == kFunctors);
  return table[i];
}

// A callback completion queue's tag is a grpc_completion_queue_functor that gRPC runs on the
// completing thread. If `tag` is one of the C++ API's (its functor_run is a known StaticRun),
// point functor_run at the acquiring stand-in. Safe: the thread that starts a batch owns its tag
// until the completion (one batch per tag at a time), and the C++ API resets functor_run itself
// only when it re-initialises the tag, which is then swapped again on its next batch. Any other
// tag (a plain pointer on a next/pluck queue) is left alone: only its first word is compared.
void SwapFunctor(void* tag) {
  if (tag == nullptr) return;
  auto* functor = static_cast<grpc_completion_queue_functor*>(tag);
  const Functors& known = KnownFunctors();
  for (int i = 0; i < kFunctors; ++i) {
    if (known.real[i] != nullptr && functor->functor_run == known.real[i]) {
      functor->functor_run = AcquiringFor(i);
      return;
    }
  }
}

// Publishes everything this thread did before handing `tag` to gRPC.
void ReleaseTag(void* tag) {
  if (tag == nullptr) return;
  __tsan_release(tag);
}

}  // namespace

extern "C" {

grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops, void* tag,
                                      void* reserved) {
  static const auto real =
      Real<grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*, void*)>(
          "grpc_call_start_batch");
  // Only a started batch completes: a failed start leaves the tag with the caller. The swap
  // happens first so that the tag is never handed over half-updated.
  SwapFunctor(tag);
  ReleaseTag(tag);
  return real(call, ops, nops, tag, reserved);
}

grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                      void* reserved) {
  static const auto real = Real<grpc_event (*)(grpc_completion_queue*, gpr_timespec, void*)>(
      "grpc_completion_queue_next");
  grpc_event ev = real(cq, deadline, reserved);
  if (ev.type == GRPC_OP_COMPLETE && ev.tag != nullptr) __tsan_acquire(ev.tag);
  return ev;
}

grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag, gpr_timespec deadline,
                                       void* reserved) {
  static const auto real = Real<grpc_event (*)(grpc_completion_queue*, void*, gpr_timespec, void*)>(
      "grpc_completion_queue_pluck");
  grpc_event ev = real(cq, tag, deadline, reserved);
  if (ev.type == GRPC_OP_COMPLETE && ev.tag != nullptr) __tsan_acquire(ev.tag);
  return ev;
}

// A new call's notification (the callback server asks for each next call with its tag).
grpc_call_error grpc_server_request_call(grpc_server* server, grpc_call** call,
                                         grpc_call_details* details,
                                         grpc_metadata_array* request_metadata,
                                         grpc_completion_queue* cq_bound_to_call,
                                         grpc_completion_queue* cq_for_notification,
                                         void* tag_new) {
  static const auto real =
      Real<grpc_call_error (*)(grpc_server*, grpc_call**, grpc_call_details*, grpc_metadata_array*,
                               grpc_completion_queue*, grpc_completion_queue*, void*)>(
          "grpc_server_request_call");
  SwapFunctor(tag_new);
  ReleaseTag(tag_new);
  return real(server, call, details, request_metadata, cq_bound_to_call, cq_for_notification,
              tag_new);
}

grpc_call_error grpc_server_request_registered_call(grpc_server* server, void* registered_method,
                                                    grpc_call** call, gpr_timespec* deadline,
                                                    grpc_metadata_array* request_metadata,
                                                    grpc_byte_buffer** optional_payload,
                                                    grpc_completion_queue* cq_bound_to_call,
                                                    grpc_completion_queue* cq_for_notification,
                                                    void* tag_new) {
  static const auto real = Real<grpc_call_error (*)(
      grpc_server*, void*, grpc_call**, gpr_timespec*, grpc_metadata_array*, grpc_byte_buffer**,
      grpc_completion_queue*, grpc_completion_queue*, void*)>(
      "grpc_server_request_registered_call");
  SwapFunctor(tag_new);
  ReleaseTag(tag_new);
  return real(server, registered_method, call, deadline, request_metadata, optional_payload,
              cq_bound_to_call, cq_for_notification, tag_new);
}

// The last unref destroys the call and its arena (where the callback API's reactors live).
void grpc_call_unref(grpc_call* call) {
  static const auto real = Real<void (*)(grpc_call*)>("grpc_call_unref");
  if (call != nullptr) {
    __tsan_release(call);
    __tsan_acquire(call);
  }
  real(call);
}

}  // extern "C"

// Every completion goes through this internal entry (libgrpc calls it through its PLT, and
// libgrpc++ for its alarms).
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage), void* done_arg,
                    grpc_cq_completion* storage, bool internal) {
  // Mangled with Abseil's inline namespace (absl::Status is a parameter), e.g. "debian3".
#define NEUPIMS_STR2(x) #x
#define NEUPIMS_STR(x) NEUPIMS_STR2(x)
  static const std::string ns = NEUPIMS_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
#undef NEUPIMS_STR
#undef NEUPIMS_STR2
  static const std::string name = "_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl" +
                                  std::to_string(ns.size()) + ns +
                                  "6StatusEPFvS1_P18grpc_cq_completionES1_S6_b";
  static const auto real =
      Real<void (*)(grpc_completion_queue*, void*, absl::Status,
                    void (*)(void*, grpc_cq_completion*), void*, grpc_cq_completion*, bool)>(
          name.c_str());
  // Called on the completing thread (libgrpc's own completions come through here too): the tag
  // belongs to gRPC until the completion is handed back, so it is not touched, only released.
  ReleaseTag(tag);
  real(cq, tag, std::move(error), done, done_arg, storage, internal);
}

namespace grpc::internal {

// The callback API's server call counts what must happen before OnDone (the handler returned,
// Finish completed, the call's completion op, every read/write reaction); whoever drops the
// count to zero schedules OnDone here. The decrements made in gRPC's headers (compiled into our
// code) are atomic acq_rel operations TSan sees, but those made inside libgrpc++ (the completion
// op, the OnCancel closure) are not: acquiring the counter here gives the thread that runs OnDone
// every instrumented decrement's history, as the real acq_rel decrement does. (What our reactors
// do in OnCancel, before libgrpc++'s decrement, they publish themselves: server/tsan_handover.h.)
void ServerCallbackCall::ScheduleOnDone(bool inline_ondone) {
  static const auto real = Real<void (*)(ServerCallbackCall*, bool)>(
      "_ZN4grpc8internal18ServerCallbackCall14ScheduleOnDoneEb");
  __tsan_acquire(&callbacks_outstanding_);
  real(this, inline_ondone);
}

}  // namespace grpc::internal
