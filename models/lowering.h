// Lowering of one decoder block into hardware operations with shapes.
//
// Role: turns (model, parallelism, batch) into the operations one device executes for one
// decoder layer: GEMMs for the NPU systolic arrays, vector ops for the NPU vector units, the
// attention of each request (GEMVs for PIM, or GEMV-shaped GEMMs for the NPU in npu-only mode),
// and all-reduces for the interconnect. The engine schedules these on the hardware models.
//
// Decode step of one layer (NeuPIMs Fig. 3; per device, TP-sharded, b = tokens in the batch):
//   ln1            vector layernorm   b x d
//   qkv            GEMM  b x d  by  d x (q + 2 kv) / tp
//   attention      per request: logit K^T q, softmax, attend p V  (heads/tp heads)
//   proj           GEMM  b x d/tp  by  d/tp x d
//   allreduce      b x d elements (tp > 1)
//   residual1      vector add         b x d
//   ln2            vector layernorm   b x d
//   ffn1           GEMM  b x d  by  d x f/tp   (SwiGLU: gate and up, 2 f/tp)
//   act            vector gelu / silu-mul  b x f/tp
//   ffn2           GEMM  b x f/tp  by  f/tp x d
//   allreduce      b x d elements (tp > 1)
//   residual2      vector add         b x d
// Prefill of a prompt of s tokens is the same with b = s, except attention: per head a causal
// s x s score GEMM (Q K^T), a softmax over s x s, and an s x s by s x d GEMM (P V), all on the NPU.
// The LM head (b x d by d x vocab/tp) runs once per step on the last pipeline stage.
#ifndef NEUPIMS_MODELS_LOWERING_H_
#define NEUPIMS_MODELS_LOWERING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "models/model_config.h"

namespace neupims::models {

enum class OpKind : uint8_t {
  kGemm,       // NPU systolic arrays
  kVector,     // NPU vector units
  kAttention,  // per-request attention (PIM GEMVs, or NPU in npu-only mode)
  kAllReduce,  // interconnect (tensor parallelism)
};

// What an op is for, so that consumers never infer it from its name.
enum class OpRole : uint8_t {
  kLinear,            // a decoder layer's linear / element-wise op or all-reduce
  kPrefillAttention,  // a prompt's attention on the NPU (score, softmax, context)
  kLmHead,            // the LM head
};

enum class VectorKind : uint8_t { kLayerNorm, kGelu, kSiluMul, kAdd, kSoftmax };

struct Op {
  OpKind kind = OpKind::kGemm;
  OpRole role = OpRole::kLinear;
  std::string name;  // "qkv", "proj", "ffn1", ... (stable: used in breakdowns and timelines)
  // kGemm: m x k by k x n; weights_from_hbm false for activation x activation GEMMs (prefill
  // attention scores), whose operands are on chip.
  int64_t m = 0, k = 0, n = 0;
  bool weights_from_hbm = true;
  // kVector: rows x cols of `vector`.
  VectorKind vector = VectorKind::kAdd;
  int64_t rows = 0, cols = 0;
  // kAllReduce: bytes reduced across the tp devices.
  int64_t bytes = 0;
  // kGemm / kVector: how many identical instances (e.g. one per head); they run back to back.
  int64_t count = 1;
};

// Per-device attention shape (after tensor parallelism; `p` must pass ValidateParallelism).
struct AttentionDims {
  int heads = 0;     // query heads on the device
  int kv_heads = 0;  // KV heads on the device
  int head_dim = 0;
};

struct LayerOps {
  std::vector<Op> pre_attention;   // ln1, qkv
  AttentionDims attention;         // the kAttention step, per request
  std::vector<Op> post_attention;  // proj ... residual2
};

AttentionDims DeviceAttentionDims(const ModelConfig& m, const Parallelism& p);

// One decode layer for `batch` tokens (one per running request).
absl::StatusOr<LayerOps> LowerDecodeLayer(const ModelConfig& m, const Parallelism& p,
                                          int64_t batch);

// One prefill layer for several prompts batched together (Orca selective batching): the linear
// ops run once over all their tokens; the attention of each prompt becomes NPU ops (causal
// score GEMM, softmax, context GEMM, `count` = heads on the device) placed in `pre_attention`
// after qkv. `attention` dims are still filled (for KV accounting). Causal masking is charged as
// the full s x s square (the systolic arrays compute whole output tiles; the mask is applied
// afterwards), so score, softmax and context cost are not halved.
absl::StatusOr<LayerOps> LowerPrefillLayer(const ModelConfig& m, const Parallelism& p,
                                           absl::Span<const int64_t> prompt_tokens);
// LowerPrefillLayer's checks of its prompt list: InvalidArgument naming the first prompt with
// fewer than one token (or an empty list).
absl::Status ValidatePrefillPrompts(absl::Span<const int64_t> prompt_tokens);
// The attention ops LowerPrefillLayer places for one prompt of `prompt_tokens` (>= 1) tokens on
// a device with attention dims `a` (DeviceAttentionDims), in order.
std::vector<Op> PrefillAttentionOps(const AttentionDims& a, int64_t prompt_tokens);

// The LM head of one step over `tokens` tokens (last pipeline stage).
Op LmHead(const ModelConfig& m, const Parallelism& p, int64_t tokens);

// Weight bytes one device holds (its layers and, on the first/last stage, embeddings / LM head).
// Vocabulary matrices are vocab-parallel (ceil(vocab / tp) rows). With pp == 1 the device holds
// the embedding and the LM head, counted once when tied (GPT3); with pp > 1 the first stage
// holds the embedding and the last the LM head (a copy when tied): the value is for such a stage,
// the largest over the stages.
int64_t DeviceWeightBytes(const ModelConfig& m, const Parallelism& p);

}  // namespace neupims::models

#endif  // NEUPIMS_MODELS_LOWERING_H_
