// Whole-file reading and writing with errors that name the path.
//
// Every place that reads or writes a whole file goes through these two functions, so a full disk,
// a missing directory or a failed close is an absl::Status naming the file, never a silently
// truncated output.
#ifndef NEUPIMS_COMMON_FILE_IO_H_
#define NEUPIMS_COMMON_FILE_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims {

// The bytes of the file at `path`. NotFound when it does not exist, InvalidArgument when it is
// a directory or a device (/dev/zero never ends), otherwise the errno's status code; every
// message names the path. FIFOs and pipes are read to their end.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Size caps for ReadInputFile. Config files (device, model, server, cluster, CNN graph, sweep
// specs) are small; a larger one is a mistake, refused before it is read into memory. Data files
// (dataset TSV, trace CSV/JSONL, batch CSV) may be large; their cap only bounds memory.
inline constexpr int64_t kMaxConfigFileBytes = int64_t{16} << 20;  // 16 MiB
inline constexpr int64_t kMaxDataFileBytes = int64_t{4} << 30;     // 4 GiB

// The one loader for every input file (configs, datasets, traces, batch files, CNN graphs).
// Errors, each naming the path: an empty path ("no file name given"), NotFound, "is a
// directory", "is a device" (character or block device, socket), over `max_bytes` (checked
// before reading a regular file and while reading a FIFO or pipe, which stops one byte past the
// cap), a read error, and an empty file. A leading UTF-8 byte-order mark
// is removed, so every reader treats a BOM the same way.
absl::StatusOr<std::string> ReadInputFile(const std::string& path, int64_t max_bytes);

// A file's bytes in a buffer of its own, followed by one NUL (parsers of numbers may read that
// byte). Unlike a std::string it is not filled with zeros before the read writes it: for the
// 2.6 MB ShareGPT lengths that fill was 2.6 M instructions of `neupims simulate`'s timed part.
class InputBytes {
 public:
  InputBytes() : InputBytes(absl::string_view()) {}
  explicit InputBytes(absl::string_view text);  // a copy, for text already in memory

  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  absl::string_view view() const { return absl::string_view(data_.get(), size_); }

  // Makes room for `n` bytes after the first size() and returns where they go; Commit(k) then
  // counts the first k of them (k <= n) and writes the NUL after them. The room is not zeroed.
  char* Reserve(size_t n);
  void Commit(size_t k);
  // Removes the first `n` bytes (n <= size()).
  void RemovePrefix(size_t n);

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;  // bytes data_ holds, the NUL's included
};

// ReadInputFile's bytes (the same checks, errors and BOM removal) as InputBytes: the reader of
// the large inputs (TableReader::Open), without the zero fill of a std::string.
absl::StatusOr<InputBytes> ReadInputBytes(const std::string& path, int64_t max_bytes);

// The bearer token a token file holds (the server's --auth-token-file and the load generator's):
// its first line without surrounding white space. It travels in an HTTP header and gRPC
// metadata, which carry visible ASCII only. The error (InvalidArgument) says what is wrong
// with the contents; callers prefix the flag and the path.
absl::StatusOr<std::string> TokenFromFileContents(absl::string_view contents);

// Replaces the file at `path` with `contents` (parent directories must exist). Every write and
// the close are checked (a full disk often shows only at the close); errors name the path.
absl::Status WriteFile(const std::string& path, absl::string_view contents);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_FILE_IO_H_
