// CLI flags bound to option enums through their names tables (common/enum_names.h): CLI11
// checks the spelling against the table's names, the table parses it, and the help shows the
// table's name of the default.
#ifndef NEUPIMS_TOOLS_NEUPIMS_ENUM_FLAG_H_
#define NEUPIMS_TOOLS_NEUPIMS_ENUM_FLAG_H_

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/enum_names.h"

namespace neupims::cli {

// The table's value for `name`; a name the table rejects is a CLI validation error.
template <typename E>
E ParseFlag(const std::string& flag, const EnumNames<E>& names, const std::string& name) {
  absl::StatusOr<E> v = names.Parse(name);
  if (!v.ok()) throw CLI::ValidationError(flag, std::string(v.status().message()));
  return *v;
}

template <typename E>
CLI::Option* AddEnumFlag(CLI::App* cmd, const std::string& flag, const EnumNames<E>& names,
                         E* value, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          flag, [flag, &names, value](const std::string& s) { *value = ParseFlag(flag, names, s); },
          help)
      ->check(CLI::IsMember(names.Names()))
      ->default_str(names.ToString(*value));
}

// As AddEnumFlag for an option that may stay unset: `unset_name` (if not empty) is one more
// accepted spelling that leaves `value` unset ("auto": the system mode's choice).
template <typename E>
CLI::Option* AddOptionalEnumFlag(CLI::App* cmd, const std::string& flag, const EnumNames<E>& names,
                                 std::optional<E>* value, const std::string& unset_name,
                                 const std::string& help) {
  std::vector<std::string> choices = names.Names();
  if (!unset_name.empty()) choices.push_back(unset_name);
  CLI::Option* opt = cmd->add_option_function<std::string>(
      flag,
      [flag, &names, value, unset_name](const std::string& s) {
        if (!unset_name.empty() && s == unset_name) {
          value->reset();
        } else {
          *value = ParseFlag(flag, names, s);
        }
      },
      help);
  opt->check(CLI::IsMember(choices));
  if (!unset_name.empty()) {
    opt->default_str(value->has_value() ? names.ToString(**value) : unset_name);
  }
  return opt;
}

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_ENUM_FLAG_H_
