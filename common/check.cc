#include "common/check.h"

#include <cstdio>
#include <cstdlib>

namespace neupims::internal {

void CheckFailed(const char* cond, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "CHECK failed at %s:%d: %s %s\n", file, line, cond, msg);
  std::fflush(stderr);
  std::abort();
}

}  // namespace neupims::internal
