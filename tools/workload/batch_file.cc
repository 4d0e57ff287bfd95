#include "tools/workload/batch_file.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace neupims::workload {
namespace {

// The column indices a batch-file header names: `seq_len` and optionally one of `channel` /
// `ch_idx`. Unknown, repeated and conflicting columns are errors, never ignored.
absl::Status ReadBatchHeader(TableReader& table, absl::string_view line, int* seq_col, int* ch_col,
                             size_t* columns) {
  const std::vector<absl::string_view> header = table.Split(absl::StripAsciiWhitespace(line));
  *columns = header.size();
  std::string channel_name;
  for (size_t i = 0; i < header.size(); ++i) {
    const absl::string_view h = absl::StripAsciiWhitespace(header[i]);
    int* col = h == "seq_len" ? seq_col : (h == "channel" || h == "ch_idx") ? ch_col : nullptr;
    if (col == nullptr) {
      return table.Error(absl::StrCat("unknown column '", h,
                                      "' (expected seq_len and optionally channel or ch_idx)"));
    }
    if (*col >= 0) {
      return table.Error(h == "seq_len" ? std::string("column 'seq_len' given twice")
                                        : absl::StrCat("columns '", channel_name, "' and '", h,
                                                       "' both name the channel; give one"));
    }
    if (col == ch_col) channel_name = std::string(h);
    *col = static_cast<int>(i);
  }
  if (*seq_col < 0)
    return table.Error("header must name a seq_len column (and optionally channel)");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<BatchRow>> ReadBatchFile(const std::string& path) {
  ASSIGN_OR_RETURN(TableReader table, TableReader::Open(path, ','));
  return ParseBatchFile(table);
}

absl::StatusOr<std::vector<BatchRow>> ParseBatchFile(TableReader& table) {
  absl::string_view line;
  if (!table.NextLine(&line)) return table.Error("empty batch file (expected a header)");
  int seq_col = -1, ch_col = -1;
  size_t columns = 0;
  RETURN_IF_ERROR(ReadBatchHeader(table, line, &seq_col, &ch_col, &columns));
  std::vector<BatchRow> out;
  std::vector<absl::string_view> f;
  while (table.NextRow(&f)) {
    BatchRow r;
    int channel = 0;
    if (f.size() != columns ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(f[seq_col]), &r.seq_len) ||
        (ch_col >= 0 && !absl::SimpleAtoi(absl::StripAsciiWhitespace(f[ch_col]), &channel))) {
      return table.Error(absl::StrCat("expected ", columns, " integer fields"));
    }
    if (ch_col >= 0) {
      if (channel < 0) {
        return table.Error(absl::StrCat("channel ", channel,
                                        " must be >= 0 (leave out the channel column to let the "
                                        "policy assign channels)"));
      }
      r.channel = channel;
    }
    if (static_cast<int64_t>(out.size()) == kMaxBatchRequests) {
      return table.Error(absl::StrCat("more than ", kMaxBatchRequests, " requests in one batch"));
    }
    r.line = table.line_number();
    out.push_back(r);
  }
  if (out.empty()) return table.Error("no requests");
  return out;
}

}  // namespace neupims::workload
