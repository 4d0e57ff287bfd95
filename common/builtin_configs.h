// The configuration files under configs/ compiled into the binaries, so every tool runs on the
// built-in defaults from any working directory (and inside containers).
//
// OpenConfig(kind, name_or_path): a value containing '/' or ending in ".json" is a file path;
// anything else is a built-in name "<kind>/<name>.json". Errors name what was tried and list the
// built-in choices.
#ifndef NEUPIMS_COMMON_BUILTIN_CONFIGS_H_
#define NEUPIMS_COMMON_BUILTIN_CONFIGS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config_reader.h"

namespace neupims {

// Text of the built-in config "kind/name.json" (e.g. "devices/neupims.json"), if any.
std::optional<absl::string_view> BuiltinConfigText(absl::string_view relative_path);

// Names (without ".json") of the built-in configs of one kind, e.g. kind = "devices".
std::vector<std::string> BuiltinConfigNames(absl::string_view kind);

absl::StatusOr<std::unique_ptr<ConfigDocument>> OpenConfig(absl::string_view kind,
                                                           absl::string_view name_or_path);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_BUILTIN_CONFIGS_H_
