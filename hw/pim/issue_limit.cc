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

double IssueLimitedSpanNs(absl::Span<const double> exec_ns, absl::Span<const double> instructions,
                          const PimIssue& issue) {
  double span = 0;
  if (issue.scope == PimIssueScope::kUnlimited) {
    for (double e : exec_ns) span = std::max(span, e);
    return span;
  }
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
