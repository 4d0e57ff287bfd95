// The input of every CNN partitioner: what DONNA's profiler produces (paper 003, sec. II-A and
// Fig. 1b) for one model on one cluster. Plain data: the partitioners know nothing of graphs
// or of how a device model computed the numbers (engine/cnn/profiler builds it).
//
// Layers are the nodes of a canonical CNN graph that do work, in topological order; a pipeline
// stage is a contiguous run of them. Cutting after layer i ships every tensor still live
// across the cut (ResNet's skip connections included): `cut_bytes[i]`.
#ifndef NEUPIMS_SCHEDULER_PARTITION_PROFILE_H_
#define NEUPIMS_SCHEDULER_PARTITION_PROFILE_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace neupims::scheduler::partition {

inline constexpr double kCannotRun = std::numeric_limits<double>::infinity();

struct ProfiledLayer {
  std::string name;
  int64_t output_bytes = 0;  // l_j^out of the paper
  int64_t weight_bytes = 0;  // must fit the device's memory with the stage's other layers
};

struct ProfiledDevice {
  std::string name;  // unique in the cluster, e.g. "gpu0"
  std::string kind;  // "cpu", "gpu", "cim", "fpga", "hpim", ...
  int64_t memory_bytes = 0;
};

// A communication medium between two devices: eqs. 4-5 of paper 003.
struct LinkCost {
  std::string medium;         // "pcie5", "hb-wcc", "lb-wcc", or a custom name
  double bytes_per_s = 0;     // BW
  double joules_per_bit = 0;  // P_eff
  double latency_s = 0;       // per transfer (0 in DONNA's Table I)
  double TimeS(int64_t bytes) const { return latency_s + static_cast<double>(bytes) / bytes_per_s; }
  double EnergyJ(int64_t bytes) const { return 8.0 * static_cast<double>(bytes) * joules_per_bit; }
};

struct Profile {
  std::string model;
  std::vector<ProfiledLayer> layers;
  std::vector<ProfiledDevice> devices;
  // time_s[l][d] / energy_j[l][d]: layer l alone on device d; kCannotRun where it cannot run.
  std::vector<std::vector<double>> time_s;
  std::vector<std::vector<double>> energy_j;
  // cut_bytes[i]: bytes live across a cut after layer i (i < layers.size() - 1).
  std::vector<int64_t> cut_bytes;
  int64_t input_bytes = 0;  // the model's input
  // The device the input arrives on; the first stage must run there (DONNA sec. IV-C: "forced
  // to process at least the first layer on the edge device"). Unset: any device.
  std::optional<int> input_device;
  // link[d][e] for d != e: the medium from device d to device e.
  std::vector<std::vector<LinkCost>> link;

  // Sizes consistent, times and energies >= 0 (or kCannotRun), links positive.
  absl::Status Validate() const;
};

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_SCHEDULER_PARTITION_PROFILE_H_
