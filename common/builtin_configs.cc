#include "common/builtin_configs.h"

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
  // A path has a '/' or a ".json" suffix; a bare name is a built-in, so a file that happens to
  // share its name in the working directory (the `neupims` binary itself) never shadows it.
  const bool looks_like_path =
      absl::StrContains(name_or_path, '/') || absl::EndsWith(name_or_path, ".json");
  if (looks_like_path) return ConfigDocument::FromFile(std::string(name_or_path));
  const std::string builtin = absl::StrCat(kind, "/", name_or_path, ".json");
  if (auto text = BuiltinConfigText(builtin)) {
    return ConfigDocument::FromString(*text, absl::StrCat("configs/", builtin));
  }
  return absl::NotFoundError(absl::StrCat("no built-in ", kind, " config '", name_or_path,
                                          "' (give a file path ending in .json, or a built-in: ",
                                          absl::StrJoin(BuiltinConfigNames(kind), ", "), ")"));
}

}  // namespace neupims
