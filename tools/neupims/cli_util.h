// Small helpers shared by the `neupims` subcommands: aligned text tables, unit formatting,
// and turning a failed absl::Status into a clear message and exit code.
#ifndef NEUPIMS_TOOLS_NEUPIMS_CLI_UTIL_H_
#define NEUPIMS_TOOLS_NEUPIMS_CLI_UTIL_H_

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace neupims::cli {

// Two-column "name  value" table printed with aligned values.
class KeyValueTable {
 public:
  explicit KeyValueTable(std::string title) : title_(std::move(title)) {}
  void Add(std::string key, std::string value) {
    rows_.emplace_back(std::move(key), std::move(value));
  }
  void Section(std::string name) { rows_.emplace_back(std::move(name), "\x01"); }
  void Print(FILE* out = stdout) const;

 private:
  std::string title_;
  std::vector<std::pair<std::string, std::string>> rows_;
};

// `text` with the part from `begin` to `end` (markers included, plus the newline after `end`)
// replaced by `section`, which carries its own markers; appended after a blank line when the
// markers are absent. Generated sections of docs/results.md are regenerated one at a time.
std::string SpliceMarkedSection(absl::string_view text, absl::string_view section,
                                absl::string_view begin, absl::string_view end);

std::string FormatCount(double v);                 // 1234567 -> "1,234,567"
std::string FormatSi(double v, const char* unit);  // 1.2e-6, "J" -> "1.200 uJ"
std::string FormatPercent(double fraction);        // 0.1234 -> "12.3%"
std::string FormatFixed(double v, int digits);

// Prints "error: <message>" to stderr and returns the exit code for the status (2 for bad
// input, 1 otherwise).
int ReportError(const absl::Status& status);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_CLI_UTIL_H_
