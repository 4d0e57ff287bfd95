#include "common/file_io.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace neupims {
namespace {

// "<path>: <what>: <strerror>" under the errno's status code.
absl::Status ErrnoError(int error, const std::string& path, absl::string_view what) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(path, ": ", what, ": ", std::strerror(error)));
}

// Refuses what is no file's contents before opening it: a directory, and a character or block
// device or a socket (/dev/zero and /dev/urandom never end: they used to be read until memory ran
// out). FIFOs and pipes are streams of a file's bytes and are read (their cap holds while
// reading). A path that does not exist is left to the open, which names it.
absl::Status CheckIsAFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
  }
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a device, not a regular file"));
  }
  return absl::OkStatus();
}

// At most `limit` + 1 bytes of `path` (all of it when `limit` < 0): one more than the cap tells
// the caller the file is over it without reading an endless stream to its end.
absl::StatusOr<InputBytes> ReadUpTo(const std::string& path, int64_t limit) {
  RETURN_IF_ERROR(CheckIsAFile(path));
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return ErrnoError(error, path, "cannot open");
  }
  const size_t max = limit < 0 ? std::string().max_size() : static_cast<size_t>(limit) + 1;
  // In one read when the size is known (a regular file: no copies as the buffer grows), then in
  // chunks for whatever follows (a pipe, a file that grew).
  InputBytes data;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > 0) {
    const size_t want = std::min<size_t>(static_cast<size_t>(size), max);
    data.Commit(std::fread(data.Reserve(want), 1, want, file));
  }
  // Through a buffer on the stack: the read that finds a regular file's end must not grow (and
  // copy) the buffer the first read filled exactly.
  char chunk[1 << 16];
  size_t n = 0;
  while (data.size() < max &&
         (n = std::fread(chunk, 1, std::min(sizeof(chunk), max - data.size()), file)) > 0) {
    std::memcpy(data.Reserve(n), chunk, n);
    data.Commit(n);
  }
  const bool failed = std::ferror(file) != 0;
  const int error = errno;
  std::fclose(file);  // read-only: nothing to lose at the close
  if (failed) return ErrnoError(error, path, "read error");
  return data;
}

}  // namespace

InputBytes::InputBytes(absl::string_view text) {
  char* const at = Reserve(text.size());
  if (!text.empty()) std::memcpy(at, text.data(), text.size());  // an empty view may be null
  Commit(text.size());
}

char* InputBytes::Reserve(size_t n) {
  if (capacity_ - size_ <= n) {  // room for n bytes and the NUL
    // Doubling keeps a read in chunks linear; the first read of a regular file fits exactly.
    const size_t capacity = std::max(size_ + n + 1, 2 * capacity_);
    std::unique_ptr<char[]> grown(new char[capacity]);
    if (size_ > 0) std::memcpy(grown.get(), data_.get(), size_);
    data_ = std::move(grown);
    capacity_ = capacity;
  }
  return data_.get() + size_;
}

void InputBytes::Commit(size_t k) {
  size_ += k;
  data_[size_] = '\0';
}

void InputBytes::RemovePrefix(size_t n) {
  std::memmove(data_.get(), data_.get() + n, size_ - n);
  size_ -= n;
  data_[size_] = '\0';
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  ASSIGN_OR_RETURN(const InputBytes data, ReadUpTo(path, -1));
  return std::string(data.view());
}

absl::StatusOr<InputBytes> ReadInputBytes(const std::string& path, int64_t max_bytes) {
  if (path.empty()) return absl::InvalidArgumentError("no file name given (empty path)");
  RETURN_IF_ERROR(CheckIsAFile(path));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);  // fails for pipes: checked below
  if (!ec && size > static_cast<uintmax_t>(max_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is ", size,
                                                   " bytes, over the limit of ", max_bytes,
                                                   " bytes for this kind of input"));
  }
  ASSIGN_OR_RETURN(InputBytes data, ReadUpTo(path, max_bytes));
  if (static_cast<int64_t>(data.size()) > max_bytes) {  // a pipe or a file that grew
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is over the limit of ", max_bytes,
                                                   " bytes for this kind of input"));
  }
  if (absl::StartsWith(data.view(), "\xEF\xBB\xBF")) data.RemovePrefix(3);
  if (data.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  return data;
}

absl::StatusOr<std::string> ReadInputFile(const std::string& path, int64_t max_bytes) {
  ASSIGN_OR_RETURN(const InputBytes data, ReadInputBytes(path, max_bytes));
  return std::string(data.view());
}

absl::Status WriteFile(const std::string& path, absl::string_view contents) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return ErrnoError(errno, path, "cannot write");
  const size_t written = std::fwrite(contents.data(), 1, contents.size(), file);
  const int write_error = errno;
  // fclose flushes the buffer: on a full disk it is often the first call to fail.
  const bool closed = std::fclose(file) == 0;
  const int close_error = errno;
  if (written != contents.size()) return ErrnoError(write_error, path, "write failed");
  if (!closed) return ErrnoError(close_error, path, "write failed at close");
  return absl::OkStatus();
}

absl::StatusOr<std::string> TokenFromFileContents(absl::string_view contents) {
  const absl::string_view line =
      absl::StripAsciiWhitespace(contents.substr(0, contents.find('\n')));
  if (line.empty())
    return absl::InvalidArgumentError("the first line is empty; put the token there");
  for (const char c : line) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(
          "the token holds a space, control or non-ASCII character; an HTTP header carries "
          "visible ASCII only");
    }
  }
  return std::string(line);
}

}  // namespace neupims
