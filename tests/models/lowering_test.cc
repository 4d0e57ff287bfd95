#include "models/lowering.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/model_config.h"

namespace neupims::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ModelConfig MustLoad(absl::string_view name) {
  absl::StatusOr<ModelConfig> cfg = LoadModelConfig(name);
  EXPECT_TRUE(cfg.ok()) << cfg.status();
  return cfg.ok() ? *cfg : ModelConfig{};
}

std::vector<std::string> Names(const std::vector<Op>& ops) {
  std::vector<std::string> out;
  for (const Op& op : ops) out.push_back(op.name);
  return out;
}

// The first op named `name` (a default Op if none, which fails the caller's expectations).
Op Find(const LayerOps& ops, absl::string_view name) {
  for (const std::vector<Op>* list : {&ops.pre_attention, &ops.post_attention}) {
    for (const Op& op : *list) {
      if (op.name == name) return op;
    }
  }
  ADD_FAILURE() << "no op " << name;
  return Op{};
}

LayerOps MustDecode(const ModelConfig& m, Parallelism p, int64_t batch) {
  absl::StatusOr<LayerOps> ops = LowerDecodeLayer(m, p, batch);
  EXPECT_TRUE(ops.ok()) << ops.status();
  return ops.ok() ? *ops : LayerOps{};
}

TEST(Lowering, Gpt3_7bTp4DecodeLayerHasTheShardedShapes) {
  const LayerOps ops = MustDecode(MustLoad("gpt3-7b"), {.tp = 4, .pp = 1}, 256);
  EXPECT_THAT(Names(ops.pre_attention), ElementsAre("ln1", "qkv"));
  EXPECT_THAT(Names(ops.post_attention),
              ElementsAre("proj", "allreduce_attn", "residual1", "ln2", "ffn1", "act", "ffn2",
                          "allreduce_ffn", "residual2"));
  EXPECT_EQ(ops.pre_attention.size() + ops.post_attention.size(), 11u);

  const Op qkv = Find(ops, "qkv");  // 8 heads x 128 x (Q, K, V)
  EXPECT_EQ(qkv.kind, OpKind::kGemm);
  EXPECT_EQ(qkv.m, 256);
  EXPECT_EQ(qkv.k, 4096);
  EXPECT_EQ(qkv.n, 3072);
  EXPECT_TRUE(qkv.weights_from_hbm);
  const Op proj = Find(ops, "proj");
  EXPECT_EQ(proj.m, 256);
  EXPECT_EQ(proj.k, 1024);
  EXPECT_EQ(proj.n, 4096);
  const Op ffn1 = Find(ops, "ffn1");  // 16384 / 4
  EXPECT_EQ(ffn1.m, 256);
  EXPECT_EQ(ffn1.k, 4096);
  EXPECT_EQ(ffn1.n, 4096);
  const Op act = Find(ops, "act");
  EXPECT_EQ(act.kind, OpKind::kVector);
  EXPECT_EQ(act.vector, VectorKind::kGelu);
  EXPECT_EQ(act.rows, 256);
  EXPECT_EQ(act.cols, 4096);
  const Op ffn2 = Find(ops, "ffn2");
  EXPECT_EQ(ffn2.k, 4096);
  EXPECT_EQ(ffn2.n, 4096);
  const Op ln1 = Find(ops, "ln1");
  EXPECT_EQ(ln1.vector, VectorKind::kLayerNorm);
  EXPECT_EQ(ln1.rows, 256);
  EXPECT_EQ(ln1.cols, 4096);
  EXPECT_EQ(Find(ops, "residual2").vector, VectorKind::kAdd);
  for (const char* name : {"allreduce_attn", "allreduce_ffn"}) {
    const Op ar = Find(ops, name);
    EXPECT_EQ(ar.kind, OpKind::kAllReduce);
    EXPECT_EQ(ar.bytes, 256 * 4096 * 2);
  }
  EXPECT_EQ(ops.attention.heads, 8);
  EXPECT_EQ(ops.attention.kv_heads, 8);
  EXPECT_EQ(ops.attention.head_dim, 128);
}

TEST(Lowering, DecodeWithoutTensorParallelismHasNoAllReduce) {
  const LayerOps ops = MustDecode(MustLoad("gpt3-7b"), {.tp = 1, .pp = 1}, 8);
  EXPECT_THAT(Names(ops.post_attention),
              ElementsAre("proj", "residual1", "ln2", "ffn1", "act", "ffn2", "residual2"));
  EXPECT_EQ(Find(ops, "qkv").n, 3 * 4096);
  EXPECT_EQ(Find(ops, "ffn1").n, 16384);
}

