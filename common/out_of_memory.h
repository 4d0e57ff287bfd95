// The out-of-memory exit of the command-line tools (neupims, neupims-bench).
//
// A run that the memory checks let through (--max-memory-gb, a large -n) and that still does not
// fit under the process's limit (`ulimit -v`, a container's memory cap) throws std::bad_alloc.
// Uncaught, that is an abort ("terminate called ...", exit 134); every tool's main runs its body
// through ExitOnOutOfMemory instead, which prints one line saying so and returns exit code 1 (a
// runtime failure, docs/reliability.md "Input guarantees").
#ifndef NEUPIMS_COMMON_OUT_OF_MEMORY_H_
#define NEUPIMS_COMMON_OUT_OF_MEMORY_H_

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace neupims {

// The tools' exit code for a runtime failure (as opposed to 2, bad flags or input); running out
// of memory is one.
inline constexpr int kExitRuntimeError = 1;

// Returns run(), or, if it throws std::bad_alloc, prints "error: out of memory (the run needs
// more than this process may allocate; <remedy>)" to stderr and returns kExitRuntimeError.
int ExitOnOutOfMemory(absl::FunctionRef<int()> run, absl::string_view remedy);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_OUT_OF_MEMORY_H_
