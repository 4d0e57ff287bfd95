// ThreadSanitizer builds only (NEUPIMS_SANITIZE=thread links this into every executable).
//
// Debian's Abseil is not built with -fsanitize=thread: absl::Mutex and absl::Notification
// synchronise through atomics and futex calls inside the uninstrumented library, so TSan sees no
// happens-before edge between a thread that unlocks a Mutex and the next one that locks it, and
// reports every access the Mutex guards as a race (755 reports on one run of server_tests). Abseil
// built with TSan annotates these edges itself (its mutex.cc calls __tsan_mutex_* hooks); this file
// adds the same edges from outside.
//
// It defines, in the executable, the Abseil entry points that the project and gRPC call. The
// executable's definitions interpose on the shared library's (ELF symbol lookup finds the
// executable first), so every call reaches one of these. Each forwards to the library's own
// definition (dlsym RTLD_NEXT) inside TSan's mutex hooks (__tsan_mutex_pre/post_lock and
// _unlock, as Abseil's own TSan build places them), so TSan tracks each Mutex as a lock: the
// happens-before edge from an unlock to the next lock, and lock-order checks.
//
// Limits (none reached by the project today): a wait is modelled as a writer unlock and relock
// (an Await under a reader lock would be misreported); ~Mutex is not hooked (a Mutex reused at
// the same address outside the heap keeps its old TSan state); the timed Notification waits and
// the inline HasBeenNotified() are not wrapped; a race inside a Condition's predicate is not
// checked (it runs inside the library's lock operation, where TSan ignores accesses). It needs
// the shared Abseil library (CMakeLists.txt checks), which calls itself through the PLT.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/status/status.h"
#include "absl/synchronization/internal/kernel_timeout.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace {

// "absl::<inline namespace>::<name>" mangled, e.g. Mangled("5Mutex4LockEv") is
// _ZN4absl7debian35Mutex4LockEv; `konst` for a const member function (_ZNK...).
std::string Mangled(const char* member, bool konst = false) {
#define NEUPIMS_STR2(x) #x
#define NEUPIMS_STR(x) NEUPIMS_STR2(x)
  const std::string ns = NEUPIMS_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
#undef NEUPIMS_STR
#undef NEUPIMS_STR2
  return std::string(konst ? "_ZNK4absl" : "_ZN4absl") + std::to_string(ns.size()) + ns + member;
}

// The shared library's definition of `member`; aborts with the symbol's name if it is missing
// (another Abseil version: update the member strings below).
template <typename Fn>
Fn Real(const char* member, bool konst = false) {
  const std::string name = Mangled(member, konst);
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found in the Abseil library\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN
namespace {

// The library's own work inside a lock operation (its atomics, and the waiters' conditions it
// evaluates on the unlocking thread) happens between TSan's pre and post hooks, where TSan ignores
// memory accesses, as it does inside any annotated lock.
template <typename F>
auto Locking(Mutex* mu, unsigned flags, F&& real) {
  __tsan_mutex_pre_lock(mu, flags);
  const auto taken = real();
  const bool failed = (flags & __tsan_mutex_try_lock) != 0 && !taken;
  __tsan_mutex_post_lock(mu, flags | (failed ? __tsan_mutex_try_lock_failed : 0), 0);
  return taken;
}

template <typename F>
void Unlocking(Mutex* mu, unsigned flags, F&& real) {
  __tsan_mutex_pre_unlock(mu, flags);
  real();
  __tsan_mutex_post_unlock(mu, flags);
}

// A wait gives the held lock up and takes it again: to TSan, an unlock, then one long lock.
template <typename F>
auto Waiting(Mutex* mu, F&& real) {
  Unlocking(mu, 0, [] {});
  return Locking(mu, 0, [&] {
    real();
    return true;
  });
}

}  // namespace

// The entry points that take a lock. (The ...WithTimeout forms call the ...WithDeadline ones,
// so only those are wrapped: a wrapper must not run inside another on the same Mutex.)
void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  Locking(this, 0, [&] {
    real(this);
    return true;
  });
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  Locking(this, __tsan_mutex_read_lock, [&] {
    real(this);
    return true;
  });
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  return Locking(this, __tsan_mutex_try_lock, [&] { return real(this); });
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  return Locking(this, __tsan_mutex_try_lock | __tsan_mutex_read_lock, [&] { return real(this); });
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  Locking(this, 0, [&] {
    real(this, cond);
    return true;
  });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Locking(this, __tsan_mutex_read_lock, [&] {
    real(this, cond);
    return true;
  });
}

// Returns with the lock held whether or not the condition became true.
bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met = false;
  Locking(this, 0, [&] {
    met = real(this, cond, deadline);
    return true;
  });
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool met = false;
  Locking(this, __tsan_mutex_read_lock, [&] {
    met = real(this, cond, deadline);
    return true;
  });
  return met;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Unlocking(this, 0, [&] { real(this); });
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Unlocking(this, __tsan_mutex_read_lock, [&] { real(this); });
}

// Every Await and CondVar wait form gives the lock up and takes it again in these two (where
// Abseil's own TSan build annotates them). A writer lock is assumed, as everywhere here.
bool Mutex::AwaitCommon(const Condition& cond, synchronization_internal::KernelTimeout t) {
  static const auto real =
      Real<bool (*)(Mutex*, const Condition&, synchronization_internal::KernelTimeout)>(
          "5Mutex11AwaitCommonERKNS0_9ConditionENS0_24synchronization_internal13KernelTimeoutE");
  bool met = false;
  Waiting(this, [&] { met = real(this, cond, t); });
  return met;
}

bool CondVar::WaitCommon(Mutex* mu, synchronization_internal::KernelTimeout t) {
  static const auto real =
      Real<bool (*)(CondVar*, Mutex*, synchronization_internal::KernelTimeout)>(
          "7CondVar10WaitCommonEPNS0_5MutexENS0_24synchronization_internal13KernelTimeoutE");
  bool timed_out = false;
  Waiting(mu, [&] { timed_out = real(this, mu, t); });
  return timed_out;
}

// A notification is a one-way edge from Notify to every return from a wait.
void Notification::Notify() {
  static const auto real = Real<void (*)(Notification*)>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      Real<void (*)(const Notification*)>("12Notification19WaitForNotificationEv", /*konst=*/true);
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

// A non-inlined Status (an error with a message or payloads) is reference counted; the copy that
// drops the last reference frees it, often on another thread than the one that made or read it
// (a gRPC completion, an engine callback). The count is decremented inside the library: every
// decrement releases the rep and then acquires it, so the freeing thread has seen every earlier
// holder's accesses (the edge an acq_rel decrement gives, which TSan cannot see here).
void Status::UnrefNonInlined(uintptr_t rep) {
  static const auto real = Real<void (*)(uintptr_t)>("6Status15UnrefNonInlinedEm");
  __tsan_release(reinterpret_cast<void*>(rep));
  __tsan_acquire(reinterpret_cast<void*>(rep));
  real(rep);
}

ABSL_NAMESPACE_END
}  // namespace absl
