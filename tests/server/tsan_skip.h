// The server suites skip under ThreadSanitizer: Debian's gRPC, protobuf and Abseil are not built
// with -fsanitize=thread, so TSan cannot see their synchronization (absl::Mutex, gRPC's atomics)
// and reports thousands of false races in them and in the absl::Mutex-guarded server code (and,
// for tests that run `neupims serve`, would change the server's exit code). With instrumented
// libraries, run them with NEUPIMS_TSAN_SERVER_TESTS=1.
//
//   void SetUp() override {
//     if (SkipServerTestsUnderTsan()) GTEST_SKIP() << kTsanSkipReason;
//   }
#ifndef NEUPIMS_TESTS_SERVER_TSAN_SKIP_H_
#define NEUPIMS_TESTS_SERVER_TSAN_SKIP_H_

#include <cstdlib>
#include <string>

namespace neupims::testing_util {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

inline constexpr char kTsanSkipReason[] =
    "ThreadSanitizer with uninstrumented gRPC / Abseil (set NEUPIMS_TSAN_SERVER_TESTS=1 to run "
    "anyway)";

inline bool SkipServerTestsUnderTsan() {
  const char* force = std::getenv("NEUPIMS_TSAN_SERVER_TESTS");
  return kThreadSanitizer && (force == nullptr || std::string(force) != "1");
}

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_SERVER_TSAN_SKIP_H_
