// PIM instruction issue: how many instructions a GEMV program is, and when a phase of PIM work
// (every channel running its share of one kind of op) ends when instructions reach the channel
// controllers at a limited rate (PimIssue in hw/dram/hbm_spec.h, docs/hw.md).
//
// The reference NeuPIMs simulator's NPU+PIM baseline hands the memory controllers at most one
// PIM instruction per NPU cycle for the whole chip, from one queue ordered by channel (issue 14).
// Newton spends an instruction on every PIM_DOTPRODUCT, so it needs about 10x the instructions of
// the NeuPIMs command set (one PIM_GEMV per dot product): for one head of 128 at L = 512,
//   logit  K^T q : 9.25 T (Newton) vs 1.25 T (NeuPIMs), T = ceil(L / 32) rows (4 heads share a
//                  row's open and vector load);
//   attend p V   : 4 n + 9 vs 9, n = ceil(L / 16) column steps per dot product;
// 285 vs 29 in all. Here: one instruction per tile (the row open), per dot product (its result)
// and per vector load, plus one per column step under Newton.
#ifndef NEUPIMS_HW_PIM_ISSUE_LIMIT_H_
#define NEUPIMS_HW_PIM_ISSUE_LIMIT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "hw/dram/hbm_spec.h"
#include "hw/pim/gemv_plan.h"

namespace neupims::hw {

int64_t PimInstructions(const GemvProgram& program, PimCommandSet command_set);
// The same count from a run's totals (PimOpResult's tiles, results, vector_loads, column_steps).
int64_t PimInstructions(int64_t tiles, int64_t dot_products, int64_t vector_loads,
                        int64_t column_steps, PimCommandSet command_set);

// End of a phase, from its start, given each channel's execution time (its ops back to back, as
// if instructions were free) and instruction count, both indexed by channel:
//   kUnlimited: max_c exec_c
//   kChannel  : max_c max(exec_c, I_c / r)
//   kChip     : max_c (S_c + max(exec_c, I_c / r)), S_c = sum_{c' < c} I_c' / r
// A channel whose instructions arrive slower than it executes them ends with its last one (the
// execution of that last instruction is not added: a few cycles against thousands).
// `instructions` may be empty for kUnlimited.
double IssueLimitedSpanNs(absl::Span<const double> exec_ns, absl::Span<const double> instructions,
                          const PimIssue& issue);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_PIM_ISSUE_LIMIT_H_
