// Communication media between the devices of a cluster: DONNA's eqs. 4-5 (paper 003, sec. III-A3)
//
//   T_comm = latency + bytes / BW          E_comm = 8 * bytes * P_eff   (P_eff in J per bit)
//
// The three media of DONNA's Table I are built in (PCIe-5 64 GB/s at 6.5 pJ/bit; high-bandwidth
// wireless 1 GB/s at 0.1 uJ/bit; low-bandwidth wireless 3.5 MB/s at 50 uJ/bit; no latency); a
// cluster config may also describe its own medium. GB and MB are decimal (1e9, 1e6 bytes).
#ifndef NEUPIMS_HW_LINK_LINK_H_
#define NEUPIMS_HW_LINK_LINK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::hw::link {

struct Link {
  std::string medium;         // "pcie5", "hb-wcc", "lb-wcc" or a custom name
  double bytes_per_s = 0;     // BW
  double joules_per_bit = 0;  // P_eff
  double latency_s = 0;       // per transfer

  double TimeS(int64_t bytes) const { return latency_s + static_cast<double>(bytes) / bytes_per_s; }
  double EnergyJ(int64_t bytes) const { return 8.0 * static_cast<double>(bytes) * joules_per_bit; }
};

// DONNA Table I by name; NotFound listing the names otherwise.
absl::StatusOr<Link> BuiltinMedium(absl::string_view name);
std::vector<std::string> BuiltinMediumNames();

// InvalidArgument naming `what` unless bandwidth > 0, energy >= 0 and latency >= 0.
absl::Status ValidateLink(const Link& link, absl::string_view what);

}  // namespace neupims::hw::link

#endif  // NEUPIMS_HW_LINK_LINK_H_
