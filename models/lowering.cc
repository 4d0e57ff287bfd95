#include "models/lowering.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/units.h"

namespace neupims::models {
namespace {

Op Gemm(std::string name, int64_t m, int64_t k, int64_t n, bool weights_from_hbm = true,
        int64_t count = 1) {
  Op op;
  op.kind = OpKind::kGemm;
  op.name = std::move(name);
  op.m = m;
  op.k = k;
  op.n = n;
  op.weights_from_hbm = weights_from_hbm;
  op.count = count;
  return op;
}

Op Vector(std::string name, VectorKind kind, int64_t rows, int64_t cols, int64_t count = 1) {
  Op op;
  op.kind = OpKind::kVector;
  op.name = std::move(name);
  op.vector = kind;
  op.rows = rows;
  op.cols = cols;
  op.count = count;
  return op;
}

Op AllReduce(std::string name, int64_t bytes) {
  Op op;
  op.kind = OpKind::kAllReduce;
  op.name = std::move(name);
  op.bytes = bytes;
  return op;
}

// The linear part of one layer over `tokens` tokens (shared by decode and prefill). The
// attention itself sits between `pre` and `post`.
LayerOps LinearOps(const ModelConfig& m, const Parallelism& p, int64_t tokens) {
  const AttentionDims a = DeviceAttentionDims(m, p);
  const int64_t d = m.hidden;
  const int64_t f = m.ffn_hidden / p.tp;
  const int64_t ffn1_n = m.ffn == FfnType::kSwiGlu ? 2 * f : f;  // SwiGLU: gate and up
  const VectorKind act = m.ffn == FfnType::kSwiGlu ? VectorKind::kSiluMul : VectorKind::kGelu;
  const int64_t allreduce_bytes = tokens * d * m.element_bytes;

  LayerOps ops;
  ops.attention = a;
  ops.pre_attention.push_back(Vector("ln1", VectorKind::kLayerNorm, tokens, d));
  ops.pre_attention.push_back(
      Gemm("qkv", tokens, d, (int64_t{a.heads} + 2 * int64_t{a.kv_heads}) * a.head_dim));

  std::vector<Op>& post = ops.post_attention;
  post.push_back(Gemm("proj", tokens, int64_t{a.heads} * a.head_dim, d));
  if (p.tp > 1) post.push_back(AllReduce("allreduce_attn", allreduce_bytes));
  post.push_back(Vector("residual1", VectorKind::kAdd, tokens, d));
  post.push_back(Vector("ln2", VectorKind::kLayerNorm, tokens, d));
  post.push_back(Gemm("ffn1", tokens, d, ffn1_n));
  post.push_back(Vector("act", act, tokens, f));
  post.push_back(Gemm("ffn2", tokens, f, d));
  if (p.tp > 1) post.push_back(AllReduce("allreduce_ffn", allreduce_bytes));
  post.push_back(Vector("residual2", VectorKind::kAdd, tokens, d));
  return ops;
}

}  // namespace

AttentionDims DeviceAttentionDims(const ModelConfig& m, const Parallelism& p) {
  const int tp = p.tp > 0 ? p.tp : 1;
  return AttentionDims{
      .heads = m.heads / tp, .kv_heads = m.kv_heads / tp, .head_dim = m.head_dim()};
}

absl::StatusOr<LayerOps> LowerDecodeLayer(const ModelConfig& m, const Parallelism& p,
                                          int64_t batch) {
  if (batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("decode batch must be >= 1 token, got ", batch));
  }
  RETURN_IF_ERROR(ValidateParallelism(m, p));
  return LinearOps(m, p, batch);
}

absl::Status ValidatePrefillPrompts(absl::Span<const int64_t> prompt_tokens) {
  if (prompt_tokens.empty()) {
    return absl::InvalidArgumentError("prefill needs at least one prompt, got none");
  }
  for (size_t i = 0; i < prompt_tokens.size(); ++i) {
    if (prompt_tokens[i] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prefill prompt ", i, " has ", prompt_tokens[i], " tokens; every prompt needs >= 1"));
    }
  }
  return absl::OkStatus();
}

// Attention of one prompt on the NPU, one instance per head on the device. Causal masking is
// charged as the full s x s square: the systolic arrays compute whole output tiles and the mask
// is applied afterwards, so only tiles strictly above the diagonal could be skipped; we do not
// model such a kernel (the NeuPIMs/ONNXim simulator does not either). The same holds for the
// softmax, which passes masked elements through the vector units.
std::vector<Op> PrefillAttentionOps(const AttentionDims& a, int64_t s) {
  std::vector<Op> ops = {
      Gemm("attn_scores", s, a.head_dim, s, /*weights_from_hbm=*/false, /*count=*/a.heads),
      Vector("attn_softmax", VectorKind::kSoftmax, s, s, a.heads),
      Gemm("attn_context", s, s, a.head_dim, /*weights_from_hbm=*/false, /*count=*/a.heads)};
  for (Op& op : ops) op.role = OpRole::kPrefillAttention;
  return ops;
}

absl::StatusOr<LayerOps> LowerPrefillLayer(const ModelConfig& m, const Parallelism& p,
                                           absl::Span<const int64_t> prompt_tokens) {
  RETURN_IF_ERROR(ValidatePrefillPrompts(prompt_tokens));
  RETURN_IF_ERROR(ValidateParallelism(m, p));
  int64_t tokens = 0;
  for (const int64_t s : prompt_tokens) tokens += s;
  LayerOps ops = LinearOps(m, p, tokens);
  for (const int64_t s : prompt_tokens) {
    for (Op& op : PrefillAttentionOps(ops.attention, s)) ops.pre_attention.push_back(std::move(op));
  }
  return ops;
}

Op LmHead(const ModelConfig& m, const Parallelism& p, int64_t tokens) {
  const int64_t tp = p.tp > 0 ? p.tp : 1;
  Op head = Gemm("lm_head", tokens, m.hidden, CeilDiv(m.vocab, tp));
  head.role = OpRole::kLmHead;
  return head;
}

int64_t DeviceWeightBytes(const ModelConfig& m, const Parallelism& p) {
  const int64_t tp = p.tp > 0 ? p.tp : 1;
  const int64_t pp = p.pp > 0 ? p.pp : 1;
  const int64_t layer_params = m.LayerParameters() / tp;
  const int64_t vocab_matrix = CeilDiv(m.vocab, tp) * m.hidden;  // vocab-parallel
  // With pp == 1 the one stage holds the token embedding and the LM head: two matrices, or one
  // when they are tied. With pp > 1 the first stage holds the embedding and the last the LM
  // head (a tied head is a copy there), so every stage that holds one holds exactly one; the
  // result is that stage's total, the largest over the stages.
  const int64_t vocab_matrices = pp == 1 && !m.tied_embeddings ? 2 : 1;
  return ((m.layers / pp) * layer_params + vocab_matrices * vocab_matrix) * m.element_bytes;
}

}  // namespace neupims::models
