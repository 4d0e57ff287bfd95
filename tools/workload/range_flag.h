// A CLI11 check built from the shared option range table (common/option_ranges.h), so a flag and
// its config field refuse the same values with the same words: NaN, infinities and values out
// of range, e.g. "--speed: value 1e-300 must be in [1e-06, 1e+09]".
#ifndef NEUPIMS_TOOLS_WORKLOAD_RANGE_FLAG_H_
#define NEUPIMS_TOOLS_WORKLOAD_RANGE_FLAG_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// In place of CLI11's PositiveNumber and NonNegativeNumber, which let NaN through and print
// their bound as a 309-digit number: NaN and infinities are refused, and the message is
// "value -1 must be >= 0". For integer options too (a fraction is then refused by the
// conversion).
inline CLI::Validator Positive() { return InRange(DoubleRange{.min = 0, .min_exclusive = true}); }
inline CLI::Validator NonNegative() { return InRange(DoubleRange{.min = 0}); }

// A file name or a workload spec given on the command line: CLI11 takes "" as a value, which the
// commands read as "not given" (no output written, ShareGPT replayed instead of the trace).
inline CLI::Validator NonEmpty() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "value is empty (give a file name, or leave the flag out)" : "";
      },
      "");
}

// An output file, checked when the flags are parsed, before anything runs: empty, a directory,
// or in a folder that does not exist. Such a write used to fail only after the run, leaving the
// outputs written before it behind (`--json-out ok.json --csv nodir/x.csv`).
inline CLI::Validator OutputFile() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty()) return "value is empty (give a file name, or leave the flag out)";
        std::error_code ec;
        if (std::filesystem::is_directory(text, ec)) return "'" + text + "' is a directory";
        const std::filesystem::path parent = std::filesystem::path(text).parent_path();
        if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
          return "folder '" + parent.string() + "' does not exist";
        }
        return "";
      },
      "");
}

// A comma-separated list flag ("--seq-lens 128,256", also repeatable), on a
// std::vector<std::string> without ->delimiter(','): CLI11's delimiter drops empty items in silence
// ("--cnn-model a,,b" served a and b). This check sees the unsplit value, refuses an empty item
// (CLI11 names the flag: "--cnn-model: empty item in 'a,,b'") and runs `item` on each;
// SplitCommaList then splits the checked values.
inline CLI::Validator CommaList(CLI::Validator item) {
  return CLI::Validator(
      [item](std::string& text) -> std::string {
        for (absl::string_view part : absl::StrSplit(text, ',')) {
          if (part.empty()) return absl::StrCat("empty item in '", text, "'");
          std::string value(part);
          if (std::string problem = item(value); !problem.empty()) return problem;
        }
        return "";
      },
      "");
}
inline CLI::Validator CommaList() { return CommaList(CLI::Validator()); }

inline std::vector<std::string> SplitCommaList(const std::vector<std::string>& values) {
  std::vector<std::string> items;
  for (const std::string& v : values) {
    for (absl::string_view part : absl::StrSplit(v, ',')) items.emplace_back(part);
  }
  return items;
}

// A uint64 option (seeds): CLI11 alone takes -1 and 2^64 or more as 2^64 - 1 in silence.
inline CLI::Validator Uint64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        if (text.empty() || text[0] == '-' || text[0] == '+' || !absl::SimpleAtoi(text, &value))
          return absl::StrCat("value ", text, " is not an integer in [0, 2^64 - 1]");
        return "";
      },
      "");
}

}  // namespace neupims

#endif  // NEUPIMS_TOOLS_WORKLOAD_RANGE_FLAG_H_
