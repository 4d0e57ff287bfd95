#include "hw/npu/npu_model.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/npu/npu_spec.h"

namespace neupims::hw {
namespace {

using ::testing::HasSubstr;

// NeuPIMs Table 2 NPU with explicit numbers, independent of the config files.
NpuSpec TestSpec() {
  NpuSpec s;
  s.frequency_mhz = 1000;
  s.systolic_arrays = 8;
  s.array_rows = 128;
  s.array_cols = 128;
  s.vector_units = 8;
  s.vector_lanes = 128;
  s.sram_bytes = 32 << 20;
  s.element_bytes = 2;
  s.hbm_bytes_per_cycle = 1024;
  s.energy = {.mac_pj = 0.3,
              .sram_pj_per_byte = 0.5,
              .vector_pj_per_element_pass = 0.4,
              .static_power_w = 5.0};
  s.vector_ops[static_cast<int>(VectorOp::kSoftmax)] = {.passes = 3, .reductions = 2};
  s.vector_ops[static_cast<int>(VectorOp::kLayerNorm)] = {.passes = 2, .reductions = 2};
  s.vector_ops[static_cast<int>(VectorOp::kGelu)] = {.passes = 4, .reductions = 0};
  s.vector_ops[static_cast<int>(VectorOp::kAdd)] = {.passes = 1, .reductions = 0};
  s.vector_ops[static_cast<int>(VectorOp::kReduce)] = {.passes = 1, .reductions = 0};
  return s;
}

NpuSpec OneArraySpec() {
  NpuSpec s = TestSpec();
  s.systolic_arrays = 1;
  return s;
}

NpuOpResult MustGemm(const NpuModel& model, const GemmShape& shape, const NpuContext& ctx = {}) {
  absl::StatusOr<NpuOpResult> r = model.Gemm(shape, ctx);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : NpuOpResult{};
}

class BothModels : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<NpuModel> Make(const NpuSpec& spec) const {
    return GetParam() == "tiled" ? CreateTiledNpuModel(spec) : CreateAnalyticNpuModel(spec);
  }
};

INSTANTIATE_TEST_SUITE_P(NpuGemm, BothModels, ::testing::Values("tiled", "analytic"),
                         [](const auto& info) { return info.param; });

TEST(NpuModel, NamesMatchRegistry) {
  EXPECT_STREQ(CreateTiledNpuModel(TestSpec())->name(), "tiled");
  EXPECT_STREQ(CreateAnalyticNpuModel(TestSpec())->name(), "analytic");
  EXPECT_EQ(CreateTiledNpuModel(TestSpec())->spec().systolic_arrays, 8);
}

// One 128x128 tile on one array: DMA 32 KiB at 1024 B/cycle (32), stream 128 rows (128), one
// fill/drain of 128 + 128 - 1 (255).
TEST_P(BothModels, SingleTileOnOneArrayHasKnownCycles) {
  auto model = Make(OneArraySpec());
  NpuOpResult r = MustGemm(*model, {.m = 128, .k = 128, .n = 128});
  EXPECT_EQ(r.cycles, 32 + 128 + 255);
  EXPECT_EQ(r.compute_cycles, 128 + 255);
  EXPECT_EQ(r.memory_cycles, 32);
  EXPECT_FALSE(r.memory_bound);
  EXPECT_EQ(r.macs, 128 * 128 * 128);
  EXPECT_EQ(r.hbm_bytes, 128 * 128 * 2);
  EXPECT_EQ(r.array_busy_cycles, 128);
  EXPECT_DOUBLE_EQ(r.ArrayUtilization(model->spec()), 128.0 / 415.0);
  // SRAM: weights written + read (2 x 32 KiB), activations read (32 KiB), outputs written once
  // (one K tile: 32 KiB).
  EXPECT_EQ(r.sram_bytes, 4 * 32768);
  EXPECT_NEAR(r.energy_j, (128.0 * 128 * 128 * 0.3 + 4 * 32768 * 0.5) * 1e-12, 1e-18);
}

// Activations in and outputs out add one DMA each before and after the pipeline.
TEST_P(BothModels, ActivationsFromHbmAddInputAndOutputDma) {
  auto model = Make(OneArraySpec());
  NpuOpResult r = MustGemm(*model, {.m = 128, .k = 128, .n = 128, .activations_from_hbm = true});
  EXPECT_EQ(r.cycles, 32 + 32 + 128 + 255 + 32);
  EXPECT_EQ(r.hbm_bytes, 3 * 32768);
  EXPECT_EQ(r.memory_cycles, 96);
}

// A decode GEMV: short rows still occupy a tile for array_rows cycles (weight preload).
TEST_P(BothModels, ShortStreamStillPaysWeightPreload) {
  auto model = Make(OneArraySpec());
  NpuOpResult r = MustGemm(*model, {.m = 1, .k = 128, .n = 128});
  EXPECT_EQ(r.cycles, 32 + 128 + 255);
  EXPECT_EQ(r.array_busy_cycles, 1);
}

// Edge tiles carry only the rows/cols they use: k = n = 100 is one 100x100 tile.
TEST_P(BothModels, EdgeTileMovesOnlyItsBytes) {
  auto model = Make(OneArraySpec());
  NpuOpResult r = MustGemm(*model, {.m = 128, .k = 100, .n = 100});
  EXPECT_EQ(r.hbm_bytes, 100 * 100 * 2);
  EXPECT_EQ(r.memory_cycles, 20);  // 20000 / 1024 = 19.5 -> 20
  EXPECT_EQ(r.cycles, 20 + 128 + 255);
}

// On-chip weights (prefill attention's K^T): no HBM traffic, pure compute.
TEST_P(BothModels, OnChipWeightsNeedNoHbm) {
  auto model = Make(OneArraySpec());
  NpuOpResult r = MustGemm(*model, {.m = 256, .k = 128, .n = 128, .weights_from_hbm = false});
  EXPECT_EQ(r.hbm_bytes, 0);
  EXPECT_EQ(r.memory_cycles, 0);
  EXPECT_EQ(r.cycles, 256 + 255);
}

// k = n = 128 with sram 32 MiB: a pass holds 16 MiB / 512 B = 32768 rows, so m = 70000 takes
// 3 passes of ceil(70000 / 3) = 23334 rows (the last 23332); the weight tile is re-read each pass.
// Pipeline on one array: DMA 32, then the three slots back to back.
TEST_P(BothModels, RowsBeyondScratchpadSplitIntoPassesAndRereadWeights) {
  auto model = Make(OneArraySpec());
  NpuOpResult r = MustGemm(*model, {.m = 70000, .k = 128, .n = 128});
  EXPECT_EQ(r.hbm_bytes, 3 * 32768);
  EXPECT_EQ(r.cycles, 32 + 70000 + 255);
  EXPECT_EQ(r.array_busy_cycles, 70000);
}

// Eight 128x128 tiles over eight arrays: array a starts after a+1 DMAs of 32 cycles.
TEST_P(BothModels, TilesSpreadOverArraysWithStaggeredStart) {
  auto model = Make(TestSpec());
  NpuOpResult r = MustGemm(*model, {.m = 512, .k = 128, .n = 1024});
  EXPECT_EQ(r.cycles, 8 * 32 + 512 + 255);
  EXPECT_EQ(r.compute_cycles, 512 + 255);
  EXPECT_EQ(r.array_busy_cycles, 8 * 512);
  EXPECT_DOUBLE_EQ(r.ArrayUtilization(model->spec()),
                   512.0 * 128 * 1024 / (8.0 * 128 * 128 * (8 * 32 + 512 + 255)));
}

TEST_P(BothModels, DecodeGemvIsMemoryBound) {
  auto model = Make(TestSpec());
  // One token through a 4096 x 12288 QKV projection: 96 MiB of weights.
  NpuOpResult r = MustGemm(*model, {.m = 1, .k = 4096, .n = 12288});
  EXPECT_TRUE(r.memory_bound);
  EXPECT_EQ(r.memory_cycles, 4096 * 12288 * 2 / 1024);
  EXPECT_GE(r.cycles, r.memory_cycles);
  EXPECT_LT(r.cycles, r.memory_cycles + 1000);
  EXPECT_LT(r.ArrayUtilization(model->spec()), 0.01);
}

TEST_P(BothModels, LargeBatchIsComputeBound) {
  auto model = Make(TestSpec());
  NpuOpResult r = MustGemm(*model, {.m = 2048, .k = 4096, .n = 4096});
  EXPECT_FALSE(r.memory_bound);
  EXPECT_GE(r.cycles, r.compute_cycles);
  EXPECT_LT(r.cycles, r.compute_cycles * 1.01);
  EXPECT_GT(r.ArrayUtilization(model->spec()), 0.95);
}

TEST_P(BothModels, LessBandwidthSlowsMemoryBoundOps) {
  auto model = Make(TestSpec());
  const GemmShape gemv{.m = 1, .k = 4096, .n = 4096};
  NpuOpResult full = MustGemm(*model, gemv);
  NpuOpResult third = MustGemm(*model, gemv, {.bandwidth_fraction = 0.3});
  EXPECT_NEAR(static_cast<double>(third.memory_cycles) / full.memory_cycles, 1 / 0.3, 0.01);
  EXPECT_GT(third.cycles, 3 * full.cycles);
  EXPECT_EQ(third.hbm_bytes, full.hbm_bytes);
  EXPECT_DOUBLE_EQ(third.energy_j, full.energy_j);
}

TEST_P(BothModels, InvalidShapeIsInvalidArgumentNamingTheField) {
  auto model = Make(TestSpec());
  struct Case {
    GemmShape shape;
    NpuContext ctx;
    const char* field;
  };
  const Case cases[] = {
      {{.m = 0, .k = 1, .n = 1}, {}, "GemmShape.m"},
      {{.m = 1, .k = -1, .n = 1}, {}, "GemmShape.k"},
      {{.m = 1, .k = 1, .n = 0}, {}, "GemmShape.n"},
      {{}, {.bandwidth_fraction = 0}, "bandwidth_fraction"},
      {{}, {.bandwidth_fraction = 1.5}, "bandwidth_fraction"},
      {{}, {.bandwidth_fraction = std::nan("")}, "bandwidth_fraction"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<NpuOpResult> r = model->Gemm(c.shape, c.ctx);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(c.field));
  }
  for (const VectorShape& v :
       {VectorShape{.rows = 0, .cols = 1}, VectorShape{.rows = 1, .cols = 0}}) {
    absl::StatusOr<NpuOpResult> r = model->Vector(v);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(),
                HasSubstr(v.rows == 0 ? "VectorShape.rows" : "VectorShape.cols"));
  }
}

