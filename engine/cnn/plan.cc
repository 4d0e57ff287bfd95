#include "engine/cnn/plan.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/cnn/hype_plan.h"

namespace neupims::engine::cnn {
namespace {

using scheduler::partition::Plan;
using scheduler::partition::Profile;

constexpr EnumName<PlanPolicy> kPolicies[] = {
    {"donna", PlanPolicy::kDonna},        {"donna-exact", PlanPolicy::kDonnaExact},
    {"cpu-only", PlanPolicy::kCpuOnly},   {"gpu-only", PlanPolicy::kGpuOnly},
    {"cim-only", PlanPolicy::kCimOnly},   {"fpga-only", PlanPolicy::kFpgaOnly},
    {"hpim-only", PlanPolicy::kHpimOnly}, {"hype", PlanPolicy::kHype}};

std::vector<int> DevicesOfKind(const Profile& p, const std::string& kind) {
  std::vector<int> keep;
  for (size_t d = 0; d < p.devices.size(); ++d) {
    if (p.devices[d].kind == kind) keep.push_back(static_cast<int>(d));
  }
  return keep;
}

}  // namespace

const EnumNames<PlanPolicy>& PlanPolicyNames() {
  static constexpr EnumNames<PlanPolicy> kNames("partition policy", kPolicies);
  return kNames;
}

std::optional<std::string> OnlyKind(PlanPolicy p) {
  switch (p) {
    case PlanPolicy::kCpuOnly:
      return "cpu";
    case PlanPolicy::kGpuOnly:
      return "gpu";
    case PlanPolicy::kCimOnly:
      return "cim";
    case PlanPolicy::kFpgaOnly:
      return "fpga";
    case PlanPolicy::kHpimOnly:
      return "hpim";
    default:
      return std::nullopt;
  }
}

absl::StatusOr<Profile> OnlyDevicesOfKind(const Profile& p, const std::string& kind) {
  const std::vector<int> keep = DevicesOfKind(p, kind);
  if (keep.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition policy ", kind, "-only: the cluster has no ", kind, " device"));
  }
  Profile q = p;
  q.devices.clear();
  for (int d : keep) q.devices.push_back(p.devices[d]);
  for (size_t l = 0; l < p.layers.size(); ++l) {
    q.time_s[l].clear();
    q.energy_j[l].clear();
    for (int d : keep) {
      q.time_s[l].push_back(p.time_s[l][d]);
      q.energy_j[l].push_back(p.energy_j[l][d]);
    }
  }
  std::vector<std::string> stuck;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    bool runs = false;
    for (double t : q.time_s[l]) runs |= t != scheduler::partition::kCannotRun;
    if (!runs) stuck.push_back(p.layers[l].name);
  }
  if (!stuck.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "partition policy ", kind, "-only: no ", kind, " device runs ", absl::StrJoin(stuck, ", "),
        kind == "fpga" ? " (DNNVM runs no fully-connected, LRN or Softmax layer, sec. 6.1)" : ""));
  }
  // The input's device is in the cluster's numbering; among one kind it may not exist.
  q.input_device.reset();
  if (p.input_device.has_value()) {
    for (size_t a = 0; a < keep.size(); ++a) {
      if (keep[a] == *p.input_device) q.input_device = static_cast<int>(a);
    }
  }
  q.link.assign(keep.size(), {});
  for (size_t a = 0; a < keep.size(); ++a) {
    for (int b : keep) q.link[a].push_back(p.link[keep[a]][b]);
  }
  return q;
}

absl::StatusOr<Plan> SolvePlan(const Profile& p, PlanPolicy policy, double alpha) {
  if (policy == PlanPolicy::kHype) return SolveHypePlan(p, alpha);
  if (std::optional<std::string> kind = OnlyKind(policy)) {
    ASSIGN_OR_RETURN(Profile q, OnlyDevicesOfKind(p, *kind));
    ASSIGN_OR_RETURN(Plan plan, scheduler::partition::DonnaExact(q, alpha));
    // Back to the cluster's device indices.
    const std::vector<int> index = DevicesOfKind(p, *kind);
    for (auto& s : plan.stages) s.device = index[s.device];
    return scheduler::partition::PricePlan(p, plan.stages, alpha);
  }
  return policy == PlanPolicy::kDonnaExact ? scheduler::partition::DonnaExact(p, alpha)
                                           : scheduler::partition::DonnaPublished(p, alpha);
}

std::string PartitionString(const Profile& p, const Plan& plan) {
  std::vector<std::string> parts;
  for (const auto& s : plan.stages) {
    parts.push_back(absl::StrCat(p.devices[s.device].name, ":", p.layers[s.first_layer].name, "-",
                                 p.layers[s.last_layer].name));
  }
  return absl::StrJoin(parts, ",");
}

}  // namespace neupims::engine::cnn
