// TableReader: a CSV or TSV file read line by line, with errors "<path>:<line>: <what>".
//
// The one reader for the project's delimited inputs (workload traces and length datasets,
// `neupims step` batch files). It walks the file's contents without copying them: lines end in
// LF or CRLF (NextLine states the rule), a UTF-8 byte order mark at the start is skipped, lines
// are numbered from 1. It does not interpret fields (no quoting, no trimming): what a column means,
// and which header a file must have, is the caller's to check, and the caller reports problems
// through Error() so every message names the file and the line.
//
//   ASSIGN_OR_RETURN(TableReader table, TableReader::Open(path, ','));
//   std::vector<absl::string_view> fields;
//   if (!table.NextLine(&header)) return table.Error("missing header");
//   while (table.NextRow(&fields)) { ... return table.Error("bad count"); ... }
#ifndef NEUPIMS_COMMON_TABLE_READER_H_
#define NEUPIMS_COMMON_TABLE_READER_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/swar.h"

namespace neupims {

class TableReader {
 public:
  // Reads the whole file (ReadFile's errors: NotFound when missing, each naming the path).
  static absl::StatusOr<TableReader> Open(const std::string& path, char delimiter);
  // A table from text already in memory; `path` is what errors call it.
  TableReader(std::string path, std::string contents, char delimiter);

  TableReader(TableReader&&) = default;
  TableReader& operator=(TableReader&&) = default;

  // Lines and fields returned below view the reader's contents: they are valid while the
  // reader lives and is not moved.

  // The next line as it is (blank lines included), without its terminator; false at the end.
  // The one line rule of the project's delimited inputs: a line ends at LF or at the end of the
  // file, and one CR before that end is not part of it (CRLF files, a CR at the very end).
  // In memory a line is followed by its LF, the CR dropped before it, or the NUL after the
  // contents (std::string's), never by a digit: parsers of numbers may read that one byte.
  // Inline: the length datasets have 391k lines of ~7 bytes, so the LF is looked for in the
  // line's first 8 bytes as one word (swar.h) before memchr takes the rest.
  bool NextLine(absl::string_view* line) {
    if (pos_ >= contents_.size()) return false;
    const char* const start = contents_.data() + pos_;
    const size_t left = contents_.size() - pos_;
    const size_t lf = FindLf(start, left);  // `left` if the last line has no LF
    size_t size = lf;
    line_start_ = pos_;
    pos_ += lf == left ? left : lf + 1;
    if (size > 0 && start[size - 1] == '\r') --size;
    line_size_ = size;
    ++line_number_;
    *line = absl::string_view(start, size);
    return true;
  }
  // The next line that is not blank (whitespace only), split at the delimiter; false at the end.
  bool NextRow(std::vector<absl::string_view>* fields);
  // Splits a line at the delimiter (a header, say); an empty line is one empty field.
  std::vector<absl::string_view> Split(absl::string_view line) const;

  // The number of the line last returned (1-based; 0 before the first).
  int64_t line_number() const { return line_number_; }
  // The text of the line last returned.
  absl::string_view line() const {
    return absl::string_view(contents_).substr(line_start_, line_size_);
  }
  const std::string& path() const { return path_; }
  size_t size_bytes() const { return contents_.size(); }
  // At least the number of lines NextLine has left to return (LFs left, plus one), for
  // reserving per-line storage exactly once.
  size_t LinesLeftBound() const {
    const char* p = contents_.data() + pos_;
    const size_t n = contents_.size() - pos_;
    size_t lines = 1, i = 0;
    // Eight bytes a word (the count does not depend on the byte order); the per-byte counts
    // (0 or 1) add up in byte lanes for at most 31 words, so their total (<= 248) is a byte.
    while (n - i >= 8) {
      uint64_t lanes = 0;
      for (int k = 0; k < 31 && n - i >= 8; ++k, i += 8) {
        lanes += swar::BytesEqual(swar::Load8(p + i), '\n') >> 7;
      }
      lines += static_cast<size_t>(swar::SumByteLanes(lanes));
    }
    for (; i < n; ++i) lines += p[i] == '\n';
    return lines;
  }

  // InvalidArgument "<path>:<line>: <what>" for the line last returned (line 1 before any).
  absl::Status Error(absl::string_view what) const;

 private:
  // The offset of the first LF in [p, p + n), or n if there is none.
  static size_t FindLf(const char* p, size_t n) {
    if (swar::kLittleEndian && n >= 8) {
      const uint64_t lf = swar::BytesEqual(swar::Load8(p), '\n');
      if (lf != 0) return static_cast<size_t>(swar::FirstMarked(lf));
      const void* const rest = std::memchr(p + 8, '\n', n - 8);
      return rest == nullptr ? n : static_cast<size_t>(static_cast<const char*>(rest) - p);
    }
    const void* const found = std::memchr(p, '\n', n);
    return found == nullptr ? n : static_cast<size_t>(static_cast<const char*>(found) - p);
  }

  std::string path_;
  std::string contents_;
  size_t pos_ = 0;  // offset of the next line in contents_ (an offset survives a move)
  char delimiter_;
  int64_t line_number_ = 0;
  size_t line_start_ = 0, line_size_ = 0;  // the line last returned
};

}  // namespace neupims

#endif  // NEUPIMS_COMMON_TABLE_READER_H_
