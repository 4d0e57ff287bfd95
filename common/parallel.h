// ParallelFor: independent tasks on oneTBB worker threads, for sweeps whose points share nothing
// (experiment points, cross-check shapes). Models and engines are not thread-safe, so each task
// builds its own.
//
// Determinism: a task writes only its own slot of a vector indexed by task, and the caller
// reads the vector in index order afterwards; the result is then the serial run's, whatever
// the thread count or the order in which tasks finish.
#ifndef NEUPIMS_COMMON_PARALLEL_H_
#define NEUPIMS_COMMON_PARALLEL_H_

#include "absl/functional/function_ref.h"

namespace neupims {

// The hardware threads of the machine (the default for `--jobs`), at least 1.
int DefaultJobs();

// Calls fn(i) once for every i in [0, n) on at most `jobs` threads and returns when all calls
// have returned. jobs <= 1 calls fn(0), fn(1), ... in order on the calling thread.
void ParallelFor(int n, int jobs, absl::FunctionRef<void(int)> fn);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_PARALLEL_H_
