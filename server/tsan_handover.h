// Happens-before edges that gRPC provides through its uninstrumented library, published to
// ThreadSanitizer by our own reactors (no-ops outside a -fsanitize=thread build).
//
// gRPC's callback API runs a reactor's OnCancel on its executor thread and then drops a
// reference on the call (ServerCallbackCall::CallOnCancel, compiled into libgrpc++); OnDone runs
// on whichever thread drops the last reference. The decrement that orders the two is an acq_rel
// atomic inside the library, which TSan cannot see, so OnDone's `delete this` looked like a race
// with OnCancel's reads of the reactor. A reactor hands itself over at the end of OnCancel
// (HandOver) and takes it at the start of OnDone (TakeOver), the edge gRPC guarantees.
#ifndef NEUPIMS_SERVER_TSAN_HANDOVER_H_
#define NEUPIMS_SERVER_TSAN_HANDOVER_H_

#if defined(__SANITIZE_THREAD__)
#define NEUPIMS_TSAN_HANDOVER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NEUPIMS_TSAN_HANDOVER 1
#endif
#endif

#ifdef NEUPIMS_TSAN_HANDOVER
#include <sanitizer/tsan_interface.h>
#endif

namespace neupims::server {

// Everything this thread did to `*object` so far happens before a later TakeOver(object).
inline void HandOver(const void* object) {
#ifdef NEUPIMS_TSAN_HANDOVER
  __tsan_release(const_cast<void*>(object));
#else
  (void)object;
#endif
}

// Sees everything done before every earlier HandOver(object).
inline void TakeOver(const void* object) {
#ifdef NEUPIMS_TSAN_HANDOVER
  __tsan_acquire(const_cast<void*>(object));
#else
  (void)object;
#endif
}

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_TSAN_HANDOVER_H_
