// Whole-file reading and writing with errors that name the path.
//
// Every place that reads or writes a whole file goes through these two functions, so a full disk,
// a missing directory or a failed close is an absl::Status naming the file, never a silently
// truncated output.
#ifndef NEUPIMS_COMMON_FILE_IO_H_
#define NEUPIMS_COMMON_FILE_IO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims {

// The bytes of the file at `path`. NotFound when it does not exist, InvalidArgument when it is
// a directory, otherwise the errno's status code; every message names the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Replaces the file at `path` with `contents` (parent directories must exist). Every write and
// the close are checked (a full disk often shows only at the close); errors name the path.
absl::Status WriteFile(const std::string& path, absl::string_view contents);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_FILE_IO_H_