TEST(Lowering, Llama2_70bTp8ShardsKvHeadsAndDoublesSwiGluFfn1) {
  const LayerOps ops = MustDecode(MustLoad("llama2-70b"), {.tp = 8, .pp = 1}, 32);
  EXPECT_EQ(Find(ops, "qkv").n, (8 + 2 * 1) * 128);
  EXPECT_EQ(Find(ops, "proj").k, 8 * 128);
  EXPECT_EQ(Find(ops, "ffn1").n, 2 * 28672 / 8);
  const Op act = Find(ops, "act");
  EXPECT_EQ(act.vector, VectorKind::kSiluMul);
  EXPECT_EQ(act.cols, 28672 / 8);
  EXPECT_EQ(Find(ops, "ffn2").k, 28672 / 8);
  EXPECT_EQ(ops.attention.heads, 8);
  EXPECT_EQ(ops.attention.kv_heads, 1);
  EXPECT_EQ(ops.attention.head_dim, 128);
}

TEST(Lowering, DeviceAttentionDimsSplitHeadsByTp) {
  const AttentionDims a = DeviceAttentionDims(MustLoad("llama2-70b"), {.tp = 4, .pp = 1});
  EXPECT_EQ(a.heads, 16);
  EXPECT_EQ(a.kv_heads, 2);
  EXPECT_EQ(a.head_dim, 128);
}

TEST(Lowering, PrefillBatchesLinearOpsAndLowersAttentionPerPrompt) {
  const ModelConfig m = MustLoad("gpt3-7b");
  const std::vector<int64_t> prompts = {100, 28};
  absl::StatusOr<LayerOps> ops = LowerPrefillLayer(m, {.tp = 4, .pp = 1}, prompts);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_THAT(Names(ops->pre_attention),
              ElementsAre("ln1", "qkv", "attn_scores", "attn_softmax", "attn_context",
                          "attn_scores", "attn_softmax", "attn_context"));
  for (const char* name : {"ln1", "qkv", "proj", "ffn1", "ffn2", "residual2"}) {
    const Op op = Find(*ops, name);
    EXPECT_EQ(op.kind == OpKind::kGemm ? op.m : op.rows, 128) << name;
  }
  EXPECT_EQ(Find(*ops, "allreduce_ffn").bytes, 128 * 4096 * 2);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t s = prompts[i];
    SCOPED_TRACE(s);
    const Op& scores = ops->pre_attention[2 + 3 * i];
    EXPECT_EQ(scores.kind, OpKind::kGemm);
    EXPECT_EQ(scores.m, s);
    EXPECT_EQ(scores.k, 128);
    EXPECT_EQ(scores.n, s);
    EXPECT_FALSE(scores.weights_from_hbm);
    EXPECT_EQ(scores.count, 8);
    const Op& softmax = ops->pre_attention[3 + 3 * i];
    EXPECT_EQ(softmax.kind, OpKind::kVector);
    EXPECT_EQ(softmax.vector, VectorKind::kSoftmax);
    EXPECT_EQ(softmax.rows, s);  // the full causal square
    EXPECT_EQ(softmax.cols, s);
    EXPECT_EQ(softmax.count, 8);
    const Op& context = ops->pre_attention[4 + 3 * i];
    EXPECT_EQ(context.m, s);
    EXPECT_EQ(context.k, s);
    EXPECT_EQ(context.n, 128);
    EXPECT_FALSE(context.weights_from_hbm);
    EXPECT_EQ(context.count, 8);
  }
  EXPECT_EQ(ops->attention.heads, 8);
}

