// GEMV programs for a PIM channel, derived from the KV-cache layout of NeuPIMs section 6.3.
//
// A PIM "tile" opens one row in every active bank of the channel and multiplies it, column step
// by column step (16 FP16 lanes per bank, Newton's datapath), with the vector held in the
// channel's global buffer. A "block" loads one vector chunk (PIM_GWRITE) and runs the tiles that
// use it. Programs are run-length encoded: a long request is a handful of blocks, so planning and
// analytic costing are O(1) in the sequence length.
//
// Key cache (logit GEMV, K^T q): one token per bank, a row holds 512 elements of that token's key
// (4 heads of 128 for GPT3), so a tile is 32 tokens x one page and each head is one dot product.
//
//        bank0      bank1      ...  bank31          row r   : keys of tokens 0..31, elems 0..511
//   r   [k0 h0..3] [k1 h0..3]  ... [k31 h0..3]      row r+1 : tokens 32..63 ...
//   (query chunk of 512 elements in the global buffer; 4 dot products / tile, one per head)
//
// Value cache (attend GEMV, p V): one head dimension per bank, a row holds that dimension for
// 512 consecutive tokens, so a tile is 32 dimensions x 512 tokens and is one dot product with
// the softmax scores of one head as the vector.
//
//        bank0         bank1         ...  bank31           (head h, tokens 0..511)
//   r   [v h,d0 t0..511][v h,d1 ...] ... [v h,d31 ...]     row r+1: dims 32..63, ...
//
// Bank groups are visited alternating ranks (r0g0, r1g0, r0g1, ...) so a partial tile and the
// grouped activations spread over both dies' tFAW windows.
#ifndef NEUPIMS_HW_PIM_GEMV_PLAN_H_
#define NEUPIMS_HW_PIM_GEMV_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "hw/dram/hbm_spec.h"

namespace neupims::hw {

// The attention of one request in one decoder layer, on the channel holding its KV cache.
struct AttentionShape {
  int64_t seq_len = 1;    // tokens in the KV cache (prompt + generated so far)
  int num_heads = 32;     // query heads on this device (after tensor parallelism)
  int num_kv_heads = 32;  // key/value heads on this device (GQA: fewer than num_heads)
  int head_dim = 128;
};

// y = M x with M of rows x cols stored like the key cache (one matrix row per bank).
struct GemvShape {
  int64_t rows = 1;
  int64_t cols = 1;
};

// Geometry of the PIM datapath that planning needs.
struct PimGeometry {
  int banks = 32;           // per channel
  int banks_per_group = 4;  // banks opened by one grouped activation
  int groups = 8;           // bank groups per channel (all ranks)
  int ranks = 2;
  int page_elements = 512;  // elements per row
  int lanes = 16;           // elements per column step

  static PimGeometry FromSpec(const HbmSpec& spec);
};

// `count` identical tiles.
struct TileRun {
  int64_t count = 0;
  int groups = 0;         // bank groups activated (a partial tile needs fewer)
  int dots = 1;           // dot products per tile (each returns one result burst)
  int steps_per_dot = 1;  // column MAC steps per dot product
};

// `repeat` x ( [PIM_GWRITE] runs... ).
struct GemvBlock {
  int64_t repeat = 0;
  bool load_vector = true;
  // At most two runs: full tiles, then one partial tile. Inline so planning never allocates
  // (the analytic model plans on the engine's hot path).
  absl::InlinedVector<TileRun, 2> runs;
};

struct GemvProgram {
  absl::InlinedVector<GemvBlock, 4> blocks;

  int64_t tiles() const;
  int64_t vector_loads() const;
  int64_t dot_products() const;
  int64_t column_steps() const;
  // Multiply-accumulates actually performed (one per lane per active bank per step).
  int64_t macs(const PimGeometry& g) const;
  void Append(const GemvProgram& other);
};

// Logit (K^T q) then attend (p V) for one request-layer. Errors: non-positive sizes, heads not
// divisible by KV heads. A head_dim that does not divide the page (80, 96, 112) or is not a
// multiple of the lanes is laid out with padding: each head takes whole column steps and a key
// row holds as many whole heads as fit (the rest of the row is unused).
absl::StatusOr<GemvProgram> PlanAttention(const AttentionShape& shape, const PimGeometry& g);
absl::StatusOr<GemvProgram> PlanLogit(const AttentionShape& shape, const PimGeometry& g);
absl::StatusOr<GemvProgram> PlanAttend(const AttentionShape& shape, const PimGeometry& g);
absl::StatusOr<GemvProgram> PlanGemv(const GemvShape& shape, const PimGeometry& g);

absl::Status ValidateAttentionShape(const AttentionShape& shape);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_PIM_GEMV_PLAN_H_
