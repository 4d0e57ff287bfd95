// Hype-training (paper 004): per-operation placement of a DNN training step on a GPU plus FPGAs,
// and the runtime scheduler that keeps the system under a power cap.
//
//  - Offload filter (sec. 3.2): thresholds on the GPU's memory-bandwidth use and IPC, each the
//    largest value among the MatMul/Conv2D inputs whose FPGA kernel is no slower than the GPU.
//    An operation is a candidate when its GPU bandwidth AND its IPC are at most the thresholds
//    (the OCR of the paper's connective is garbled; docs/offload.md gives the reasons).
//  - Latency indicator, eq. 1 (sec. 3.3): picks the FPGA kernel configuration per input size.
//  - Input-size-aware kernels (sec. 3.3): one FPGA kernel per op kind and size class.
//  - Critical path (sec. 3.3) and case 1 (sec. 3.4): an op is offloaded only when it passes the
//    filter with a kernel no slower than the GPU, or lies off the critical path; when its input
//    transfer is shorter than the GPU op right before it; and when it does not lengthen the
//    step's critical path.
//  - Runtime scheduler (sec. 3.4, cases 1 and 2): event simulation; an op starts on an idle
//    device only if the system power with the op's peak power stays within the cap.
#ifndef NEUPIMS_SCHEDULER_PARTITION_HYPE_H_
#define NEUPIMS_SCHEDULER_PARTITION_HYPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/enum_names.h"

namespace neupims::scheduler::partition {

// Sec. 3.2: small below 1024 in every dimension, medium below 4096, large otherwise.
enum class InputSize { kSmall, kMedium, kLarge };
const EnumNames<InputSize>& InputSizeNames();
InputSize ClassifyInputSize(const std::vector<int64_t>& dims);

enum class HypeDevice { kGpu, kFpga };
const EnumNames<HypeDevice>& HypeDeviceNames();

// One row of the paper's Table 1: an op kind at one input size.
struct GpuOpProfile {
  double time_s = 0;
  double peak_power_w = 0;
  double avg_power_w = 0;
  double mem_bw_bytes_per_s = 0;
  double ipc = 0;
};
struct FpgaOpProfile {
  double time_s = 0;
  double peak_power_w = 0;
  double avg_power_w = 0;
};
struct HypeKindProfile {
  std::string kind;  // "MatMul", "Conv2D", ...
  InputSize size = InputSize::kSmall;
  GpuOpProfile gpu;
  std::optional<FpgaOpProfile> fpga;  // absent: no FPGA kernel for this kind and size
};

struct OffloadThresholds {
  double mem_bw_bytes_per_s = 0;
  double ipc = 0;
};

// Sec. 3.2: for each kind in `from`, the largest bandwidth and IPC among its sizes whose FPGA
// kernel is no slower than the GPU; each threshold is the maximum over the kinds.
absl::StatusOr<OffloadThresholds> DeriveOffloadThresholds(
    const std::vector<HypeKindProfile>& profiles, const std::vector<std::string>& from);
bool PassesOffloadFilter(const GpuOpProfile& gpu, const OffloadThresholds& t);

// Eq. 1 for MatMul A (M_height x M_width) x B (N_height x N_width), M_width = N_height.
struct FpgaKernelConfig {
  int cu_num = 1;
  int simd_width = 1;
  int work_group_size = 1;
  int unroll = 1;
  double fmax_hz = 0;  // from the vendor compiler for this combination
};
struct MatMulDims {
  int64_t m_height = 0;
  int64_t m_width = 0;
  int64_t n_width = 0;
};
double LatencyIndicator(const MatMulDims& dims, const FpgaKernelConfig& config);

// The configurations tried for one kernel variant (op kind x input size) at its typical input.
struct KernelVariantSpace {
  std::string kind;
  InputSize size = InputSize::kSmall;
  MatMulDims dims;
  std::vector<FpgaKernelConfig> configs;
};
struct KernelVariantChoice {
  int config = 0;  // index into KernelVariantSpace::configs with the smallest LI
  double latency_indicator = 0;
};
absl::StatusOr<KernelVariantChoice> ChooseKernelConfig(const KernelVariantSpace& space);

struct HypeOp {
  std::string name;
  std::string kind;
  InputSize size = InputSize::kSmall;  // selects the kernel variant (and the profile row)
  std::vector<int> deps;               // earlier ops whose outputs it reads
  int64_t transfer_bytes = 0;          // its inputs, moved when a producer ran on the other device
};

struct HypeSystem {
  int fpga_units = 1;      // FPGA kernels that can run at once (Table 1: one group of 3 S10s)
  double gpu_idle_w = 0;   // device power when idle
  double fpga_idle_w = 0;  // per FPGA unit
  double host_w = 0;       // the rest of the system, counted against the cap
  double gpu_link_bytes_per_s = 0;   // GPU <-> host (PCIe 3.0)
  double fpga_link_bytes_per_s = 0;  // host <-> FPGA
  // GPU -> host -> FPGA (or back): the extra data movement of sec. 3.4.
  double TransferS(int64_t bytes) const {
    return static_cast<double>(bytes) / gpu_link_bytes_per_s +
           static_cast<double>(bytes) / fpga_link_bytes_per_s;
  }
  double IdlePowerW() const { return host_w + gpu_idle_w + fpga_units * fpga_idle_w; }
};

struct HypeWorkload {
  std::string name;
  std::string source;
  HypeSystem system;
  std::vector<std::string> threshold_kinds = {"MatMul", "Conv2D"};
  std::vector<HypeKindProfile> profiles;
  std::vector<KernelVariantSpace> kernels;
  std::vector<HypeOp> ops;  // a training step's DAG in topological (issue) order