TEST(NpuGemm, TiledAndAnalyticAgreeWithin5Percent) {
  auto tiled = CreateTiledNpuModel(TestSpec());
  auto analytic = CreateAnalyticNpuModel(TestSpec());
  for (int64_t m : {1, 8, 64, 256, 512, 2048}) {
    for (int64_t k : {128, 1000, 4096, 12288}) {
      for (int64_t n : {128, 1000, 4096, 12288}) {
        for (double bw : {1.0, 0.3}) {
          for (bool act : {false, true}) {
            const GemmShape shape{.m = m, .k = k, .n = n, .activations_from_hbm = act};
            const NpuContext ctx{.bandwidth_fraction = bw};
            NpuOpResult t = MustGemm(*tiled, shape, ctx);
            NpuOpResult a = MustGemm(*analytic, shape, ctx);
            const std::string where =
                absl::StrCat("m=", m, " k=", k, " n=", n, " bw=", bw, " act=", act,
                             " tiled=", t.cycles, " analytic=", a.cycles);
            EXPECT_NEAR(static_cast<double>(a.cycles) / t.cycles, 1.0, 0.05) << where;
            // Both are at least as slow as either bound alone.
            EXPECT_GE(t.cycles, std::max(t.compute_cycles, t.memory_cycles)) << where;
            EXPECT_GE(a.cycles, std::max(a.compute_cycles, a.memory_cycles)) << where;
            // Everything but cycles is shared.
            EXPECT_EQ(t.hbm_bytes, a.hbm_bytes) << where;
            EXPECT_EQ(t.compute_cycles, a.compute_cycles) << where;
            EXPECT_EQ(t.memory_cycles, a.memory_cycles) << where;
          }
        }
      }
    }
  }
}

