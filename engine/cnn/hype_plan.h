// The `hype` partition policy: Hype-training's per-operation GPU + FPGA placement (paper 004,
// scheduler/partition/hype.h) applied to a CNN's Profile, and the placement expressed as a Plan the
// pipeline serves.
//
// Inputs derived from the Profile (docs/offload.md, "The hype policy"):
//  - the devices: the cluster's first GPU and first FPGA (in cluster order); the others are unused.
//  - ops: one per profiled layer, in order, each depending on the previous one (the Profile is a
//    chain of layers; the pipeline runs them in that order). An op's transfer is the cut before it
//    (cut_bytes[l-1]: every tensor live there, skips included); the first op reads the input,
//    which arrives where it runs.
//  - profiles: one per op (its kind is its layer name, size kSmall): GPU and FPGA time from the
//    Profile, power = energy / time (peak = average: one figure per layer), GPU memory bandwidth
//    = (input + weight + output bytes) / GPU time. A layer the FPGA cannot run has no FPGA kernel.
//    IPC is not modelled by the roofline, so every op's IPC is 0 and the filter is decided by
//    bandwidth alone.
//  - thresholds: from every op whose FPGA time is no longer than its GPU time (sec. 3.2 derives
//    them from the op kinds the FPGA serves well; in a CNN those are its layers); none: nothing
//    passes the filter.
//  - system: one FPGA unit, idle and host powers 0 (the Profile prices active energy only), and
//    both links at twice the GPU -> FPGA link bandwidth, so HypeSystem::TransferS(bytes) is that
//    link's bytes / bandwidth (its fixed latency is left out of the placement, not of the Plan).
//  - no kernel variant spaces: the FPGA times already come from the DNNVM compiler model.
//  - no power cap: the cap belongs to Hype's runtime scheduler of a training step
//    (`neupims cnn hype --power-cap-w`); the served pipeline has no power model to cap.
//
// The placement becomes stages: consecutive layers on one device form a stage, so a device may
// host several stages (gpu, fpga, gpu); the Plan is priced with DeviceReuse::kShared.
#ifndef NEUPIMS_ENGINE_CNN_HYPE_PLAN_H_
#define NEUPIMS_ENGINE_CNN_HYPE_PLAN_H_

#include "absl/status/statusor.h"
#include "scheduler/partition/donna.h"
#include "scheduler/partition/hype.h"
#include "scheduler/partition/profile.h"

namespace neupims::engine::cnn {

// The GPU and FPGA the hype policy uses (indices into profile.devices).
struct HypeDevices {
  int gpu = -1;
  int fpga = -1;
};

// InvalidArgument naming the policy and the missing kind(s), or an input device that is neither.
absl::StatusOr<HypeDevices> FindHypeDevices(const scheduler::partition::Profile& profile);

// The Hype inputs of `profile` on `devices` (header comment). FailedPrecondition naming a layer
// the GPU cannot run.
absl::StatusOr<scheduler::partition::HypeWorkload> HypeWorkloadFromProfile(
    const scheduler::partition::Profile& profile, const HypeDevices& devices);

// Runs the placement and prices it as stages (C of eq. 1 at `alpha`, for comparison only).
absl::StatusOr<scheduler::partition::Plan> SolveHypePlan(
    const scheduler::partition::Profile& profile, double alpha);

}  // namespace neupims::engine::cnn

#endif  // NEUPIMS_ENGINE_CNN_HYPE_PLAN_H_
