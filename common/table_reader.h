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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/file_io.h"
#include "common/swar.h"

namespace neupims {

class TableReader {
 public:
  // Reads the whole file (ReadFile's errors: NotFound when missing, each naming the path).
  static absl::StatusOr<TableReader> Open(const std::string& path, char delimiter);
  // A table from text already in memory (copied); `path` is what errors call it.
  TableReader(std::string path, absl::string_view contents, char delimiter);
  // A table of a file's bytes (ReadInputBytes'), taken over without a copy.
  TableReader(std::string path, InputBytes contents, char delimiter);

  TableReader(TableReader&&) = default;
  TableReader& operator=(TableReader&&) = default;

  // Lines and fields returned below view the reader's contents: they are valid while the
  // reader lives and is not moved.

  // The next line as it is (blank lines included), without its terminator; false at the end.
  // The one line rule of the project's delimited inputs: a line ends at LF or at the end of the
  // file, and one CR before that end is not part of it (CRLF files, a CR at the very end).
  // In memory a line is followed by its LF, the CR dropped before it, or the NUL after the
  // contents (InputBytes'), never by a digit: parsers of numbers may read that one byte.
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
  // The fast path for tables of two counts a line (the length datasets, 391k lines of
  // "123<TAB>45"): while the next line is exactly two runs of 1 to 18 decimal digits joined by
  // the delimiter, takes that line as NextLine would (the same line rule, the line counted) and
  // calls on_pair(first, second); stops before any other line (blank, spaces, signs, 19 digits or
  // more, a third field, a CR inside), which NextLine returns next for the caller's general path
  // and its errors, and at the end of the contents. One pass over the bytes in locals: the digits
  // find the line's end, so there is no separate search for the LF. on_pair must not use the
  // reader (its position is stored when the run stops).
  template <typename OnPair>
  void TakeCountPairs(OnPair&& on_pair);
  // The next line that is not blank (whitespace only), split at the delimiter; false at the end.
  bool NextRow(std::vector<absl::string_view>* fields);
  // Splits a line at the delimiter (a header, say); an empty line is one empty field.
  std::vector<absl::string_view> Split(absl::string_view line) const;

  // The number of the line last returned (1-based; 0 before the first).
  int64_t line_number() const { return line_number_; }
  // The text of the line last returned.
  absl::string_view line() const { return contents_.view().substr(line_start_, line_size_); }
  const std::string& path() const { return path_; }
  size_t size_bytes() const { return contents_.size(); }
  // At least the number of lines NextLine has left to return (LFs left, plus one), for
  // reserving per-line storage exactly once.
  size_t LinesLeftBound() const {
    const char* p = contents_.data() + pos_;
    const size_t n = contents_.size() - pos_;
    size_t lines = 1, i = 0;
    // Sixteen bytes a step as one GCC/Clang generic vector (SSE2 on x86-64, NEON on ARM): the
    // compare gives 0xFF in each LF's byte, subtracted (+1) into byte lanes for at most 255
    // steps, so no lane wraps. About a third of the instructions of the 8-byte words.
    using Bytes16 = unsigned char __attribute__((vector_size(16)));
    while (n - i >= 16) {
      const size_t steps = std::min<size_t>((n - i) / 16, 255);
      Bytes16 lanes = {};
      for (size_t k = 0; k < steps; ++k, i += 16) {
        Bytes16 bytes;
        std::memcpy(&bytes, p + i, sizeof bytes);
        lanes -= reinterpret_cast<Bytes16>(bytes == '\n');
      }
      for (int b = 0; b < 16; ++b) lines += lanes[b];
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

  // The first byte at or after p that is not a decimal digit, with the digits' value in *value
  // (exact for up to 19 digits; callers refuse longer runs). Stops at the NUL after the contents
  // at the latest (InputBytes'), so it needs no end check per digit.
  static const char* Digits(const char* p, uint64_t* value) {
    // Two digits a step where both are (most counts have 2 to 4): one test of the pair's end,
    // and v * 100 + (10 * a + b) instead of two dependent steps.
    uint64_t v = 0;
    for (;;) {
      const unsigned a = static_cast<unsigned>(static_cast<unsigned char>(p[0])) - '0';
      if (a > 9) break;
      const unsigned b = static_cast<unsigned>(static_cast<unsigned char>(p[1])) - '0';
      if (b > 9) {
        v = v * 10 + a;
        ++p;
        break;
      }
      v = v * 100 + (a * 10 + b);
      p += 2;
    }
    *value = v;
    return p;
  }

  std::string path_;
  InputBytes contents_;  // followed by a NUL (InputBytes')
  size_t pos_ = 0;       // offset of the next line in contents_ (an offset survives a move)
  char delimiter_;
  int64_t line_number_ = 0;
  size_t line_start_ = 0, line_size_ = 0;  // the line last returned
};

template <typename OnPair>
void TableReader::TakeCountPairs(OnPair&& on_pair) {
  // A delimiter that could be a digit, a line end or the contents' final NUL would break the
  // digit and end tests below; no table uses one, but then every line takes the general path.
  if ((delimiter_ >= '0' && delimiter_ <= '9') || delimiter_ == '\0' || delimiter_ == '\n' ||
      delimiter_ == '\r') {
    return;
  }
  const char* const begin = contents_.data();
  const char* const end = begin + contents_.size();
  const char delimiter = delimiter_;
  const char* p = begin + pos_;
  const char* line = nullptr;  // the last line taken, if any
  size_t line_size = 0;
  int64_t lines = line_number_;
  while (p != end) {
    uint64_t first, second;
    // Each count is 1 to 18 digits (so it fits an int64_t): a size of 0 wraps above 17.
    const char* const tab = Digits(p, &first);
    if (static_cast<size_t>(tab - p) - 1 >= 18 || *tab != delimiter) break;
    const char* const stop = Digits(tab + 1, &second);
    if (static_cast<size_t>(stop - (tab + 1)) - 1 >= 18) break;
    // The line rule, as NextLine states it: the line ends at LF or at the end of the contents,
    // and one CR before that end is not part of it.
    const char* next;
    if (*stop == '\n') {
      next = stop + 1;
    } else if (stop == end) {
      next = end;
    } else if (*stop == '\r' && (stop + 1 == end || stop[1] == '\n')) {
      next = stop + 1 == end ? end : stop + 2;
    } else {
      break;  // more on this line: the general path's
    }
    line = p;
    line_size = static_cast<size_t>(stop - p);
    ++lines;
    p = next;
    on_pair(static_cast<int64_t>(first), static_cast<int64_t>(second));
  }
  pos_ = static_cast<size_t>(p - begin);
  line_number_ = lines;
  if (line != nullptr) {
    line_start_ = static_cast<size_t>(line - begin);
    line_size_ = line_size;
  }
}

}  // namespace neupims

#endif  // NEUPIMS_COMMON_TABLE_READER_H_
