// NpuModel: latency, utilisation and energy of one NPU operation.
//
// Role: the interface the engine uses for every GEMM (QKV, projection, FFN, prefill attention,
// and attention GEMVs in npu-only mode) and every vector op (softmax, layernorm, GELU, residual,
// all-reduce staging). Two interchangeable implementations are registered by name
// (hw/registry.h): "tiled" walks the weight tiles and the double-buffered DMA pipeline one tile
// at a time; "analytic" is its closed form. Tests check they agree.
//
// GEMM model (weight-stationary, docs/hw.md "NPU"): Y[m x n] = X[m x k] * W[k x n]. W is cut
// into array_rows x array_cols weight tiles; each tile is loaded into one array (array_rows
// cycles, hidden behind the previous tile's streaming thanks to double-buffered PE weights) and
// the m activation rows stream through it (m cycles), plus one fill/drain of
// array_rows + array_cols - 1 cycles per array at the end. Tiles are spread over the arrays.
// DMA brings each weight tile (and the activations, once) from HBM at the available bandwidth,
// double-buffered against compute, so an op costs max(compute, memory) plus the pipeline's
// prologue/epilogue: small m (a decode GEMV) is memory-bound, large m compute-bound. When m rows
// do not fit in half the scratchpad, m is split into passes and the weights are re-read.
//
// Contract: const methods, thread-compatible; shapes must be positive (InvalidArgument else).
#ifndef NEUPIMS_HW_NPU_NPU_MODEL_H_
#define NEUPIMS_HW_NPU_NPU_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/units.h"
#include "hw/npu/npu_spec.h"

namespace neupims::hw {

struct GemmShape {
  int64_t m = 1;  // rows of activations (tokens in the batch)
  int64_t k = 1;  // reduction dimension
  int64_t n = 1;  // output features
  // Whether W comes from HBM (weights) or is already on chip (e.g. an activation operand).
  bool weights_from_hbm = true;
  // Whether X is read from / Y written to HBM (false: they stay in the scratchpad).
  bool activations_from_hbm = false;
};

struct VectorShape {
  VectorOp op = VectorOp::kAdd;
  int64_t rows = 1;
  int64_t cols = 1;
};

// The share of the HBM bandwidth the NPU gets while this op runs (PIM may be using the rest).
struct NpuContext {
  double bandwidth_fraction = 1.0;
};

struct NpuOpResult {
  Cycles cycles = 0;              // NPU clock cycles, start to finish
  Cycles compute_cycles = 0;      // what the compute units alone would need
  Cycles memory_cycles = 0;       // what the DMA alone would need at the given bandwidth
  Cycles array_busy_cycles = 0;   // summed over systolic arrays (cycles a PE array streamed)
  Cycles vector_busy_cycles = 0;  // summed over vector units
  int64_t macs = 0;
  Bytes hbm_bytes = 0;
  Bytes sram_bytes = 0;
  double energy_j = 0;  // dynamic energy (MAC + SRAM + vector); static power is separate
  bool memory_bound = false;

  // MACs over (arrays x rows x cols x cycles).
  double ArrayUtilization(const NpuSpec& spec) const;
};

class NpuModel {
 public:
  virtual ~NpuModel() = default;
  virtual absl::StatusOr<NpuOpResult> Gemm(const GemmShape& shape,
                                           const NpuContext& ctx = {}) const = 0;
  virtual absl::StatusOr<NpuOpResult> Vector(const VectorShape& shape) const = 0;
  virtual const NpuSpec& spec() const = 0;
  virtual const char* name() const = 0;
};

// AttentionMapping::kSerialGemv (npu_spec.h): one head of one request at `seq_len` tokens as the
// reference simulator maps it (issue 14). A preload of `size` rows on an empty pipeline takes
// fill + size cycles, fill = array_rows + array_cols - 1 (255):
//   logit   q K^T: one preload of floor(s / arrays) rows                          (293 at s = 310)
//   context p V  : ceil((s + R - 1) / R) preloads of R / arrays rows, one block more than the
//                  s rows need, plus the softmax hand-off of 10 cycles     (10 + 4 x 271 = 1,094)
// each no shorter than streaming its K (or V) from HBM at the bandwidth less refresh (83 cycles
// at s = 310, head_dim 128). The softmax between them is a vector op of its own.
struct SerialGemvHead {
  Cycles logit = 0;
  Cycles context = 0;
};
SerialGemvHead SerialGemvHeadCycles(const NpuSpec& spec, int64_t seq_len, int head_dim);

// Factories (use hw/registry.h to choose by name).
std::unique_ptr<NpuModel> CreateTiledNpuModel(const NpuSpec& spec);
std::unique_ptr<NpuModel> CreateAnalyticNpuModel(const NpuSpec& spec);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_NPU_NPU_MODEL_H_