TEST(Lowering, PrefillAttentionOpsAreTheOpsThePrefillLayerPlacesForThatPrompt) {
  const ModelConfig m = MustLoad("gpt3-7b");
  const Parallelism p{.tp = 4, .pp = 1};
  const std::vector<int64_t> prompts = {100, 28, 100};
  absl::StatusOr<LayerOps> ops = LowerPrefillLayer(m, p, prompts);
  ASSERT_TRUE(ops.ok()) << ops.status();
  std::vector<Op> placed;
  for (const Op& op : ops->pre_attention) {
    if (op.role == OpRole::kPrefillAttention) placed.push_back(op);
  }
  ASSERT_EQ(placed.size(), 3 * prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    const std::vector<Op> one = PrefillAttentionOps(DeviceAttentionDims(m, p), prompts[i]);
    ASSERT_EQ(one.size(), 3u);
    for (size_t k = 0; k < one.size(); ++k) {
      const Op& want = placed[3 * i + k];
      EXPECT_EQ(one[k].name, want.name);
      EXPECT_EQ(one[k].kind, want.kind);
      EXPECT_EQ(one[k].vector, want.vector);
      EXPECT_EQ(one[k].role, want.role);
      EXPECT_EQ(one[k].m, want.m);
      EXPECT_EQ(one[k].k, want.k);
      EXPECT_EQ(one[k].n, want.n);
      EXPECT_EQ(one[k].rows, want.rows);
      EXPECT_EQ(one[k].cols, want.cols);
      EXPECT_EQ(one[k].count, want.count);
      EXPECT_EQ(one[k].weights_from_hbm, want.weights_from_hbm);
    }
  }
  EXPECT_TRUE(ValidatePrefillPrompts(prompts).ok());
  EXPECT_THAT(ValidatePrefillPrompts(std::vector<int64_t>{3, 1, -2}).message(),
              HasSubstr("prompt 2"));
}

TEST(Lowering, RejectsEmptyBatchesAndPrompts) {
  const ModelConfig m = MustLoad("gpt3-7b");
  const Parallelism p{.tp = 4, .pp = 1};
  EXPECT_EQ(LowerDecodeLayer(m, p, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LowerPrefillLayer(m, p, {}).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> with_empty = {5, 0};
  const absl::Status s = LowerPrefillLayer(m, p, with_empty).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("prompt 1"));
}

TEST(Lowering, RejectsParallelismThatDoesNotDivide) {
  const ModelConfig m = MustLoad("gpt3-7b");
  const std::vector<int64_t> prompts = {16};
  EXPECT_EQ(LowerDecodeLayer(m, {.tp = 3, .pp = 1}, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LowerPrefillLayer(m, {.tp = 1, .pp = 5}, prompts).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Lowering, LmHeadShardsTheVocabularyRoundingUp) {
  const Op head = LmHead(MustLoad("gpt3-7b"), {.tp = 4, .pp = 1}, 64);
  EXPECT_EQ(head.kind, OpKind::kGemm);
  EXPECT_EQ(head.name, "lm_head");
  EXPECT_EQ(head.m, 64);
  EXPECT_EQ(head.k, 4096);
  EXPECT_EQ(head.n, 12565);  // ceil(50257 / 4)
  EXPECT_TRUE(head.weights_from_hbm);
}

TEST(Lowering, Gpt3_7bTp4DeviceHoldsAbout3Point4GB) {
  // 32 layers x 12 h^2 / 4 x 2 B + one tied vocab matrix ceil(50257 / 4) x h x 2 B = 3.324e9.
  const int64_t h = 4096;
  const int64_t bytes = DeviceWeightBytes(MustLoad("gpt3-7b"), {.tp = 4, .pp = 1});
  EXPECT_EQ(bytes, 32 * (12 * h * h / 4) * 2 + 12565 * h * 2);
  EXPECT_NEAR(static_cast<double>(bytes), 3.4e9, 0.1e9);
}

TEST(Lowering, UntiedModelOnOneStageHoldsEmbeddingAndLmHead) {
  const ModelConfig m = MustLoad("llama2-7b");
  EXPECT_EQ(DeviceWeightBytes(m, {.tp = 1, .pp = 1}), m.Parameters() * 2);
  // Two stages: 16 layers and one vocabulary matrix each.
  EXPECT_EQ(DeviceWeightBytes(m, {.tp = 1, .pp = 2}),
            (16 * m.LayerParameters() + int64_t{32000} * 4096) * 2);
}

TEST(Lowering, Gpt3_175bStageHoldsAQuarterOfTheLayersAndOneVocabularyShard) {
  // Tied GPT3 over 4 stages: the first stage holds the embedding, the last a copy as LM head.
  const ModelConfig m = MustLoad("gpt3-175b");
  const int64_t vocab_shard = (50257 + 7) / 8 * int64_t{12288};
  EXPECT_EQ(DeviceWeightBytes(m, {.tp = 8, .pp = 4}),
            (24 * m.LayerParameters() / 8 + vocab_shard) * 2);
}

}  // namespace
}  // namespace neupims::models
