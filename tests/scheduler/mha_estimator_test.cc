#include "scheduler/mha_estimator.h"

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "hw/device.h"
#include "hw/dram/hbm_spec.h"
#include "hw/pim/gemv_plan.h"
#include "hw/registry.h"

namespace neupims::scheduler {
namespace {

// GPT3-7B on TP4: E = 4096 / 4 = 1024, 32 / 4 = 8 heads of 128, a 1 KB page holds P = 512 FP16
// elements, B = 32 banks per channel, L_tile = 186 and L_GWRITE = 29 cycles.
Algorithm1Params Gpt3_7bTp4() {
  Algorithm1Params p;
  p.embedding = 1024;
  p.heads = 8;
  p.page_elements = 512;
  p.banks = 32;
  p.tile_cycles = 186;
  p.gwrite_cycles = 29;
  return p;
}

// Algorithm 1 with every division a ceiling:
//   K^T q : GWRITE x ceil(E/P)                       + tile x ceil(seq/B) x ceil(E/P)
//   S V   : GWRITE x ceil(seq/P) x heads             + tile x ceil((E/heads)/B) x ceil(seq/P) x
//   heads
// With E/P = 2 and (E/heads)/B = 128/32 = 4:
//   K part = 29 x 2 + 186 x ceil(seq/32) x 2 = 58 + 372 x ceil(seq/32)
//   V part = (29 + 186 x 4) x 8 x ceil(seq/512) = 773 x 8 x ceil(seq/512) = 6184 x ceil(seq/512)
TEST(Algorithm1Estimator, HandComputedValuesForGpt3_7bTp4) {
  Algorithm1Estimator est(Gpt3_7bTp4());
  // seq 1: 58 + 372 x 1 + 6184 x 1 = 6614.
  EXPECT_DOUBLE_EQ(est.Estimate(1), 6614);
  // seq 32: one key tile still: 58 + 372 + 6184 = 6614.
  EXPECT_DOUBLE_EQ(est.Estimate(32), 6614);
  // seq 33: two key tiles: 58 + 744 + 6184 = 6986.
  EXPECT_DOUBLE_EQ(est.Estimate(33), 6986);
  // seq 512: 16 key tiles: 58 + 5952 + 6184 = 12194.
  EXPECT_DOUBLE_EQ(est.Estimate(512), 12194);
  // seq 513: 17 key tiles and a second value page: 58 + 6324 + 12368 = 18750.
  EXPECT_DOUBLE_EQ(est.Estimate(513), 18750);
}

TEST(Algorithm1Estimator, StepsOnlyAtTileBoundariesAndNeverDecreases) {
  Algorithm1Estimator est(Gpt3_7bTp4());
  double prev = est.Estimate(1);
  for (int64_t seq = 2; seq <= 2048; ++seq) {
    const double cur = est.Estimate(seq);
    EXPECT_GE(cur, prev) << seq;
    const bool boundary = (seq - 1) % 32 == 0 || (seq - 1) % 512 == 0;
    if (!boundary) {
      EXPECT_EQ(cur, prev) << seq;
    }
    prev = cur;
  }
}

TEST(Algorithm1Params, FromHardwareOnTheDefaultHbmSpec) {
  const hw::HbmSpec spec;  // NeuPIMs Table 2
  const hw::AttentionShape dims{1, 8, 8, 128};
  const Algorithm1Params p = Algorithm1Params::FromHardware(spec, dims);
  EXPECT_EQ(p.embedding, 1024);
  EXPECT_EQ(p.heads, 8);
  EXPECT_EQ(p.page_elements, 512);
  EXPECT_EQ(p.banks, 32);
  EXPECT_DOUBLE_EQ(p.tile_cycles, 186);
  EXPECT_DOUBLE_EQ(p.gwrite_cycles, 29);
  Algorithm1Estimator est(p);
  EXPECT_DOUBLE_EQ(est.Estimate(513), 18750);
}

TEST(PimModelEstimator, AnswersWhatTheModelSaysAndRepeatsItself) {
  absl::StatusOr<hw::DeviceConfig> dev = hw::LoadDeviceConfig("neupims");
  ASSERT_TRUE(dev.ok()) << dev.status();
  absl::StatusOr<std::unique_ptr<hw::PimModel>> model = hw::CreatePimModel("analytic", *dev);
  ASSERT_TRUE(model.ok()) << model.status();
  const hw::AttentionShape dims{1, 8, 8, 128};
  PimModelEstimator est(model->get(), dims);
  double prev = 0;
  for (int64_t seq : {1, 32, 33, 300, 512, 513, 2048}) {
    hw::AttentionShape s = dims;
    s.seq_len = seq;
    auto want = (*model)->AttentionCycles(s);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_DOUBLE_EQ(est.Estimate(seq), static_cast<double>(*want)) << seq;
    EXPECT_DOUBLE_EQ(est.Estimate(seq), static_cast<double>(*want)) << seq;  // cached answer
    EXPECT_GE(est.Estimate(seq), prev) << seq;
    prev = est.Estimate(seq);
  }
  // seq_len < 1 is treated as 1.
  EXPECT_DOUBLE_EQ(est.Estimate(0), est.Estimate(1));
}

// EstimateFast is Estimate, bit for bit, whether or not the answer is memoised yet, for both
// estimators (Algorithm 1 memoises nothing: every call goes through Estimate).
TEST(MhaEstimator, EstimateFastIsEstimate) {
  absl::StatusOr<hw::DeviceConfig> dev = hw::LoadDeviceConfig("neupims");
  ASSERT_TRUE(dev.ok()) << dev.status();
  absl::StatusOr<std::unique_ptr<hw::PimModel>> model = hw::CreatePimModel("analytic", *dev);
  ASSERT_TRUE(model.ok()) << model.status();
  const hw::AttentionShape dims{1, 8, 8, 128};
  PimModelEstimator fast(model->get(), dims), reference(model->get(), dims);
  Algorithm1Estimator a1(Algorithm1Params{});
  for (int64_t seq : {0, 1, 32, 33, 300, 33, 2048, 0, 1, 4096, 300}) {
    EXPECT_EQ(fast.EstimateFast(seq), reference.Estimate(seq)) << seq;
    EXPECT_EQ(a1.EstimateFast(seq), a1.Estimate(seq)) << seq;
  }
}

}  // namespace
}  // namespace neupims::scheduler
