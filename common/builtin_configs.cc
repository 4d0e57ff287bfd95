#include "common/builtin_configs.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/builtin_configs_data.h"

namespace neupims {

std::optional<absl::string_view> BuiltinConfigText(absl::string_view relative_path) {
  for (const auto& entry : internal::kBuiltinConfigs) {
    if (entry.path == relative_path) return entry.text;
  }
  return std::nullopt;
}

std::vector<std::string> BuiltinConfigNames(absl::string_view kind) {
  std::vector<std::string> names;
  const std::string prefix = absl::StrCat(kind, "/");
  for (const auto& entry : internal::kBuiltinConfigs) {
    absl::string_view p = entry.path;
    if (absl::StartsWith(p, prefix) && absl::EndsWith(p, ".json")) {
      p.remove_prefix(prefix.size());
      p.remove_suffix(5);
      if (p.find('/') == absl::string_view::npos) names.emplace_back(p);
    }
  }
  return names;
}

absl::StatusOr<std::unique_ptr<ConfigDocument>> OpenConfig(absl::string_view kind,
                                                           absl::string_view name_or_path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::string(name_or_path), ec)) {
    return ConfigDocument::FromFile(std::string(name_or_path));
  }
  const std::string builtin = absl::StrCat(kind, "/", name_or_path, ".json");
  if (auto text = BuiltinConfigText(builtin)) {
    return ConfigDocument::FromString(*text, absl::StrCat("configs/", builtin));
  }
  return absl::NotFoundError(absl::StrCat("no ", kind, " config '", name_or_path,
                                          "': not a file and not a built-in (built-ins: ",
                                          absl::StrJoin(BuiltinConfigNames(kind), ", "), ")"));
}

}  // namespace neupims
