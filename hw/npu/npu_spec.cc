#include "hw/npu/npu_spec.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/config_enum.h"

namespace neupims::hw {
const EnumNames<VectorOp>& VectorOpNames() {
  static constexpr EnumName<VectorOp> kEntries[] = {{"softmax", VectorOp::kSoftmax},
                                                    {"layernorm", VectorOp::kLayerNorm},
                                                    {"gelu", VectorOp::kGelu},
                                                    {"add", VectorOp::kAdd},
                                                    {"reduce", VectorOp::kReduce}};
  static_assert(std::size(kEntries) == kNumVectorOps);
  static constexpr EnumNames<VectorOp> kNames("vector op", kEntries);
  return kNames;
}

const EnumNames<GemmTiming>& GemmTimingNames() {
  static constexpr EnumName<GemmTiming> kEntries[] = {
      {"weight_stationary", GemmTiming::kWeightStationary},
      {"block_pipeline", GemmTiming::kBlockPipeline}};
  static constexpr EnumNames<GemmTiming> kNames("GEMM timing", kEntries);
  return kNames;
}

const EnumNames<ActivationTraffic>& ActivationTrafficNames() {
  static constexpr EnumName<ActivationTraffic> kEntries[] = {
      {"on_chip", ActivationTraffic::kOnChip},
      {"dram_round_trip", ActivationTraffic::kDramRoundTrip}};
  static constexpr EnumNames<ActivationTraffic> kNames("activation traffic", kEntries);
  return kNames;
}

const EnumNames<OpOverlap>& OpOverlapNames() {
  static constexpr EnumName<OpOverlap> kEntries[] = {
      {"concurrent_units", OpOverlap::kConcurrentUnits}, {"serial", OpOverlap::kSerial}};
  static constexpr EnumNames<OpOverlap> kNames("operation overlap", kEntries);
  return kNames;
}

const EnumNames<AttentionMapping>& AttentionMappingNames() {
  static constexpr EnumName<AttentionMapping> kEntries[] = {
      {"bandwidth_bound", AttentionMapping::kBandwidthBound},
      {"serial_gemv", AttentionMapping::kSerialGemv}};
  static constexpr EnumNames<AttentionMapping> kNames("attention mapping", kEntries);
  return kNames;
}

int VectorInputs(VectorOp op) { return op == VectorOp::kAdd || op == VectorOp::kReduce ? 2 : 1; }

void ParseNpuSpec(ConfigObject npu, NpuSpec* out) {
  out->frequency_mhz = npu.Double("frequency_mhz", {.min = 1, .max = 1e5});
  out->systolic_arrays = static_cast<int>(npu.Int("systolic_arrays", {.min = 1, .max = 4096}));
  out->array_rows = static_cast<int>(npu.Int("array_rows", {.min = 1, .max = 1 << 16}));
  out->array_cols = static_cast<int>(npu.Int("array_cols", {.min = 1, .max = 1 << 16}));
  out->vector_units = static_cast<int>(npu.Int("vector_units", {.min = 1, .max = 4096}));
  out->vector_lanes = static_cast<int>(npu.Int("vector_lanes", {.min = 1, .max = 1 << 16}));
  out->sram_bytes = npu.Int("sram_bytes", {.min = 1, .max = int64_t{1} << 40});
  out->element_bytes = static_cast<int>(npu.Int("element_bytes", {.min = 1, .max = 8}));
  ReadEnum(npu, "gemm_timing", GemmTimingNames(), &out->gemm_timing);
  ReadEnum(npu, "activation_traffic", ActivationTrafficNames(), &out->activation_traffic);
  ReadEnum(npu, "op_overlap", OpOverlapNames(), &out->op_overlap);
  ReadEnum(npu, "attention_mapping", AttentionMappingNames(), &out->attention_mapping);

  // Every op must be listed: a missing op would silently cost one pass.
  ConfigObject ops = npu.Child("vector_ops");
  const IntRange count{.min = 0, .max = 1 << 10};
  for (int i = 0; i < kNumVectorOps; ++i) {
    ConfigObject op = ops.Child(VectorOpName(static_cast<VectorOp>(i)));
    VectorOpCost& cost = out->vector_ops[i];
    cost.passes = static_cast<int>(op.Int("passes", count));
    cost.reductions = static_cast<int>(op.Int("reductions", count));
    op.Finish();
  }
  ops.Finish();

  ConfigObject e = npu.Child("energy");
  // Bounded far above any real part, so no figure makes a reported energy infinite.
  const DoubleRange nonneg{.min = 0, .max = 1e6};
  out->energy.mac_pj = e.Double("mac_pj", nonneg);
  out->energy.sram_pj_per_byte = e.Double("sram_pj_per_byte", nonneg);
  out->energy.vector_pj_per_element_pass = e.Double("vector_pj_per_element_pass", nonneg);
  out->energy.static_power_w = e.Double("static_power_w", nonneg);
  e.Finish();
  npu.Finish();
}

absl::Status ValidateNpuSpec(const NpuSpec& spec) {
  if (!(spec.frequency_mhz > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("npu.frequency_mhz must be > 0, got ", spec.frequency_mhz));
  }
  const std::array<std::pair<const char*, int>, 6> positive = {{
      {"systolic_arrays", spec.systolic_arrays},
      {"array_rows", spec.array_rows},
      {"array_cols", spec.array_cols},
      {"vector_units", spec.vector_units},
      {"vector_lanes", spec.vector_lanes},
      {"element_bytes", spec.element_bytes},
  }};
  for (const auto& [name, value] : positive) {
    if (value < 1) {
      return absl::InvalidArgumentError(absl::StrCat("npu.", name, " must be >= 1, got ", value));
    }
  }
  // The scratchpad is split in two halves (docs/hw.md "NPU"): one for the activation/output
  // block of an m pass, one for the weights, which every array double-buffers (the tile it
  // streams plus the next one). The weight half must therefore hold 2 tiles per array.
  const int64_t weight_buffers =
      2 * spec.peak_macs_per_cycle() * static_cast<int64_t>(spec.element_bytes);
  if (weight_buffers > spec.sram_bytes / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "npu.sram_bytes (", spec.sram_bytes, ") must be at least twice the double-buffered weight ",
        "tiles of all systolic arrays (2 x ", weight_buffers, " bytes)"));
  }
  for (int i = 0; i < kNumVectorOps; ++i) {
    const VectorOpCost& c = spec.vector_ops[i];
    if (c.passes < 0 || c.reductions < 0) {
      return absl::InvalidArgumentError(absl::StrCat("npu.vector_ops.",
                                                     VectorOpName(static_cast<VectorOp>(i)),
                                                     ": passes and reductions must be >= 0"));
    }
  }
  const NpuEnergy& e = spec.energy;
  const std::array<std::pair<const char*, double>, 4> energy = {{
      {"mac_pj", e.mac_pj},
      {"sram_pj_per_byte", e.sram_pj_per_byte},
      {"vector_pj_per_element_pass", e.vector_pj_per_element_pass},
      {"static_power_w", e.static_power_w},
  }};
  for (const auto& [name, value] : energy) {
    if (!(value >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("npu.energy.", name, " must be >= 0, got ", value));
    }
  }
  // Derived from the "hbm" object when the device is loaded; zero would make every DMA infinite.
  if (!(spec.hbm_bytes_per_cycle > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "npu.hbm_bytes_per_cycle (derived from hbm) must be > 0, got ", spec.hbm_bytes_per_cycle));
  }
  return absl::OkStatus();
}

}  // namespace neupims::hw
