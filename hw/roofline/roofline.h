// Roofline CPU and GPU devices from datasheet figures (DONNA's CPU and GPU, paper 003 sec. III-A;
// the V100 as a data-centre GPU), as typed data loaded from configs/cpu/*.json and
// configs/gpu/*.json.
//
//   time   = overhead + max(flops / (peak * compute_eff), bytes / (bandwidth * bandwidth_eff))
//   energy = power * time                                   (power: the board's TDP / TGP)
//
// DONNA measured its CPU and GPU per layer (pyJoules, nvidia-smi); those profiles are not
// published, so the roofline stands in for them, and a measured CSV (`layer,time_s,energy_j`)
// may override it for named layers. Every figure's source is in the JSON's `sources` object and
// in docs/offload.md. hw/ knows nothing of graphs: a layer is its FLOPs and its memory bytes.
#ifndef NEUPIMS_HW_ROOFLINE_ROOFLINE_H_
#define NEUPIMS_HW_ROOFLINE_ROOFLINE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::hw::roofline {

struct RooflineSpec {
  std::string name;
  std::string kind;  // "cpu" or "gpu": the config folder it came from
  std::string description;
  double peak_flops_per_s = 0;  // at `bytes_per_element` precision (FP32)
  double compute_efficiency = 1;
  double memory_bytes_per_s = 0;  // peak DRAM bandwidth
  double bandwidth_efficiency = 1;
  double power_w = 0;               // TDP (CPU) / total graphics power (GPU)
  double per_layer_overhead_s = 0;  // kernel launch / operator dispatch
  int64_t memory_bytes = 0;         // capacity for weights and activations
  int bytes_per_element = 4;        // FP32

  double ridge_flops_per_byte() const {
    return peak_flops_per_s * compute_efficiency / (memory_bytes_per_s * bandwidth_efficiency);
  }
};

// `kind` is "cpu" or "gpu"; `name_or_path` a built-in name ("rtx3070ti") or a JSON path.
absl::StatusOr<RooflineSpec> LoadRooflineSpec(absl::string_view kind,
                                              absl::string_view name_or_path);
std::vector<std::string> BuiltinRooflineNames(absl::string_view kind);

// One layer's work: FLOPs (2 per MAC, plus element operations) and the DRAM bytes it moves
// (weights + input + output at the device's precision).
struct Work {
  double flops = 0;
  int64_t bytes = 0;
};

struct Cost {
  double time_s = 0;
  double energy_j = 0;
};

// A measured per-layer profile: layer name -> time and energy.
using MeasuredProfile = std::map<std::string, Cost, std::less<>>;

// Reads a CSV with header `layer,time_s,energy_j` (common/table_reader.h); errors name the file
// and the line (a duplicate layer, a negative or non-numeric value, a wrong header).
absl::StatusOr<MeasuredProfile> LoadMeasuredProfile(const std::string& path);

class RooflineModel {
 public:
  explicit RooflineModel(RooflineSpec spec, MeasuredProfile measured = {})
      : spec_(std::move(spec)), measured_(std::move(measured)) {}

  // The roofline cost of `work`.
  Cost Estimate(const Work& work) const;
  // The measured entry for `layer` if there is one, else Estimate(work).
  Cost CostOf(absl::string_view layer, const Work& work) const;

  const RooflineSpec& spec() const { return spec_; }

 private:
  RooflineSpec spec_;
  MeasuredProfile measured_;
};

}  // namespace neupims::hw::roofline

#endif  // NEUPIMS_HW_ROOFLINE_ROOFLINE_H_
