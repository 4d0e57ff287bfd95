#include "common/option_ranges.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace neupims {

std::string DoubleRangeProblem(double value, DoubleRange range) {
  const bool low_ok = range.min_exclusive ? value > range.min : value >= range.min;
  if (std::isfinite(value) && low_ok && value <= range.max) return "";
  const bool has_min = range.min > -std::numeric_limits<double>::infinity();
  const bool has_max = range.max < std::numeric_limits<double>::infinity();
  const char* op = range.min_exclusive ? ">" : ">=";
  if (has_min && has_max) {
    return absl::StrFormat("must be in %s%g, %g]", range.min_exclusive ? "(" : "[", range.min,
                           range.max);
  }
  if (has_min) return absl::StrFormat("must be %s %g", op, range.min);
  if (has_max) return absl::StrFormat("must be <= %g", range.max);
  return "must be a finite number";
}

}  // namespace neupims
