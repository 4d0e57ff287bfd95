// Transparent huge pages for the heap of a batch run (`neupims simulate`).
//
// A simulation run allocates its memory once and touches it at once: about 24 MB for 10,000
// ShareGPT requests (the dataset's rows, the requests, the records, the cost caches), faulted
// in 4 KiB at a time (6,240 page faults, about a tenth of the run's wall time), and then read
// through a TLB of 4 KiB entries. Debian's kernels back a range with 2 MiB pages only where
// the process asked for them (THP mode "madvise"); glibc's malloc asks only when started with
// GLIBC_TUNABLES=glibc.malloc.hugetlb=1, which a program cannot set for itself.
// PrepareHugePageHeap does the same for the rest of the process heap (docs/benchmarks.md,
// fourteenth step).
//
//   program break before            heap grown once by `expected_bytes`        program break
//   ...used | top | ...4 KiB pages... | 2 MiB | 2 MiB | ... | 2 MiB | (rest)  |
//                                     ^ first 2 MiB boundary past the     ^ last boundary
//                                       chunk headers malloc wrote          below the break
//                                     [--------- madvise(MADV_HUGEPAGE) ---------]
//              [------ spacer ------] (allocated, never freed or touched: allocations start
//                                      on the huge pages)
//
// glibc's malloc is set to keep allocations up to 32 MiB in the heap (instead of one mmap each,
// whose pages are faulted in afresh every time) and to keep the memory it frees.
#ifndef NEUPIMS_COMMON_HEAP_PAGES_H_
#define NEUPIMS_COMMON_HEAP_PAGES_H_

#include <cstddef>

#include "absl/status/status.h"

namespace neupims {

// Grows the heap by about `expected_bytes` (address space only: a page is allocated when first
// touched) and advises the kernel to back that range with transparent huge pages. For batch runs
// only: freed memory is not given back to the system until the process exits. Once per process:
// a later call returns OK and changes nothing. Not thread-safe against other threads' mallocs.
// Errors (the run works, only without the huge pages; malloc's settings above, once accepted,
// stay): FailedPrecondition when malloc is not glibc's or its heap is not at the program break
// (the sanitizers' allocators), or when mallopt refuses a setting; the errno of madvise (EINVAL:
// a kernel without THP).
absl::Status PrepareHugePageHeap(size_t expected_bytes);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_HEAP_PAGES_H_
