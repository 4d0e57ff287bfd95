// A CLI11 check built from the shared option range table (common/option_ranges.h), so a flag and
// its config field refuse the same values with the same words: NaN, infinities and values out
// of range, e.g. "--speed: value 1e-300 must be in [1e-06, 1e+09]".
#ifndef NEUPIMS_TOOLS_WORKLOAD_RANGE_FLAG_H_
#define NEUPIMS_TOOLS_WORKLOAD_RANGE_FLAG_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/option_ranges.h"

namespace neupims {

inline CLI::Validator InRange(DoubleRange range) {
  return CLI::Validator(
      [range](std::string& text) -> std::string {
        double value = 0;
        if (!absl::SimpleAtod(text, &value))
          return absl::StrCat("value ", text, " is not a number");
        const std::string problem = DoubleRangeProblem(value, range);
        return problem.empty() ? "" : absl::StrCat("value ", text, " ", problem);
      },
      "");
}

// The same for an integer option: the flag and its config field share the table's bounds.
inline CLI::Validator InRange(IntRange range) { return CLI::Range(range.min, range.max); }

}  // namespace neupims

#endif  // NEUPIMS_TOOLS_WORKLOAD_RANGE_FLAG_H_
