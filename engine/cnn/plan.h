// The partition policies of a CNN over a cluster, shared by `neupims cnn plan` and the server's
// CNN models (one names table, one Solve): DONNA as published, DONNA exact (Pareto labels), or
// one device kind only (e.g. fpga-only: DONNA over the cluster's FPGAs alone), or hype (Hype's
// per-layer GPU + FPGA placement, engine/cnn/hype_plan.h; its plans may revisit a device).
#ifndef NEUPIMS_ENGINE_CNN_PLAN_H_
#define NEUPIMS_ENGINE_CNN_PLAN_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/enum_names.h"
#include "scheduler/partition/donna.h"
#include "scheduler/partition/profile.h"

namespace neupims::engine::cnn {

enum class PlanPolicy {
  kDonna,
  kDonnaExact,
  kCpuOnly,
  kGpuOnly,
  kCimOnly,
  kFpgaOnly,
  kHpimOnly,
  kHype
};
// "donna", "donna-exact", "cpu-only", "gpu-only", "cim-only", "fpga-only", "hpim-only", "hype".
const EnumNames<PlanPolicy>& PlanPolicyNames();

// The device kind a single-kind policy keeps ("fpga" for fpga-only); nullopt for DONNA.
std::optional<std::string> OnlyKind(PlanPolicy policy);

// `profile` restricted to its devices of `kind` (a copy with those columns only).
// InvalidArgument if the cluster has none, FailedPrecondition naming the layers none of them runs.
absl::StatusOr<scheduler::partition::Profile> OnlyDevicesOfKind(
    const scheduler::partition::Profile& profile, const std::string& kind);

// The plan of `policy` at `alpha` (eq. 1), with device indices of `profile`. Only kHype plans
// may put two stages on one device (DeviceReuse::kShared).
absl::StatusOr<scheduler::partition::Plan> SolvePlan(const scheduler::partition::Profile& profile,
                                                     PlanPolicy policy, double alpha);

// "cim0:conv1-fc6,fpga0:fc7-fc8": each stage's device and its first and last layer names.
std::string PartitionString(const scheduler::partition::Profile& profile,
                            const scheduler::partition::Plan& plan);

}  // namespace neupims::engine::cnn

#endif  // NEUPIMS_ENGINE_CNN_PLAN_H_
