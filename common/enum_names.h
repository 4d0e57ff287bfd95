// Names tables for option enums.
//
// Each option enum (system mode, prefill placement, channel policy, ...) has ONE table mapping
// its names to values. The CLI flags, the server's JSON config, the experiments and the engine
// all parse and print through that table, so the list of choices is written once and every
// "unknown ..." error lists it. The first entry of a value is its canonical name (printed and
// listed); later entries with the same value are aliases that Parse also accepts.
//
//   constexpr EnumName<Color> kColors[] = {{"red", Color::kRed}, {"blue", Color::kBlue}};
//   const EnumNames<Color>& ColorNames() {
//     static constexpr EnumNames<Color> kNames("color", kColors);
//     return kNames;
//   }
//   ColorNames().Parse("green")  // InvalidArgument: unknown color 'green' (choices: red, blue)
#ifndef NEUPIMS_COMMON_ENUM_NAMES_H_
#define NEUPIMS_COMMON_ENUM_NAMES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace neupims {

template <typename E>
struct EnumName {
  const char* name;
  E value;
};

template <typename E>
class EnumNames {
 public:
  // `what` names the option in errors ("system mode"); `entries` must outlive the table.
  constexpr EnumNames(const char* what, absl::Span<const EnumName<E>> entries)
      : what_(what), entries_(entries) {}

  // The value named `name` (canonical or alias); InvalidArgument listing the choices otherwise.
  absl::StatusOr<E> Parse(absl::string_view name) const {
    for (const EnumName<E>& e : entries_) {
      if (name == e.name) return e.value;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown ", what_, " '", name, "' (choices: ", absl::StrJoin(Names(), ", "), ")"));
  }

  // The canonical name of `value` ("?" only for a value outside the enum).
  const char* ToString(E value) const {
    for (const EnumName<E>& e : entries_) {
      if (e.value == value) return e.name;
    }
    return "?";
  }

  // The canonical names, in table order (aliases are accepted but not listed).
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (IsCanonical(i)) out.emplace_back(entries_[i].name);
    }
    return out;
  }

  const char* what() const { return what_; }

 private:
  bool IsCanonical(size_t i) const {
    for (size_t j = 0; j < i; ++j) {
      if (entries_[j].value == entries_[i].value) return false;
    }
    return true;
  }

  const char* what_;
  absl::Span<const EnumName<E>> entries_;
};

}  // namespace neupims

#endif  // NEUPIMS_COMMON_ENUM_NAMES_H_
