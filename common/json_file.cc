#include "common/json_file.h"

#include "absl/strings/str_cat.h"
#include "common/config_reader.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace neupims {

absl::StatusOr<nlohmann::json> ReadStrictJsonFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadInputFile(path, kMaxConfigFileBytes));
  nlohmann::ordered_json ordered;
  RETURN_IF_ERROR(ParseStrictJson(text, path, &ordered));
  return nlohmann::json(ordered);
}

absl::Status CatchJsonErrors(absl::string_view source, const std::function<absl::Status()>& walk) {
  try {
    return walk();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed: ", e.what()));
  }
}

}  // namespace neupims
