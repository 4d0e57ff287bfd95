// NPU parameters as typed data (the "npu" object of a device config).
//
// NeuPIMs Table 2: 8 systolic arrays of 128x128 and 8 vector units of 128 lanes at 1 GHz,
// FP16. The NPU reads weights and activations from the device's HBM; its peak bandwidth in
// bytes per NPU cycle is derived from the "hbm" object when the device config is loaded.
#ifndef NEUPIMS_HW_NPU_NPU_SPEC_H_
#define NEUPIMS_HW_NPU_NPU_SPEC_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/config_reader.h"
#include "common/enum_names.h"
#include "common/units.h"

namespace neupims::hw {

// Element-wise and row-wise operations of the vector units.
enum class VectorOp : uint8_t {
  kSoftmax,    // row-wise: max, subtract + exp, sum, scale
  kLayerNorm,  // row-wise: mean, variance, normalise + affine
  kGelu,       // element-wise (tanh approximation)
  kAdd,        // element-wise residual add
  kReduce,     // element-wise sum of two partial results (all-reduce staging, partial GEMVs)
};
inline constexpr int kNumVectorOps = 5;
// The names table of the vector ops: "softmax", "layernorm", "gelu", "add", "reduce" (also the
// keys of `npu.vector_ops` in the device JSON and the CLI's `hw vector --op`).
const EnumNames<VectorOp>& VectorOpNames();
inline const char* VectorOpName(VectorOp op) { return VectorOpNames().ToString(op); }

// Cost of one vector op: `passes` element-wise sweeps over the row plus `reductions` tree
// reductions across it (each reduction: ceil(cols / lanes) partial sums then log2(lanes) steps).
struct VectorOpCost {
  int passes = 1;
  int reductions = 0;
};

struct NpuEnergy {
  double mac_pj = 0.3;                      // one FP16 multiply-accumulate in a systolic PE
  double sram_pj_per_byte = 0.5;            // scratchpad read or write
  double vector_pj_per_element_pass = 0.4;  // one lane operation on one element
  double static_power_w = 5.0;              // leakage + clock of the whole NPU while powered
};

// How a GEMM's cycles are derived (docs/hw.md, "NPU GEMM timing").
//   kWeightStationary - the default: weight tiles double-buffered against streaming activations
//                       (npu_model.h).
//   kBlockPipeline    - the reference NeuPIMs simulator's (ONNXim) cost: activation-stationary,
//                       weights streamed once per op, the batch cut in blocks of array_rows rows
//                       (the outermost loop); one block's pass is kb (array_rows + s (mb - 1))
//                       cycles (kb = K tiles, mb = N tiles, s = array_rows / systolic_arrays rows
//                       streamed per cycle), and an op takes
//                       max(in bytes / BW, pass) + (blocks - 1) pass + out bytes / BW
//                       with BW the HBM bandwidth less refresh.
enum class GemmTiming { kWeightStationary, kBlockPipeline };

// Where activations live between operations (docs/hw.md, "Activation traffic").
//   kOnChip        - the default: in the scratchpad; a vector op is fused with the GEMM that
//                    produced its rows and costs lane passes; no HBM traffic besides weights.
//   kDramRoundTrip - the reference simulator's: every op reads its inputs from and writes its
//                    output to HBM. A GEMM streams X in and Y out (GemmShape::
//                    activations_from_hbm); a vector op is one instruction per row with unlimited
//                    concurrency, so it costs only that traffic at the HBM bandwidth less
//                    refresh (a 4096-element FP16 row: 16 KB for layernorm or GELU, 24 KB for a
//                    residual add).
enum class ActivationTraffic { kOnChip, kDramRoundTrip };

// Whether the NPU's systolic arrays and vector units run operations at the same time
// (docs/hw.md, "Operation overlap").
//   kConcurrentUnits - the default: two lanes; a vector op of one sub-batch (or the softmax
//                      beside PIM attention) runs while the arrays compute.
//   kSerial          - the reference simulator's: the NPU runs one operation at a time; loads,
//                      compute and stores overlap only inside an operation.
enum class OpOverlap { kConcurrentUnits, kSerial };

// How attention runs on an NPU without PIM (docs/hw.md, "NPU-only attention").
//   kBandwidthBound - the default: each sub-batch's keys, then values, stream through the arrays
//                     as one GEMV-shaped GEMM each, bound by the HBM bandwidth.
//   kSerialGemv     - the reference simulator's: one request and one head at a time; q K^T is one
//                     M = 1 preload of floor(s / arrays) rows, p V is ceil((s + R - 1) / R)
//                     preloads of R / arrays rows, every preload serialised behind the previous
//                     one (SerialGemvHeadCycles in npu_model.h).
enum class AttentionMapping { kBandwidthBound, kSerialGemv };

struct NpuSpec {
  double frequency_mhz = 1000;
  int systolic_arrays = 8;
  int array_rows = 128;  // weight-stationary: a weight tile is array_rows (K) x array_cols (N)
  int array_cols = 128;
  int vector_units = 8;
  int vector_lanes = 128;
  int64_t sram_bytes = 32 << 20;  // on-chip scratchpad, split in two halves for double buffering
  int element_bytes = 2;
  std::array<VectorOpCost, kNumVectorOps> vector_ops{};
  NpuEnergy energy;
  GemmTiming gemm_timing = GemmTiming::kWeightStationary;
  ActivationTraffic activation_traffic = ActivationTraffic::kOnChip;
  OpOverlap op_overlap = OpOverlap::kConcurrentUnits;
  AttentionMapping attention_mapping = AttentionMapping::kBandwidthBound;
  // Derived from the device's HBM when the device config is loaded: peak bytes per NPU cycle,
  // and the share of time refresh blocks a channel (tRFC / tREFI).
  double hbm_bytes_per_cycle = 1024;
  double hbm_refresh_fraction = 0;
  // The bandwidth left after refresh (the reference simulator's effective rate, 955.7 B per
  // cycle on NeuPIMs' HBM), used by its timing choices.
  double hbm_bytes_per_cycle_less_refresh() const {
    return hbm_bytes_per_cycle * (1.0 - hbm_refresh_fraction);
  }

  Clock clock() const { return Clock{frequency_mhz}; }
  int64_t peak_macs_per_cycle() const {
    return static_cast<int64_t>(systolic_arrays) * array_rows * array_cols;
  }
};

// The names tables of the switches above (the config values, e.g. "block_pipeline").
const EnumNames<GemmTiming>& GemmTimingNames();
const EnumNames<ActivationTraffic>& ActivationTrafficNames();
const EnumNames<OpOverlap>& OpOverlapNames();
const EnumNames<AttentionMapping>& AttentionMappingNames();
// Operands an op reads per output element: 2 for add and reduce, 1 for the others.
int VectorInputs(VectorOp op);

// Parses the "npu" object (everything but the hbm_* fields).
void ParseNpuSpec(ConfigObject npu, NpuSpec* out);
absl::Status ValidateNpuSpec(const NpuSpec& spec);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_NPU_NPU_SPEC_H_
