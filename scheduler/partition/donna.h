// DONNA (paper 003, sec. II-B, Algorithm 1): split a CNN into pipeline stages, one contiguous run
// of layers per device, each device hosting at most one stage, minimising
//
//   C = alpha * T_norm + (1 - alpha) * E_norm                                    (eq. 1)
//   T = max over stages of max(compute time, time to ship the cut to the next)   (eq. 2)
//   E = sum of compute energies + sum of the cuts' transfer energies             (eq. 3)
//   transfer time = latency + bytes / BW, energy = 8 bytes x J/bit               (eqs. 4-5)
//
// Normalisation (the paper's "relative to its maximal value derived from the collective
// computation and communication operations of all device types", sec. II-B): T_norm = T / T_max
// and E_norm = E / E_max, where T_max (E_max) is the largest time (energy) of any single layer
// on any device that can run it or of any single cut on any link. One pair of constants per
// problem, so the objective stays a fixed weighting of seconds and joules.
//
// Three solvers over the same Profile:
//  - DonnaPublished: the dynamic programme as published, one label (T, E) per state
//    (layers done, devices used, next device), the one of least C. That is exact when C is
//    monotone in one label, i.e. alpha in {0, 1}; for 0 < alpha < 1 a label discarded early
//    (larger C now) can end cheaper, because the max() in T absorbs later stages. It returns the
//    plain sweep's plan: between 0 and 1 it prunes only labels whose own C plus the least energy
//    of the layers left exceeds a plan's, which changes no label the plain sweep's plan depends
//    on (donna.cc, Pruning::kOwnCost); at 0 and 1 it prunes like DonnaExact.
//  - DonnaExact: the same recursion keeping every label no other beats (in E and C): exact for
//    every alpha. It prunes with lower bounds on the layers left (donna_bounds.h) against the
//    best complete plan found so far, starting from the published plan's cost.
//  - BruteForcePartition: every ordered choice of distinct devices and cut points; the oracle.
// A stage's weights must fit its device's memory.
#ifndef NEUPIMS_SCHEDULER_PARTITION_DONNA_H_
#define NEUPIMS_SCHEDULER_PARTITION_DONNA_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/partition/profile.h"

namespace neupims::scheduler::partition {

// One pipeline stage: layers [first_layer, last_layer] on `device`, then the cut shipped to the
// next stage's device (nothing after the last stage).
struct Stage {
  int device = 0;
  int first_layer = 0;
  int last_layer = 0;
  double compute_s = 0;
  double compute_energy_j = 0;
  double transfer_s = 0;  // to the next stage
  double transfer_energy_j = 0;
  int64_t transfer_bytes = 0;
  double time_s() const { return compute_s > transfer_s ? compute_s : transfer_s; }
};

// A partition: what the serving path executes (stages on devices, transfers on links).
struct Plan {
  std::vector<Stage> stages;
  double bottleneck_s = 0;  // T: the slowest stage, compute or transfer
  double energy_j = 0;      // E: per inference
  double objective = 0;     // C of eq. 1 at the alpha it was solved for
  double throughput_per_s() const { return bottleneck_s > 0 ? 1.0 / bottleneck_s : 0; }
};

// T_max and E_max of the normalisation (header comment).
struct Normalisation {
  double time_s = 1;
  double energy_j = 1;
};
Normalisation NormalisationOf(const Profile& profile);

// Whether a device may host more than one stage. DONNA's plans never do (kDistinct). A
// per-operation placement (Hype) may come back to a device (gpu, fpga, gpu): kShared lets it,
// provided consecutive stages differ (else they are one stage), and prices T as the busiest
// resource: the sum of a device's stages' compute, or of a directed link's transfers, per image,
// since one device (link) serves all its stages of every image in turn. With distinct devices
// both rules give the same T.
enum class DeviceReuse { kDistinct, kShared };

// Prices a plan given as (device, last layer) per stage: fills the stages' times and energies,
// T, E and C at `alpha`. InvalidArgument if the stages do not cover the layers in order, a device
// hosts two stages (kDistinct) or two consecutive ones (kShared), a layer cannot run on its
// device or a device's weights (over all its stages) do not fit.
absl::StatusOr<Plan> PricePlan(const Profile& profile, const std::vector<Stage>& stages,
                               double alpha, DeviceReuse reuse = DeviceReuse::kDistinct);

absl::StatusOr<Plan> DonnaPublished(const Profile& profile, double alpha);
absl::StatusOr<Plan> DonnaExact(const Profile& profile, double alpha);
absl::StatusOr<Plan> BruteForcePartition(const Profile& profile, double alpha);
// Every plan the profile allows (distinct devices in order, every set of cut points, the first
// stage on the input's device if set), priced at `alpha`: the oracle's enumeration, exponential
// in the layers and devices (tests).
void ForEachPlan(const Profile& profile, double alpha,
                 const std::function<void(const Plan&)>& visit);

// The Pareto front over all plans (DonnaExact without the alpha bound), on the priced figures
// (throughput_per_s(), energy_j): every plan no other plan matches or beats on both and beats on
// one, figures within 1e-12 of the axis' largest counting as equal (energy sums round a few ulps
// apart); of plans that tie on both, one. By increasing T.
absl::StatusOr<std::vector<Plan>> ParetoFront(const Profile& profile);

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_SCHEDULER_PARTITION_DONNA_H_
