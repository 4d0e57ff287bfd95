// kThreadSanitizer: true in a -fsanitize=thread build. The server suites run under TSan (the
// happens-before edges of Debian's uninstrumented gRPC and Abseil come from
// common/tsan_grpc_sync.cc and common/tsan_absl_sync.cc); a test scales down only a loop that
// TSan makes too slow, and says so.
#ifndef NEUPIMS_TESTS_SERVER_UNDER_TSAN_H_
#define NEUPIMS_TESTS_SERVER_UNDER_TSAN_H_

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

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_SERVER_UNDER_TSAN_H_
