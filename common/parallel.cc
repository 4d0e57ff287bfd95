#include "common/parallel.h"

#include <algorithm>

#include "tbb/blocked_range.h"
#include "tbb/info.h"
#include "tbb/parallel_for.h"
#include "tbb/partitioner.h"
#include "tbb/task_arena.h"

namespace neupims {

int DefaultJobs() { return std::max(1, tbb::info::default_concurrency()); }

void ParallelFor(int n, int jobs, absl::FunctionRef<void(int)> fn) {
  if (jobs <= 1 || n <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  // One task per index: the points' costs differ by orders of magnitude, so chunking them
  // would leave threads idle at the end.
  tbb::task_arena arena(std::min(jobs, n));
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int>(0, n, 1),
        [&](const tbb::blocked_range<int>& r) {
          for (int i = r.begin(); i != r.end(); ++i) fn(i);
        },
        tbb::simple_partitioner());
  });
}

}  // namespace neupims
