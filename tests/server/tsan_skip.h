// The server suites that drive a gRPC server skip under ThreadSanitizer. Debian's gRPC and
// protobuf are not built with -fsanitize=thread, so TSan cannot see their synchronization (gRPC's
// atomics, its arenas and completion queues): with them on, 843 reports, every one through gRPC's
// own memory and callbacks (a run of 2026-11-26). Debian's Abseil locks are made visible to TSan
// by common/tsan_absl_sync.cc, so the suites that do not call gRPC (the OpenAI HTTP API on a
// live server, EngineRunner, metrics, configs, security) run under TSan and report nothing. With
// instrumented libraries, run the rest with NEUPIMS_TSAN_SERVER_TESTS=1.
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
    "ThreadSanitizer with uninstrumented gRPC (set NEUPIMS_TSAN_SERVER_TESTS=1 to run anyway)";

inline bool SkipServerTestsUnderTsan() {
  const char* force = std::getenv("NEUPIMS_TSAN_SERVER_TESTS");
  return kThreadSanitizer && (force == nullptr || std::string(force) != "1");
}

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_SERVER_TSAN_SKIP_H_