  // Every op has a profile for its kind and size; deps are earlier ops; system figures > 0.
  absl::Status Validate() const;
  const HypeKindProfile& ProfileOf(const HypeOp& op) const;  // requires Validate()
};

// A built-in "hype/<name>.json" or a path.
absl::StatusOr<HypeWorkload> LoadHypeWorkload(absl::string_view name_or_path);
std::vector<std::string> BuiltinHypeWorkloadNames();

// ---------------------------------------------------------------------------------------------
// Offline placement.

enum class PlacementReason {
  kNoFpgaKernel,          // GPU: no FPGA kernel for the op's kind and size
  kFiltered,              // GPU: fails the filter (or its kernel is slower) and is critical
  kTransferNotHidden,     // GPU: case 1, the transfer is not shorter than the preceding GPU op
  kProlongsCriticalPath,  // GPU: offloading it would lengthen the critical path
  kFilterAndFaster,       // FPGA: passes the filter with a kernel no slower than the GPU
  kOffCriticalPath,       // FPGA: off the critical path with enough slack
};
const EnumNames<PlacementReason>& PlacementReasonNames();

struct OpPlacement {
  HypeDevice device = HypeDevice::kGpu;
  PlacementReason reason = PlacementReason::kNoFpgaKernel;
  bool passes_filter = false;
  double gpu_slack_s = 0;  // total float in the all-GPU step (0 on the critical path)
};

struct HypePlan {
  OffloadThresholds thresholds;
  std::vector<KernelVariantChoice> kernel_choices;  // one per workload.kernels entry
  std::vector<OpPlacement> ops;
  double gpu_only_critical_path_s = 0;
  double critical_path_s = 0;  // with the placement (never longer than the GPU-only one)
};

absl::StatusOr<HypePlan> PlanHype(const HypeWorkload& w);

// Longest path of the DAG when op i runs on placement[i] (transfers charged to the consumer).
double CriticalPathS(const HypeWorkload& w, const std::vector<HypeDevice>& placement);

// ---------------------------------------------------------------------------------------------
// Runtime scheduling (event simulation).

struct SimulatedOp {
  HypeDevice device = HypeDevice::kGpu;
  int unit = 0;        // 0 for the GPU, the FPGA unit otherwise
  double start_s = 0;  // the input transfer, if any, starts here
  double end_s = 0;
  double power_w = 0;  // the device's power while it runs (the op's peak power there)
};
struct PowerStep {
  double t_s = 0;      // from here until the next step's t_s (or the makespan)
  double power_w = 0;  // system power
};
struct HypeSchedule {
  std::vector<SimulatedOp> ops;
  std::vector<PowerStep> power;  // piecewise-constant system power
  double makespan_s = 0;
  double peak_power_w = 0;
  double energy_j = 0;
};

// Case 1 without a cap; case 2 with one. Whenever a device idles, ready ops are taken in issue
// order: the GPU runs its own ops, and rather than idle an FPGA-placed op no free FPGA can take
// (case 1); an FPGA runs FPGA-placed ops, and under a cap also GPU ops with a kernel that the cap
// keeps off an idle GPU. An op starts only if the system power with its peak power stays within the
// cap; the GPU goes first when both idle. InvalidArgument if some op exceeds the cap even alone,
// or if the cap is NaN, infinite or negative.
absl::StatusOr<HypeSchedule> SimulateHype(const HypeWorkload& w,
                                          const std::vector<HypeDevice>& placement,
                                          std::optional<double> power_cap_w = std::nullopt);

std::vector<HypeDevice> Placement(const HypePlan& plan);

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_SCHEDULER_PARTITION_HYPE_H_
