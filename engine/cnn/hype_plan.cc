#include "engine/cnn/hype_plan.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace neupims::engine::cnn {
namespace {

namespace part = scheduler::partition;

int FirstOfKind(const part::Profile& p, const std::string& kind) {
  for (size_t d = 0; d < p.devices.size(); ++d) {
    if (p.devices[d].kind == kind) return static_cast<int>(d);
  }
  return -1;
}

// The bytes layer l reads: the cut before it, or the model's input for the first layer.
int64_t InputBytes(const part::Profile& p, size_t l) {
  return l == 0 ? p.input_bytes : p.cut_bytes[l - 1];
}

part::HypeKindProfile LayerProfile(const part::Profile& p, const HypeDevices& d, size_t l) {
  const part::ProfiledLayer& layer = p.layers[l];
  part::HypeKindProfile k{.kind = layer.name, .size = part::InputSize::kSmall};
  const double gpu_s = p.time_s[l][d.gpu];
  const double gpu_w = gpu_s > 0 ? p.energy_j[l][d.gpu] / gpu_s : 0;
  const int64_t bytes = InputBytes(p, l) + layer.weight_bytes + layer.output_bytes;
  k.gpu = {.time_s = gpu_s,
           .peak_power_w = gpu_w,
           .avg_power_w = gpu_w,
           .mem_bw_bytes_per_s = gpu_s > 0 ? static_cast<double>(bytes) / gpu_s : 0,
           .ipc = 0};
  const double fpga_s = p.time_s[l][d.fpga];
  if (std::isfinite(fpga_s) && std::isfinite(p.energy_j[l][d.fpga])) {
    const double fpga_w = fpga_s > 0 ? p.energy_j[l][d.fpga] / fpga_s : 0;
    k.fpga = part::FpgaOpProfile{.time_s = fpga_s, .peak_power_w = fpga_w, .avg_power_w = fpga_w};
  }
  return k;
}

// Consecutive layers on one device form a stage.
std::vector<part::Stage> StagesOf(const std::vector<part::HypeDevice>& placement,
                                  const HypeDevices& d) {
  std::vector<part::Stage> stages;
  for (size_t l = 0; l < placement.size(); ++l) {
    const int device = placement[l] == part::HypeDevice::kGpu ? d.gpu : d.fpga;
    if (stages.empty() || stages.back().device != device) {
      stages.push_back({.device = device, .first_layer = static_cast<int>(l)});
    }
    stages.back().last_layer = static_cast<int>(l);
  }
  return stages;
}

}  // namespace

absl::StatusOr<HypeDevices> FindHypeDevices(const part::Profile& p) {
  const HypeDevices d{.gpu = FirstOfKind(p, "gpu"), .fpga = FirstOfKind(p, "fpga")};
  std::vector<std::string> missing;
  if (d.gpu < 0) missing.push_back("gpu");
  if (d.fpga < 0) missing.push_back("fpga");
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition policy hype: the cluster has no ", absl::StrJoin(missing, " and no "),
        " device (hype places each layer on a GPU or an FPGA)"));
  }
  if (p.input_device && *p.input_device != d.gpu && *p.input_device != d.fpga) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition policy hype: the input arrives on ", p.devices[*p.input_device].name,
        ", which is neither ", p.devices[d.gpu].name, " nor ", p.devices[d.fpga].name));
  }
  return d;
}

absl::StatusOr<part::HypeWorkload> HypeWorkloadFromProfile(const part::Profile& p,
                                                           const HypeDevices& d) {
  RETURN_IF_ERROR(p.Validate());
  part::HypeWorkload w{.name = p.model, .source = "engine::cnn::HypeWorkloadFromProfile"};
  // TransferS adds the two legs; each at twice the link's bandwidth makes it bytes / bandwidth.
  const double link = p.link[d.gpu][d.fpga].bytes_per_s;
  w.system = {.fpga_units = 1, .gpu_link_bytes_per_s = 2 * link, .fpga_link_bytes_per_s = 2 * link};
  w.threshold_kinds.clear();
  for (size_t l = 0; l < p.layers.size(); ++l) {
    if (!std::isfinite(p.time_s[l][d.gpu]) || !std::isfinite(p.energy_j[l][d.gpu])) {
      return absl::FailedPreconditionError(
          absl::StrCat("partition policy hype: ", p.devices[d.gpu].name, " cannot run layer ",
                       p.layers[l].name, " (hype keeps on the GPU what the FPGA does not take)"));
    }
    part::HypeKindProfile k = LayerProfile(p, d, l);
    if (k.fpga && k.fpga->time_s <= k.gpu.time_s) w.threshold_kinds.push_back(k.kind);
    w.profiles.push_back(std::move(k));
    part::HypeOp op{.name = p.layers[l].name, .kind = p.layers[l].name};
    if (l > 0) {
      op.deps = {static_cast<int>(l) - 1};
      op.transfer_bytes = InputBytes(p, l);
    }
    w.ops.push_back(std::move(op));
  }
  return w;
}

absl::StatusOr<part::Plan> SolveHypePlan(const part::Profile& p, double alpha) {
  ASSIGN_OR_RETURN(HypeDevices d, FindHypeDevices(p));
  ASSIGN_OR_RETURN(part::HypeWorkload w, HypeWorkloadFromProfile(p, d));
  ASSIGN_OR_RETURN(part::HypePlan hype, part::PlanHype(w));
  std::vector<part::Stage> stages = StagesOf(part::Placement(hype), d);
  // The input arrives on the FPGA but Hype starts on the GPU: the first stage must move there.
  if (p.input_device && stages.front().device != *p.input_device) {
    return absl::FailedPreconditionError(absl::StrCat(
        "partition policy hype: the input arrives on ", p.devices[*p.input_device].name,
        " but the placement starts on ", p.devices[stages.front().device].name));
  }
  return part::PricePlan(p, stages, alpha, part::DeviceReuse::kShared);
}

}  // namespace neupims::engine::cnn