TEST(NpuGemm, TiledModelHandlesLargestGemmQuickly) {
  auto tiled = CreateTiledNpuModel(TestSpec());
  const auto start = std::chrono::steady_clock::now();
  NpuOpResult r = MustGemm(*tiled, {.m = 4096, .k = 12288, .n = 49152});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  // k + n = 61440 columns of activations and outputs leave room for only 136 rows per pass in
  // half the scratchpad: 31 passes, each re-reading 1.2 GB of weights.
  EXPECT_EQ(r.hbm_bytes, int64_t{31} * 12288 * 49152 * 2);
  EXPECT_GE(r.cycles, std::max(r.compute_cycles, r.memory_cycles));
}

// softmax: 3 passes + 2 reductions over 1000 columns on 128 lanes: ceil(1000/128) = 8 chunks,
// log2(128) = 7 tree steps: 3*8 + 2*(8+7) = 54 cycles per row; 16 rows on 8 units = 2 rounds.
TEST(NpuVector, SoftmaxHandComputed) {
  auto model = CreateTiledNpuModel(TestSpec());
  absl::StatusOr<NpuOpResult> r =
      model->Vector({.op = VectorOp::kSoftmax, .rows = 16, .cols = 1000});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cycles, 2 * 54);
  EXPECT_EQ(r->vector_busy_cycles, 16 * 54);
  EXPECT_EQ(r->hbm_bytes, 0);
  EXPECT_EQ(r->macs, 0);
  EXPECT_EQ(r->sram_bytes, 16 * 1000 * 2 * 6);  // 5 sweeps read + 1 write
  EXPECT_NEAR(r->energy_j, (16.0 * 1000 * 5 * 0.4 + 16.0 * 1000 * 2 * 6 * 0.5) * 1e-12, 1e-18);
}

