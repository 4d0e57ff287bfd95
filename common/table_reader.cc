#include "common/table_reader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace neupims {

absl::StatusOr<TableReader> TableReader::Open(const std::string& path, char delimiter) {
  ASSIGN_OR_RETURN(InputBytes contents, ReadInputBytes(path, kMaxDataFileBytes));
  return TableReader(path, std::move(contents), delimiter);
}

TableReader::TableReader(std::string path, absl::string_view contents, char delimiter)
    : TableReader(std::move(path), InputBytes(contents), delimiter) {}

TableReader::TableReader(std::string path, InputBytes contents, char delimiter)
    : path_(std::move(path)), contents_(std::move(contents)), delimiter_(delimiter) {
  if (absl::StartsWith(contents_.view(), "\xEF\xBB\xBF")) pos_ = 3;
}

bool TableReader::NextRow(std::vector<absl::string_view>* fields) {
  // Hot path (hundreds of thousands of rows per dataset): plain loops, no allocation per row.
  absl::string_view line;
  while (NextLine(&line)) {
    if (std::all_of(line.begin(), line.end(),
                    [](char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); })) {
      continue;  // blank
    }
    fields->clear();  // keeps its capacity
    size_t start = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] != delimiter_) continue;
      fields->push_back(line.substr(start, i - start));
      start = i + 1;
    }
    fields->push_back(line.substr(start));
    return true;
  }
  return false;
}

std::vector<absl::string_view> TableReader::Split(absl::string_view line) const {
  return absl::StrSplit(line, delimiter_);
}

absl::Status TableReader::Error(absl::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat(path_, ":", std::max<int64_t>(line_number_, 1), ": ", what));
}

}  // namespace neupims
