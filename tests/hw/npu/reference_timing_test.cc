// The reference simulator's NPU timing choices (issue 14), pinned by hand: GemmTiming::
// kBlockPipeline, ActivationTraffic::kDramRoundTrip and AttentionMapping::kSerialGemv.
#include <memory>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "hw/device.h"
#include "hw/npu/npu_model.h"

namespace neupims::hw {
namespace {

NpuSpec BlockPipelineSpec() {
  absl::StatusOr<DeviceConfig> device = LoadDeviceConfig("neupims");
  EXPECT_TRUE(device.ok()) << device.status();
  NpuSpec spec = device.ok() ? device->npu : NpuSpec{};
  spec.gemm_timing = GemmTiming::kBlockPipeline;
  spec.sram_bytes = int64_t{131} << 20;  // the reference's scratchpad: one tile per op
  return spec;
}

// GPT3-7B on TP 4, the QKV projection: K = 4096, N = 3 x 4096 / 4 = 3072, FP16, weights and
// activations in HBM. kb = 32, mb = 24: one block's pass = 32 x (128 + 16 x 23) = 15,872 cycles.
// BW = 32 channels x 32 B x (1 - tRFC / tREFI = 260 / 3900) = 955.7 B/cycle.
GemmShape Qkv(int64_t batch) { return {batch, 4096, 3072, true, true}; }

TEST(BlockPipelineGemm, OneBlockIsTheWeightStreamThenTheOutputs) {
  // B = 64: max((25,165,824 + 524,288) B / BW = 26,880.0, 15,872) + 393,216 B / BW = 411.4
  const NpuSpec spec = BlockPipelineSpec();
  for (const auto& model : {CreateAnalyticNpuModel(spec), CreateTiledNpuModel(spec)}) {
    absl::StatusOr<NpuOpResult> r = model->Gemm(Qkv(64));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->cycles, 27292) << model->name();
    EXPECT_TRUE(r->memory_bound);
    EXPECT_EQ(r->compute_cycles, 15872);
  }
}

TEST(BlockPipelineGemm, EachFurtherBlockOfRowsAddsOneComputePass) {
  // B = 256, two blocks: (25,165,824 + 2,097,152) / BW = 28,525.7, + 15,872, + 1,572,864 / BW
  // = 1,645.7.
  const NpuSpec spec = BlockPipelineSpec();
  absl::StatusOr<NpuOpResult> r = CreateAnalyticNpuModel(spec)->Gemm(Qkv(256));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cycles, 46044);
  EXPECT_EQ(r->compute_cycles, 2 * 15872);
}

TEST(BlockPipelineGemm, ComputeBoundWhenTheWeightsStreamFasterThanAPass) {
  // K = 4096, N = 128: 1 MiB of weights (1,097 cycles) against a pass of 32 x 128 = 4,096.
  const NpuSpec spec = BlockPipelineSpec();
  absl::StatusOr<NpuOpResult> r = CreateAnalyticNpuModel(spec)->Gemm({128, 4096, 128, true, false});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->memory_bound);
  EXPECT_EQ(r->cycles, 4096);
}

TEST(BlockPipelineGemm, CountsOtherThanTimeAreTheDefaultModels) {
  NpuSpec spec = BlockPipelineSpec();
  absl::StatusOr<NpuOpResult> reference = CreateAnalyticNpuModel(spec)->Gemm(Qkv(64));
  spec.gemm_timing = GemmTiming::kWeightStationary;
  absl::StatusOr<NpuOpResult> ours = CreateAnalyticNpuModel(spec)->Gemm(Qkv(64));
  ASSERT_TRUE(reference.ok() && ours.ok());
  EXPECT_EQ(reference->macs, ours->macs);
  EXPECT_EQ(reference->energy_j, ours->energy_j);
  EXPECT_EQ(reference->hbm_bytes, ours->hbm_bytes);
  EXPECT_NE(reference->cycles, ours->cycles);
}

// A 4096-element FP16 row: 16 KB through HBM for layernorm (read + write), 24 KB for a residual
// add (two reads + write); 128 rows at 955.7 B/cycle.
TEST(DramRoundTripVector, CostsOnlyItsHbmTraffic) {
  NpuSpec spec = BlockPipelineSpec();
  spec.activation_traffic = ActivationTraffic::kDramRoundTrip;
  const std::unique_ptr<NpuModel> model = CreateAnalyticNpuModel(spec);
  absl::StatusOr<NpuOpResult> ln = model->Vector({VectorOp::kLayerNorm, 128, 4096});
  absl::StatusOr<NpuOpResult> add = model->Vector({VectorOp::kAdd, 128, 4096});
  ASSERT_TRUE(ln.ok() && add.ok());
  EXPECT_EQ(ln->hbm_bytes, 128 * 16384);
  EXPECT_EQ(ln->cycles, 2195);  // 2,097,152 / 955.7 = 2,194.3
  EXPECT_EQ(add->hbm_bytes, 128 * 24576);
  EXPECT_EQ(add->cycles, 3292);  // 3,145,728 / 955.7 = 3,291.4
}

TEST(DramRoundTripVector, OnChipActivationsCostLanePassesAndNoTraffic) {
  const NpuSpec spec = BlockPipelineSpec();  // activation_traffic: on_chip
  absl::StatusOr<NpuOpResult> ln =
      CreateAnalyticNpuModel(spec)->Vector({VectorOp::kLayerNorm, 128, 4096});
  ASSERT_TRUE(ln.ok());
  EXPECT_EQ(ln->hbm_bytes, 0);
  // 16 rows per unit x (3 passes x 32 chunks + 2 reductions x (32 + 7)) = 16 x 174.
  EXPECT_EQ(ln->cycles, 16 * 174);
}

// Issue 14: per head at s = 310 about 255 + floor(s/8) + softmax + 10 + 271 ceil((s+127)/128)
// cycles (~1,400), while its K and V stream in ~166.
TEST(SerialGemvAttention, OneHeadAtS310IsTheSerialisedPreloads) {
  const SerialGemvHead h = SerialGemvHeadCycles(BlockPipelineSpec(), 310, 128);
  EXPECT_EQ(h.logit, 255 + 310 / 8);          // 293
  EXPECT_EQ(h.context, 10 + (255 + 16) * 4);  // ceil(437 / 128) = 4 preloads: 1,094
}

TEST(SerialGemvAttention, ALongHeadIsBoundByStreamingItsKeys) {
  // s = 4096: 255 + 512 = 767 cycles of preloads, but 1 MiB of keys at 955.7 B/cycle = 1,097.1.
  const SerialGemvHead h = SerialGemvHeadCycles(BlockPipelineSpec(), 4096, 128);
  EXPECT_EQ(h.logit, 1098);
  EXPECT_EQ(h.context, 10 + 271 * 33);  // 33 preloads outlast the stream
}

}  // namespace
}  // namespace neupims::hw
