#include "hw/pim/issue_limit.h"

#include <algorithm>

namespace neupims::hw {

int64_t PimInstructions(int64_t tiles, int64_t dot_products, int64_t vector_loads,
                        int64_t column_steps, PimCommandSet command_set) {
  const int64_t n = tiles + dot_products + vector_loads;
  return command_set == PimCommandSet::kNewton ? n + column_steps : n;
}

int64_t PimInstructions(const GemvProgram& program, PimCommandSet command_set) {
  return PimInstructions(program.tiles(), program.dot_products(), program.vector_loads(),
                         program.column_steps(), command_set);
}

namespace {

// max(0, the largest value), as one running std::max from 0 gives it: four running maxima (the
// engine asks twice per iteration over 32 channels). The same double in every case: a running
// maximum starts at +0 and takes a value only when it is strictly larger (so never a NaN or a
// -0), and equal positive doubles are the same bits.
double MaxFromZero(absl::Span<const double> values) {
  auto take = [](double m, double v) { return m < v ? v : m; };  // std::max(m, v)
  double m0 = 0, m1 = 0, m2 = 0, m3 = 0;
  const double* v = values.data();
  const size_t n = values.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    m0 = take(m0, v[i]);
    m1 = take(m1, v[i + 1]);
    m2 = take(m2, v[i + 2]);
    m3 = take(m3, v[i + 3]);
  }
  for (; i < n; ++i) m0 = take(m0, v[i]);
  return take(take(m0, m1), take(m2, m3));
}

}  // namespace

double IssueLimitedSpanNs(absl::Span<const double> exec_ns, absl::Span<const double> instructions,
                          const PimIssue& issue) {
  if (issue.scope == PimIssueScope::kUnlimited) return MaxFromZero(exec_ns);
  double span = 0;
  const double ns_per_instruction = 1.0 / issue.instructions_per_ns;
  double issued_before_ns = 0;  // S_c: the lower channels' instructions (kChip only)
  for (size_t c = 0; c < exec_ns.size(); ++c) {
    const double issue_ns = c < instructions.size() ? instructions[c] * ns_per_instruction : 0;
    span = std::max(span, issued_before_ns + std::max(exec_ns[c], issue_ns));
    if (issue.scope == PimIssueScope::kChip) issued_before_ns += issue_ns;
  }
  return span;
}

}  // namespace neupims::hw
