#include "common/out_of_memory.h"

#include <cstdio>
#include <new>

namespace neupims {

int ExitOnOutOfMemory(absl::FunctionRef<int()> run, absl::string_view remedy) {
  try {
    return run();
  } catch (const std::bad_alloc&) {
    // No allocation here: the message is printed from fixed text and the caller's view.
    std::fprintf(stderr,
                 "error: out of memory (the run needs more than this process may allocate; "
                 "%.*s)\n",
                 static_cast<int>(remedy.size()), remedy.data());
    return kExitRuntimeError;
  }
}

}  // namespace neupims
