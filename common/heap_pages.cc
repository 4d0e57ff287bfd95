#include "common/heap_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace neupims {
namespace {

constexpr uintptr_t kHugePageBytes = uintptr_t{2} << 20;  // x86-64's and AArch64's (4 KiB base)
// glibc's largest mmap threshold on 64-bit targets (HEAP_MAX_SIZE / 2); mallopt refuses more.
constexpr int kMmapThresholdBytes = 32 << 20;
constexpr size_t kMaxExpectedBytes = size_t{1} << 30;  // M_TOP_PAD is an int

uintptr_t RoundUp(uintptr_t x) { return (x + kHugePageBytes - 1) & ~(kHugePageBytes - 1); }
uintptr_t RoundDown(uintptr_t x) { return x & ~(kHugePageBytes - 1); }

}  // namespace

absl::Status PrepareHugePageHeap(size_t expected_bytes) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  // Once per process: the heap's free top is then the range advised before.
  static std::atomic<bool> prepared{false};
  if (prepared.load()) return absl::OkStatus();
  const size_t grow = std::min(expected_bytes, kMaxExpectedBytes) + kHugePageBytes;
  if (mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) != 1 ||
      mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMaxExpectedBytes)) != 1 ||
      mallopt(M_TOP_PAD, static_cast<int>(grow)) != 1) {
    return absl::FailedPreconditionError("malloc refused the heap settings (mallopt)");
  }
  // An allocation just larger than the heap's free top makes malloc grow the heap by it plus the
  // top pad, writing only the allocation's header (at the old top) and the new top's header
  // (just past the old break): the pages beyond are untouched, and so can still become huge.
  const uintptr_t old_break = reinterpret_cast<uintptr_t>(sbrk(0));
  void* const block = std::malloc(static_cast<size_t>(mallinfo2().keepcost) + 4096);
  const uintptr_t new_break = reinterpret_cast<uintptr_t>(sbrk(0));
  const uintptr_t at = reinterpret_cast<uintptr_t>(block);
  std::free(block);
  // The top pad back to glibc's default for later growth (the range below is advised once).
  mallopt(M_TOP_PAD, 128 << 10);
  if (block == nullptr || at >= new_break || new_break <= old_break) {
    return absl::FailedPreconditionError("the heap is not at the program break");
  }
  // Past the 2 MiB extent holding the old break and the headers just above it.
  const uintptr_t begin = RoundUp(old_break + 2 * 4096);
  const uintptr_t end = RoundDown(new_break);
  if (end <= begin) return absl::FailedPreconditionError("the heap did not grow");
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0) {
    const int error = errno;
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrCat("madvise(MADV_HUGEPAGE) of the heap: ", std::strerror(error)));
  }
  // The free top starts where `block` did, below `begin`: one allocation up to `begin`, never
  // freed, so that the run's allocations start in the advised range instead of filling the
  // 4 KiB pages below it first. Only its header is written (on a page already touched). Static:
  // held for the process's life, and reachable for leak checkers.
  static void* spacer = nullptr;
  spacer = std::malloc(begin - at + 64);
  if (reinterpret_cast<uintptr_t>(spacer) != at) {  // not where the top was: no use
    std::free(spacer);
    spacer = nullptr;
  }
  prepared.store(true);
  return absl::OkStatus();
#else
  (void)expected_bytes;
  return absl::FailedPreconditionError("not glibc's malloc");
#endif
}

}  // namespace neupims
