// JSON files a tool walks itself (sweep specs, shard files) rather than through ConfigDocument:
// read and parsed by the same rules as every config (ReadInputFile's checks and size cap,
// ParseStrictJson), and walked without letting nlohmann's exceptions escape.
//
//   ASSIGN_OR_RETURN(nlohmann::json j, ReadStrictJsonFile(path));
//   RETURN_IF_ERROR(CatchJsonErrors(path, [&] { return Walk(j.at("points")); }));
#ifndef NEUPIMS_COMMON_JSON_FILE_H_
#define NEUPIMS_COMMON_JSON_FILE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace neupims {

// ReadInputFile (the config size cap) + ParseStrictJson: a duplicate key, a number out of range
// or a syntax error is InvalidArgument naming the file.
absl::StatusOr<nlohmann::json> ReadStrictJsonFile(const std::string& path);

// Runs `walk`, which reads a parsed document with nlohmann's throwing accessors (at(), get<>()),
// and turns a type or missing-key exception into InvalidArgument "<source>: malformed: ...".
absl::Status CatchJsonErrors(absl::string_view source, const std::function<absl::Status()>& walk);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_JSON_FILE_H_