// add: one pass over 4096 columns = 32 cycles per row; 9 rows on 8 units = 2 rounds.
TEST(NpuVector, ElementwiseAddHandComputed) {
  auto model = CreateAnalyticNpuModel(TestSpec());
  absl::StatusOr<NpuOpResult> r = model->Vector({.op = VectorOp::kAdd, .rows = 9, .cols = 4096});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cycles, 2 * 32);
  EXPECT_EQ(r->vector_busy_cycles, 9 * 32);
  EXPECT_FALSE(r->memory_bound);
}

TEST(NpuVector, BothModelsAgreeOnVectorOps) {
  auto tiled = CreateTiledNpuModel(TestSpec());
  auto analytic = CreateAnalyticNpuModel(TestSpec());
  for (int i = 0; i < kNumVectorOps; ++i) {
    const VectorShape v{.op = static_cast<VectorOp>(i), .rows = 37, .cols = 5000};
    EXPECT_EQ(tiled->Vector(v)->cycles, analytic->Vector(v)->cycles) << VectorOpName(v.op);
  }
}

TEST(NpuSpec, VectorOpNamesRoundTrip) {
  for (int i = 0; i < kNumVectorOps; ++i) {
    absl::StatusOr<VectorOp> op = VectorOpNames().Parse(VectorOpName(static_cast<VectorOp>(i)));
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ(static_cast<int>(*op), i);
  }
  EXPECT_FALSE(VectorOpNames().Parse("matmul").ok());
  EXPECT_STREQ(VectorOpName(VectorOp::kLayerNorm), "layernorm");
}

constexpr char kNpuJson[] = R"({"npu": {
  "frequency_mhz": 1000, "systolic_arrays": 8, "array_rows": 128, "array_cols": 128,
  "vector_units": 8, "vector_lanes": 128, "sram_bytes": 33554432, "element_bytes": 2,
  "vector_ops": {
    "softmax": {"passes": 3, "reductions": 2}, "layernorm": {"passes": 2, "reductions": 2},
    "gelu": {"passes": 4, "reductions": 0}, "add": {"passes": 1, "reductions": 0},
    "reduce": {"passes": 1, "reductions": 0}},
  "energy": {"mac_pj": 0.3, "sram_pj_per_byte": 0.5, "vector_pj_per_element_pass": 0.4,
             "static_power_w": 5.0}}})";

