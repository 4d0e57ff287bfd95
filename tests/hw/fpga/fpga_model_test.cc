#include "hw/fpga/fpga_model.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/fpga/fpga_spec.h"

namespace neupims::hw::fpga {
namespace {

using ::testing::HasSubstr;

FpgaSpec Zu2() {
  absl::StatusOr<FpgaSpec> s = LoadFpgaSpec("zu2");
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// A spec with round numbers so closed forms are easy to write down.
FpgaSpec Toy() {
  FpgaSpec s;
  s.name = "toy";
  s.frequency_mhz = 100;
  s.ic_p = 8;  // 4 MACs along input channels
  s.oc_p = 4;
  s.h_p = 2;
  s.input_buffer_bytes = 1 << 20;
  s.weight_buffer_bytes = 1 << 20;
  s.output_buffer_bytes = 1 << 20;
  s.ddr_peak_gb_per_s = 1.6;  // 16 bytes per 100 MHz cycle
  s.ddr_efficiency = 0.5;     // 8 bytes per cycle
  s.pool_ops_per_cycle = 8;
  s.misc_ops_per_cycle = 8;
  s.group_overhead_cycles = 100;
  s.power_w = 2;
  return s;
}

ConvOp Conv(int64_t ic, int64_t oc, int64_t h, int64_t w, int64_t k, int64_t stride = 1) {
  const int64_t pad = k / 2;
  return {.in = {ic, h, w},
          .out = {oc, (h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1},
          .kernel_h = k,
          .kernel_w = k,
          .stride_h = stride,
          .stride_w = stride};
}

TEST(FpgaSpecTest, PeaksAreThePapers) {
  EXPECT_NEAR(Zu2().peak_ops_per_s(), 380.16e9, 1e6);  // 24*12*4 ops at 330 MHz
  absl::StatusOr<FpgaSpec> zu9 = LoadFpgaSpec("zu9");
  ASSERT_TRUE(zu9.ok()) << zu9.status();
  EXPECT_NEAR(zu9->peak_ops_per_s(), 4.055e12, 1e9);  // 3 cores x 32*16*8 at 330 MHz
  EXPECT_EQ(Zu2().macs_per_cycle(), 576);
}

TEST(FpgaSpecTest, UnknownBuiltinListsTheChoices) {
  absl::StatusOr<FpgaSpec> s = LoadFpgaSpec("zu7");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("zu2"));
  EXPECT_THAT(s.status().message(), HasSubstr("zu9-500"));
}

TEST(FpgaModelTest, OneTileConvMatchesTheClosedForm) {
  const FpgaSpec s = Toy();
  // 1x1 conv, 4 in, 4 out channels, 2x8 map: one tile of h_p=2 rows, oc_p=4 channels, T_w=8.
  const ConvOp c = Conv(4, 4, 2, 8, 1);
  absl::StatusOr<GroupCost> cost = FpgaModel(s).Cost({Fusion::kSingle, {Op::Conv(c)}});
  ASSERT_TRUE(cost.ok()) << cost.status();
  // CONV: ceil(4/4) input-channel steps x 1 kernel position x 8 columns.
  EXPECT_EQ(cost->conv_cycles, 8);
  EXPECT_EQ(cost->load_bytes, 16 + 64);  // weights 4x4, input 4x2x8
  EXPECT_EQ(cost->save_bytes, 64);
  // overhead + load(0) / 8 B + max(conv, nothing to move) + save(last) / 8 B
  EXPECT_EQ(cost->cycles, 100 + 10 + 8 + 8);
  EXPECT_DOUBLE_EQ(cost->time_s, 126 / 100e6);
  EXPECT_DOUBLE_EQ(cost->energy_j, 2 * 126 / 100e6);
  EXPECT_DOUBLE_EQ(cost->ops, 2.0 * 4 * 4 * 2 * 8);
}

TEST(FpgaModelTest, ConvTimeScalesWithCeilOfChannelsOverParallelism) {
  const FpgaSpec s = Zu2();
  const FpgaModel m(s);
  // 3x3, 56x56: 64 input channels need ceil(64/12) = 6 passes, 72 need 6 as well.
  absl::StatusOr<GroupCost> a = m.Cost({Fusion::kSingle, {Op::Conv(Conv(64, 96, 56, 56, 3))}});
  absl::StatusOr<GroupCost> b = m.Cost({Fusion::kSingle, {Op::Conv(Conv(72, 96, 56, 56, 3))}});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->conv_cycles, b->conv_cycles);
  // 96/12 output-channel tiles x 56/4 row tiles x 6 passes x 9 kernel positions x 56 columns.
  EXPECT_EQ(a->conv_cycles, 8 * 14 * 6 * 9 * 56);
}

TEST(FpgaModelTest, OutputBufferLimitsTheTileWidth) {
  FpgaSpec s = Toy();
  s.output_buffer_bytes = 2 * 4 * 10;  // eq. 6: T_w * T_h * T_oc <= B_out -> T_w = 10
  absl::StatusOr<GroupCost> cost =
      FpgaModel(s).Cost({Fusion::kSingle, {Op::Conv(Conv(4, 4, 2, 25, 1))}});
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_EQ(cost->tiles, 3);  // 25 columns in tiles of 10, 10, 5
}

TEST(FpgaModelTest, WeightTileLargerThanTheBufferIsRefused) {
  FpgaSpec s = Toy();
  s.weight_buffer_bytes = 8 * 3 * 3 * 4 - 1;  // eq. 6: T_ic * Kw * Kh * T_oc must fit
  absl::StatusOr<GroupCost> cost =
      FpgaModel(s).Cost({Fusion::kSingle, {Op::Conv(Conv(8, 8, 8, 8, 3))}});
  ASSERT_FALSE(cost.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(cost.status()));
  EXPECT_THAT(cost.status().message(), HasSubstr("B_weights"));
}

// A graph file may give every dimension up to 2^20; a 2^20 x 2^20 output on ZU2 is ~2.3e8 tiles,
// which the per-tile model would hold in ~10 GB and walk for about a minute. Such a layer does
// not fit the model (ResourceExhausted, as a weight tile too large for B_weights: the compiler
// and the profiler then treat the layer as one the device cannot run), naming the count, before
// any tile is built; a 4K frame stays far below the limit.
TEST(FpgaModelTest, AConvolutionOfTooManyTilesIsRefusedBeforeAnyIsBuilt) {
  const FpgaSpec s = Zu2();
  absl::StatusOr<GroupCost> cost =
      FpgaModel(s).Cost({Fusion::kSingle, {Op::Conv(Conv(3, 4, 1 << 20, 1 << 20, 3))}});
  ASSERT_FALSE(cost.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(cost.status())) << cost.status();
  EXPECT_THAT(cost.status().message(), HasSubstr("tiles"));
  cost = FpgaModel(s).Cost({Fusion::kSingle, {Op::Conv(Conv(3, 64, 2160, 3840, 3))}});
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_LE(cost->tiles, kMaxTilesPerGroup);
  // A pooling whose rows are too wide for B_in takes one channel a step: 10^5 channels of
  // 25,000 slabs.
  const PoolOp wide{.in = {100000, 100000, 40000},
                    .out = {100000, 50000, 20000},
                    .kernel_h = 2,
                    .kernel_w = 2,
                    .stride_h = 2,
                    .stride_w = 2};
  cost = FpgaModel(s).Cost({Fusion::kSingle, {Op::Pool(wide)}});
  ASSERT_FALSE(cost.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(cost.status())) << cost.status();
  EXPECT_THAT(cost.status().message(), HasSubstr("pooling"));
}

TEST(FpgaModelTest, ConvPoolFusionSkipsTheIntermediateRoundTrip) {
  const FpgaModel m(Zu2());
  const ConvOp c = Conv(64, 64, 112, 112, 3);
  const PoolOp p{
      .in = c.out, .out = {64, 56, 56}, .kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2};
  absl::StatusOr<GroupCost> conv = m.Cost({Fusion::kSingle, {Op::Conv(c)}});
  absl::StatusOr<GroupCost> pool = m.Cost({Fusion::kSingle, {Op::Pool(p)}});
  absl::StatusOr<GroupCost> fused = m.Cost({Fusion::kConvPool, {Op::Conv(c), Op::Pool(p)}});
  ASSERT_TRUE(conv.ok() && pool.ok() && fused.ok());
  EXPECT_EQ(fused->save_bytes, 64 * 56 * 56);
  EXPECT_EQ(fused->load_bytes, conv->load_bytes);
  EXPECT_LT(fused->cycles, conv->cycles + pool->cycles);
  EXPECT_GE(fused->cycles, conv->cycles - Zu2().group_overhead_cycles);
}

TEST(FpgaModelTest, ConvEltwiseFusionLoadsOnlyTheOtherOperand) {
  const FpgaModel m(Zu2());
  const ConvOp c = Conv(64, 256, 56, 56, 1);
  const MiscOp add{.out = c.out, .inputs = 2};
  absl::StatusOr<GroupCost> conv = m.Cost({Fusion::kSingle, {Op::Conv(c)}});
  absl::StatusOr<GroupCost> alone = m.Cost({Fusion::kSingle, {Op::Misc(add)}});
  absl::StatusOr<GroupCost> fused = m.Cost({Fusion::kConvEltwise, {Op::Conv(c), Op::Misc(add)}});
  ASSERT_TRUE(conv.ok() && alone.ok() && fused.ok());
  const int64_t tensor = 256 * 56 * 56;
  EXPECT_EQ(alone->load_bytes, 2 * tensor);
  EXPECT_EQ(fused->load_bytes, conv->load_bytes + tensor);
  EXPECT_EQ(fused->save_bytes, tensor);
  EXPECT_LT(fused->cycles, conv->cycles + alone->cycles);
}

TEST(FpgaModelTest, HorizontalFusionLoadsTheSharedInputOnce) {
  const FpgaModel m(Zu2());
  const ConvOp a = Conv(192, 64, 28, 28, 1);
  const ConvOp b = Conv(192, 96, 28, 28, 1);
  absl::StatusOr<GroupCost> ca = m.Cost({Fusion::kSingle, {Op::Conv(a)}});
  absl::StatusOr<GroupCost> cb = m.Cost({Fusion::kSingle, {Op::Conv(b)}});
  absl::StatusOr<GroupCost> fused = m.Cost({Fusion::kHorizontal, {Op::Conv(a), Op::Conv(b)}});
  ASSERT_TRUE(ca.ok() && cb.ok() && fused.ok()) << fused.status();
  const int64_t input = 192 * 28 * 28, weights = 192 * (64 + 96);
  EXPECT_EQ(fused->load_bytes, input + weights);
  EXPECT_EQ(fused->conv_cycles, ca->conv_cycles + cb->conv_cycles);
  EXPECT_LT(fused->cycles, ca->cycles + cb->cycles);
}

TEST(FpgaModelTest, ConvConvNeedsBothWeightsOnChip) {
  const FpgaModel m(Zu2());
  // 512 -> 512 3x3 twice: 2 x 2.4 MB of weights cannot stay in a 156 KB buffer.
  const ConvOp a = Conv(512, 512, 14, 14, 3);
  absl::StatusOr<GroupCost> big = m.Cost({Fusion::kConvConv, {Op::Conv(a), Op::Conv(a)}});
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
  const ConvOp x = Conv(64, 32, 28, 28, 1), y = Conv(32, 64, 28, 28, 3);
  absl::StatusOr<GroupCost> small = m.Cost({Fusion::kConvConv, {Op::Conv(x), Op::Conv(y)}});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->save_bytes, 64 * 28 * 28);  // only the second output leaves the chip
}

TEST(FpgaModelTest, PoolConvFusionKeepsThePooledRowsOnChip) {
  const FpgaModel m(Zu2());
  const PoolOp p{.in = {480, 14, 14}, .out = {480, 14, 14}, .kernel_h = 3, .kernel_w = 3};
  const ConvOp c = Conv(480, 64, 14, 14, 1);
  absl::StatusOr<GroupCost> pool = m.Cost({Fusion::kSingle, {Op::Pool(p)}});
  absl::StatusOr<GroupCost> conv = m.Cost({Fusion::kSingle, {Op::Conv(c)}});
  absl::StatusOr<GroupCost> fused = m.Cost({Fusion::kPoolConv, {Op::Pool(p), Op::Conv(c)}});
  ASSERT_TRUE(pool.ok() && conv.ok() && fused.ok()) << fused.status();
  EXPECT_EQ(fused->save_bytes, 64 * 14 * 14);
  EXPECT_LT(fused->load_bytes, pool->load_bytes + conv->load_bytes);
  EXPECT_LT(fused->cycles, pool->cycles + conv->cycles);
}

TEST(FpgaModelTest, CoresShareTheDdr) {
  FpgaSpec s = Toy();
  s.cores = 3;
  const MiscOp add{.out = {64, 32, 32}, .inputs = 2};
  absl::StatusOr<GroupCost> one = FpgaModel(s).Cost({Fusion::kSingle, {Op::Misc(add)}}, 1);
  absl::StatusOr<GroupCost> three = FpgaModel(s).Cost({Fusion::kSingle, {Op::Misc(add)}}, 3);
  ASSERT_TRUE(one.ok() && three.ok());
  // Each core gets a third of the DDR: its transfers take three times as long.
  EXPECT_EQ(three->ddr_cycles, 3 * one->ddr_cycles);
  EXPECT_EQ(one->ddr_cycles, (2 + 1) * 64 * 32 * 32 / 8);
  EXPECT_GT(three->cycles, 2 * one->cycles);
  EXPECT_FALSE(FpgaModel(s).Cost({Fusion::kSingle, {Op::Misc(add)}}, 4).ok());
}

TEST(FpgaModelTest, MalformedGroupsAreInvalidArguments) {
  const FpgaModel m(Toy());
  const ConvOp c = Conv(4, 4, 4, 4, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(m.Cost({Fusion::kConvPool, {Op::Conv(c)}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(m.Cost({Fusion::kSingle, {}}).status()));
  const PoolOp wrong{.in = {8, 4, 4},
                     .out = {8, 2, 2},
                     .kernel_h = 2,
                     .kernel_w = 2,
                     .stride_h = 2,
                     .stride_w = 2};
  EXPECT_TRUE(absl::IsInvalidArgument(
      m.Cost({Fusion::kConvPool, {Op::Conv(c), Op::Pool(wrong)}}).status()));
  ConvOp bad = c;
  bad.groups = 3;
  EXPECT_TRUE(absl::IsInvalidArgument(m.Cost({Fusion::kSingle, {Op::Conv(bad)}}).status()));
}

}  // namespace
}  // namespace neupims::hw::fpga
