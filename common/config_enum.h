// Config fields holding one of an option enum's names (common/enum_names.h), read through the
// enum's one names table: a bad name is an error naming the file and the field and listing the
// choices, so the device configs, the server config and the CLI share every list of choices.
#ifndef NEUPIMS_COMMON_CONFIG_ENUM_H_
#define NEUPIMS_COMMON_CONFIG_ENUM_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config_reader.h"
#include "common/enum_names.h"

namespace neupims {

// An optional field: absent leaves `*value` (the default) unchanged.
template <typename E>
void ReadEnum(ConfigObject& obj, absl::string_view key, const EnumNames<E>& names, E* value) {
  const std::string name = obj.OptionalEnum(key, names.ToString(*value), names.Names());
  absl::StatusOr<E> parsed = names.Parse(name);
  if (!parsed.ok()) {
    obj.Error(key, parsed.status().message());
    return;
  }
  *value = *parsed;
}

// As ReadEnum for an option whose absence means "not set" (e.g. the system mode's choice).
template <typename E>
void ReadOptionalEnum(ConfigObject& obj, absl::string_view key, const EnumNames<E>& names,
                      std::optional<E>* value) {
  if (!obj.Has(key)) return;
  E v = value->value_or(E{});
  ReadEnum(obj, key, names, &v);
  *value = v;
}

}  // namespace neupims

#endif  // NEUPIMS_COMMON_CONFIG_ENUM_H_
