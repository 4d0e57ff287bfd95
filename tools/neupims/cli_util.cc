#include "tools/neupims/cli_util.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace neupims::cli {

void KeyValueTable::Print(FILE* out) const {
  size_t width = 0;
  for (const auto& [k, v] : rows_) {
    if (v != "\x01") width = std::max(width, k.size());
  }
  if (!title_.empty()) absl::FPrintF(out, "%s\n", title_);
  for (const auto& [k, v] : rows_) {
    if (v == "\x01") {
      absl::FPrintF(out, "  %s\n", k);
    } else {
      absl::FPrintF(out, "    %-*s  %s\n", static_cast<int>(width), k, v);
    }
  }
}

std::string SpliceMarkedSection(absl::string_view text, absl::string_view section,
                                absl::string_view begin, absl::string_view end) {
  const size_t b = text.find(begin);
  const size_t e = text.find(end);
  if (b == absl::string_view::npos || e == absl::string_view::npos || e < b) {
    std::string out(text);
    if (!out.empty() && out.back() != '\n') out += '\n';
    return absl::StrCat(out, "\n", section);
  }
  size_t tail = e + end.size();
  if (tail < text.size() && text[tail] == '\n') ++tail;
  return absl::StrCat(text.substr(0, b), section, text.substr(tail));
}

std::string FormatCount(double v) {
  std::string digits = absl::StrFormat("%.0f", std::fabs(v));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string FormatSi(double v, const char* unit) {
  static const struct {
    double scale;
    const char* prefix;
  } kPrefixes[] = {{1e12, "T"}, {1e9, "G"},  {1e6, "M"},  {1e3, "k"},  {1, ""},
                   {1e-3, "m"}, {1e-6, "u"}, {1e-9, "n"}, {1e-12, "p"}};
  if (v == 0) return absl::StrFormat("0 %s", unit);
  for (const auto& p : kPrefixes) {
    if (std::fabs(v) >= p.scale) return absl::StrFormat("%.3f %s%s", v / p.scale, p.prefix, unit);
  }
  return absl::StrFormat("%.3g %s", v, unit);
}

std::string FormatPercent(double fraction) { return absl::StrFormat("%.1f%%", fraction * 100); }

std::string FormatFixed(double v, int digits) { return absl::StrFormat("%.*f", digits, v); }

int ReportError(const absl::Status& status) {
  absl::FPrintF(stderr, "error: %s\n", status.message());
  return status.code() == absl::StatusCode::kInvalidArgument ||
                 status.code() == absl::StatusCode::kNotFound ||
                 status.code() == absl::StatusCode::kFailedPrecondition
             ? 2
             : 1;
}

}  // namespace neupims::cli
