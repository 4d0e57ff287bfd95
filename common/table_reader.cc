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
  ASSIGN_OR_RETURN(std::string contents, ReadInputFile(path, kMaxDataFileBytes));
  return TableReader(path, std::move(contents), delimiter);
}

TableReader::TableReader(std::string path, std::string contents, char delimiter)
    : path_(std::move(path)), contents_(std::move(contents)), delimiter_(delimiter) {
  if (absl::StartsWith(contents_, "\xEF\xBB\xBF")) pos_ = 3;
}

bool TableReader::NextLine(absl::string_view* line) {
  if (pos_ >= contents_.size()) return false;
  const absl::string_view rest = absl::string_view(contents_).substr(pos_);
  // A plain loop: lines are short, and absl::string_view::find is an out-of-line call here.
  size_t end = 0;
  while (end < rest.size() && rest[end] != '\n') ++end;
  absl::string_view text = rest.substr(0, end);
  pos_ += std::min(end + 1, rest.size());
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  ++line_number_;
  line_start_ = static_cast<size_t>(text.data() - contents_.data());
  line_size_ = text.size();
  *line = text;
  return true;
}

bool TableReader::TakeLine(size_t text_size) {
  const absl::string_view r = rest();
  if (r.empty() || text_size > r.size()) return false;
  size_t terminator = 0;  // the bytes after the text up to the next line
  // NextLine strips one CR before the line's end, so its text never ends in that CR.
  const bool ends_in_cr = text_size > 0 && r[text_size - 1] == '\r';
  if (text_size == r.size()) {
    if (ends_in_cr) return false;
    terminator = 0;
  } else if (r[text_size] == '\n') {
    if (ends_in_cr) return false;
    terminator = 1;
  } else if (r[text_size] == '\r' && text_size + 1 == r.size()) {
    terminator = 1;  // NextLine strips a CR before the end of the file too
  } else if (r[text_size] == '\r' && r[text_size + 1] == '\n') {
    terminator = 2;
  } else {
    return false;
  }
  ++line_number_;
  line_start_ = pos_;
  line_size_ = text_size;
  pos_ += text_size + terminator;
  return true;
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
