// CHECK for true invariants (programming errors), never for bad input: bad input is an
// absl::Status. A failed CHECK prints the condition and location and aborts.
#ifndef NEUPIMS_COMMON_CHECK_H_
#define NEUPIMS_COMMON_CHECK_H_

namespace neupims::internal {
[[noreturn]] void CheckFailed(const char* cond, const char* file, int line, const char* msg);
}  // namespace neupims::internal

#define NEUPIMS_CHECK(cond)                                                       \
  do {                                                                            \
    if (!(cond)) ::neupims::internal::CheckFailed(#cond, __FILE__, __LINE__, ""); \
  } while (false)

#define NEUPIMS_CHECK_MSG(cond, msg)                                               \
  do {                                                                             \
    if (!(cond)) ::neupims::internal::CheckFailed(#cond, __FILE__, __LINE__, msg); \
  } while (false)

#endif  // NEUPIMS_COMMON_CHECK_H_