absl::Status ParseText(const std::string& text, NpuSpec* spec) {
  auto doc = ConfigDocument::FromString(text, "test.json");
  if (!doc.ok()) return doc.status();
  ParseNpuSpec((*doc)->Root().Child("npu"), spec);
  return (*doc)->status();
}

TEST(NpuSpec, ParsesEveryField) {
  NpuSpec spec;
  ASSERT_TRUE(ParseText(kNpuJson, &spec).ok());
  EXPECT_EQ(spec.systolic_arrays, 8);
  EXPECT_EQ(spec.sram_bytes, 32 << 20);
  EXPECT_EQ(spec.vector_ops[static_cast<int>(VectorOp::kSoftmax)].passes, 3);
  EXPECT_EQ(spec.vector_ops[static_cast<int>(VectorOp::kLayerNorm)].reductions, 2);
  EXPECT_EQ(spec.vector_ops[static_cast<int>(VectorOp::kGelu)].passes, 4);
  EXPECT_DOUBLE_EQ(spec.energy.vector_pj_per_element_pass, 0.4);
  EXPECT_TRUE(ValidateNpuSpec(spec).ok());
}

TEST(NpuSpec, ParseErrorsNameTheField) {
  struct Case {
    std::string from, to, expected;
  };
  const Case cases[] = {
      {R"("softmax": {"passes": 3)", R"("softmax": {"passes": -1)",
       "npu.vector_ops.softmax.passes"},
      {R"("frequency_mhz": 1000,)", R"("frequency_mhz": 1000, "bogus": 1,)",
       "unknown field 'npu.bogus'"},
      {R"("gelu": {"passes": 4, "reductions": 0},)", "",
       "missing required field 'npu.vector_ops.gelu'"},
      {R"("reduce": {"passes": 1, "reductions": 0})",
       R"("reduce": {"passes": 1, "reductions": 0, "x": 1})",
       "unknown field 'npu.vector_ops.reduce.x'"},
      {R"("static_power_w": 5.0)", R"("static_power_w": -5.0)", "npu.energy.static_power_w"},
      {R"("element_bytes": 2,)", "", "missing required field 'npu.element_bytes'"},
      {R"("array_rows": 128)", R"("array_rows": 12.5)", "npu.array_rows"},
  };
  for (const Case& c : cases) {
    const std::string text = absl::StrReplaceAll(kNpuJson, {{c.from, c.to}});
    ASSERT_NE(text, kNpuJson) << c.from;
    NpuSpec spec;
    absl::Status s = ParseText(text, &spec);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.expected;
    EXPECT_THAT(s.message(), HasSubstr(c.expected));
  }
}

TEST(NpuSpec, ValidateRejectsScratchpadTooSmallForWeightBuffers) {
  NpuSpec spec = TestSpec();
  EXPECT_TRUE(ValidateNpuSpec(spec).ok());
  spec.sram_bytes = 512 << 10;  // half = 256 KiB < 2 x 8 x 32 KiB
  absl::Status s = ValidateNpuSpec(spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("npu.sram_bytes"));
  spec = TestSpec();
  spec.energy.mac_pj = -1;
  EXPECT_THAT(ValidateNpuSpec(spec).message(), HasSubstr("npu.energy.mac_pj"));
}

TEST(NpuModel, TiledModelRefusesGemmsBeyondItsTileLimitAndTheAnalyticOneRunsThem) {
  // 1,024 x 1,024 weight tiles per pass, 256 passes (32 rows of X fit the scratchpad): 2^28
  // tile-passes, over the tile-by-tile limit of 2^26.
  const GemmShape shape{8192, 131072, 131072, true, false};
  const absl::StatusOr<NpuOpResult> tiled = CreateTiledNpuModel(TestSpec())->Gemm(shape);
  EXPECT_EQ(tiled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tiled.status().message(), HasSubstr("268435456 weight-tile passes"));
  const absl::StatusOr<NpuOpResult> analytic = CreateAnalyticNpuModel(TestSpec())->Gemm(shape);
  ASSERT_TRUE(analytic.ok()) << analytic.status();
  EXPECT_EQ(analytic->macs, int64_t{8192} * 131072 * 131072);
}

}  // namespace
}  // namespace neupims::hw
