#include "hw/link/link.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace neupims::hw::link {
namespace {

// DONNA Table I (paper 003): bandwidth [15]/[17]/[18], energy efficiency [16]/[18].
const std::vector<Link>& Table() {
  static const std::vector<Link> kTable = {
      {.medium = "pcie5", .bytes_per_s = 64e9, .joules_per_bit = 6.5e-12},
      {.medium = "hb-wcc", .bytes_per_s = 1e9, .joules_per_bit = 0.1e-6},
      {.medium = "lb-wcc", .bytes_per_s = 3.5e6, .joules_per_bit = 50e-6},
  };
  return kTable;
}

}  // namespace

absl::StatusOr<Link> BuiltinMedium(absl::string_view name) {
  for (const Link& l : Table()) {
    if (l.medium == name) return l;
  }
  return absl::NotFoundError(absl::StrCat("unknown medium '", name, "' (built-in media: ",
                                          absl::StrJoin(BuiltinMediumNames(), ", "), ")"));
}

std::vector<std::string> BuiltinMediumNames() {
  std::vector<std::string> names;
  for (const Link& l : Table()) names.push_back(l.medium);
  return names;
}

absl::Status ValidateLink(const Link& link, absl::string_view what) {
  if (!(link.bytes_per_s > 0) || !std::isfinite(link.bytes_per_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": bandwidth must be > 0, got ", link.bytes_per_s, " bytes/s"));
  }
  if (!(link.joules_per_bit >= 0) || !std::isfinite(link.joules_per_bit)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": energy per bit must be >= 0, got ", link.joules_per_bit));
  }
  if (!(link.latency_s >= 0) || !std::isfinite(link.latency_s)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": latency must be >= 0, got ", link.latency_s));
  }
  return absl::OkStatus();
}

}  // namespace neupims::hw::link
