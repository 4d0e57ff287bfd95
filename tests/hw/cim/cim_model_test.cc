#include "hw/cim/cim_model.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::hw::cim {
namespace {

using ::testing::HasSubstr;

CimSpec NeuroSim() {
  absl::StatusOr<CimSpec> s = LoadCimSpec("neurosim");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.value_or(CimSpec{});
}

TEST(CimSpecTest, BuiltinHasNeuroSimDefaults) {
  const CimSpec s = NeuroSim();
  EXPECT_EQ(s.cell, "1T1R");
  EXPECT_EQ(s.technology_nm, 22);
  EXPECT_EQ(s.array_rows, 128);
  EXPECT_EQ(s.array_cols, 128);
  EXPECT_EQ(s.cell_bits, 2);
  EXPECT_EQ(s.adc_bits, 5);
  EXPECT_EQ(s.columns_per_adc, 8);
  EXPECT_EQ(s.weight_bits, 8);
  EXPECT_EQ(s.input_bits, 8);
  EXPECT_DOUBLE_EQ(s.read_pulse_s, 10e-9);
}

TEST(CimModelTest, KxKSubMatrixMappingCountsArrays) {
  const CimModel m(NeuroSim());
  // 3x3, IC 256, OC 512: 9 * ceil(256/128) * ceil(512*4/128) = 9 * 2 * 16.
  const ArrayMapping a = m.Map(
      {.in_channels = 256, .out_channels = 512, .kernel_h = 3, .kernel_w = 3, .out_pixels = 196});
  EXPECT_EQ(a.row_arrays, 18);
  EXPECT_EQ(a.col_arrays, 16);
  EXPECT_EQ(a.arrays, 288);
  // Partial arrays round up: IC 3, OC 64 -> 9 * 1 * 2.
  EXPECT_EQ(m.Map({.in_channels = 3, .out_channels = 64, .kernel_h = 3, .kernel_w = 3}).arrays, 18);
}

TEST(CimModelTest, LatencyIsPixelsTimesBitsTimesMuxTimesReadPlusAdderTree) {
  const CimSpec s = NeuroSim();
  const CimModel m(s);
  absl::StatusOr<CimCost> c = m.Mvm(
      {.in_channels = 256, .out_channels = 512, .kernel_h = 3, .kernel_w = 3, .out_pixels = 196});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->read_s, 196.0 * 8 * 8 * 10e-9 * s.sensing_latency_factor);
  EXPECT_DOUBLE_EQ(c->accumulate_s, 196.0 * 8 * std::ceil(std::log2(18.0)) / 1e9);
  EXPECT_DOUBLE_EQ(c->time_s,
                   c->read_s + c->shift_add_s + c->accumulate_s + c->buffer_s + c->interconnect_s);
}

// SubArray.cpp / ShiftAdd.cpp, synchronous: per input bit, 8 cycles to add a weight's 4 cells
// (numColMuxed) and ceil(8 / 4) = 2 to add the input bits.
TEST(CimModelTest, ShiftAndAddIsTenCyclesPerInputBit) {
  const CimModel m(NeuroSim());
  absl::StatusOr<CimCost> c = m.Mvm(
      {.in_channels = 256, .out_channels = 512, .kernel_h = 3, .kernel_w = 3, .out_pixels = 196});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->shift_add_s, 196.0 * 8 * (8 + 2) / 1e9);
}

// NeuroSim Chip.cpp: inputs IC * K_w on the novel mapping (an input serves the K kernel rows),
// IC * K^2 on the conventional one, and outputs OC, each input_bits deep, per output pixel.
TEST(CimModelTest, BitsMovedAreInputsPerKernelRowPlusOutputs) {
  const CimModel m(NeuroSim());
  MvmOp op = {.in_channels = 256,
              .out_channels = 512,
              .kernel_h = 3,
              .kernel_w = 3,
              .groups = 2,
              .out_pixels = 196};
  absl::StatusOr<CimCost> novel = m.Mvm(op);
  ASSERT_TRUE(novel.ok()) << novel.status();
  EXPECT_DOUBLE_EQ(novel->bits_moved, (256.0 * 2 * 3 + 512) * 8 * 196);
  op.novel_mapping = false;
  absl::StatusOr<CimCost> conventional = m.Mvm(op);
  ASSERT_TRUE(conventional.ok()) << conventional.status();
  EXPECT_DOUBLE_EQ(conventional->bits_moved, (256.0 * 2 * 9 + 512) * 8 * 196);
}

// Chip.cpp / Buffer.cpp: the global buffer moves a 128-bit line from each of ceil(bus / 128)
// cores per cycle, and a layer reaches only its tiles' share of the chip's buffer bandwidth.
TEST(CimModelTest, GlobalBufferTimeIsBitsOverBufferLinesTimesShare) {
  const CimSpec s = NeuroSim();
  const CimModel m(s);
  MvmOp op = {
      .in_channels = 256, .out_channels = 512, .kernel_h = 3, .kernel_w = 3, .out_pixels = 196};
  const double bits = (256.0 * 3 + 512) * 8 * 196;
  absl::StatusOr<CimCost> alone = m.Mvm(op);  // the widest bus, 2048: 16 lines per cycle
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_DOUBLE_EQ(alone->buffer_s, bits / 2048 / 1e9);
  op.buffer_share = 11;
  op.bus_bits = 1512;  // 12 cores' lines, 1536 bits, per cycle
  absl::StatusOr<CimCost> shared = m.Mvm(op);
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_DOUBLE_EQ(shared->buffer_s, 11 * bits / 1536 / 1e9);
  EXPECT_DOUBLE_EQ(shared->read_s, alone->read_s);  // the crossbars do not share
}

// Chip.cpp's floorplan, worked by hand for VGG8 on CIFAR-10 (4 columns per 8-bit weight). The 3x3
// layers with at least 128 rows take the novel mapping; their PE size P in {2048, 1024, 512}
// maps 9.7%, 27.7% and 59.6% of the cells: 512, 13 tiles. conv1 (27 rows) and the FC layers are
// conventional; T in {4096, 2048, 1024} maps 50.1%, 80.1% and 94.3%: 1024, 34 tiles. The bus:
// 5 * (512 * 3 * 9/8) + 3 * (1024 * 9/8) = 12096 bits, halved three times to 1512.
TEST(CimModelTest, FloorplanFollowsNeuroSimsTileDesign) {
  const CimModel m(NeuroSim());
  auto conv = [](int64_t ic, int64_t oc) {
    return MvmOp{.in_channels = ic, .out_channels = oc, .kernel_h = 3, .kernel_w = 3};
  };
  auto fc = [](int64_t ic, int64_t oc) { return MvmOp{.in_channels = ic, .out_channels = oc}; };
  const std::vector<ChipLayer> chip =
      m.Floorplan({conv(3, 128), conv(128, 128), conv(128, 256), conv(256, 256), conv(256, 512),
                   conv(512, 512), fc(8192, 1024), fc(1024, 10)});
  ASSERT_EQ(chip.size(), 8u);
  const bool novel[] = {false, true, true, true, true, true, false, false};
  const int64_t tiles[] = {1, 1, 2, 2, 4, 4, 32, 1};  // 47 in all
  const int64_t share[] = {47, 47, 24, 24, 12, 12, 2, 47};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(chip[i].novel_mapping, novel[i]) << i;
    EXPECT_EQ(chip[i].tiles, tiles[i]) << i;
    EXPECT_EQ(chip[i].buffer_share, share[i]) << i;
    EXPECT_DOUBLE_EQ(chip[i].bus_bits, 1512) << i;
  }
  // An empty matrix (which Mvm refuses) takes one tile rather than dividing by zero.
  const std::vector<ChipLayer> bad = m.Floorplan({MvmOp{}, conv(512, 512)});
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_EQ(bad[0].tiles, 1);
  EXPECT_EQ(bad[1].buffer_share, 2);  // P = 512: 4 tiles next to the empty layer's 1
}

// HTree.cpp, synchronous: every bus-wide transfer takes at least one cycle, whatever the share.
TEST(CimModelTest, InterconnectTimeIsOneCyclePerBusTransfer) {
  const CimModel m(NeuroSim());
  MvmOp op = {.in_channels = 4096,
              .out_channels = 1000,
              .kernel_h = 1,
              .kernel_w = 1,
              .out_pixels = 1,
              .buffer_share = 1000};
  absl::StatusOr<CimCost> c = m.Mvm(op);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->interconnect_s, std::ceil((4096.0 + 1000) * 8 / 2048) / 1e9);
  op.bus_bits = 1512;
  c = m.Mvm(op);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->interconnect_s, std::ceil((4096.0 + 1000) * 8 / 1512) / 1e9);
}

// NeuroSim counts the buffer's read and write energy per bit (Buffer.cpp CalculatePower).
TEST(CimModelTest, BufferEnergyIsBitsMovedTimesBitEnergy) {
  const CimSpec s = NeuroSim();
  absl::StatusOr<CimCost> c = CimModel(s).Mvm(
      {.in_channels = 64, .out_channels = 64, .kernel_h = 3, .kernel_w = 3, .out_pixels = 100});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->buffer_energy_j, (64.0 * 3 + 64) * 8 * 100 * s.buffer_bit_energy_j);
  EXPECT_DOUBLE_EQ(c->energy_j, c->cell_energy_j + c->adc_energy_j + c->accumulate_energy_j +
                                    c->buffer_energy_j);
}

TEST(CimModelTest, EnergyCountsCellReadsAdcConversionsAndAdds) {
  const CimSpec s = NeuroSim();
  const CimModel m(s);
  absl::StatusOr<CimCost> c = m.Mvm(
      {.in_channels = 128, .out_channels = 32, .kernel_h = 1, .kernel_w = 1, .out_pixels = 1});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->mapping.arrays, 1);
  EXPECT_DOUBLE_EQ(c->adc_energy_j, 8.0 * 128 * s.adc_energy_j);
  EXPECT_DOUBLE_EQ(c->cell_energy_j,
                   8.0 * 128 * 128 * 0.5 * 0.25 * 0.5 * (1 / 6e3 + 1 / 9e5) * 10e-9);
  EXPECT_DOUBLE_EQ(c->accumulate_energy_j, 0);  // one row array: nothing to add
  EXPECT_DOUBLE_EQ(c->energy_j, c->adc_energy_j + c->cell_energy_j + c->buffer_energy_j);
}

TEST(CimModelTest, FullyConnectedLayerIsOneOutputPixel) {
  const CimModel m(NeuroSim());
  absl::StatusOr<CimCost> fc = m.Mvm(
      {.in_channels = 4096, .out_channels = 4096, .kernel_h = 1, .kernel_w = 1, .out_pixels = 1});
  ASSERT_TRUE(fc.ok());
  EXPECT_EQ(fc->mapping.arrays, 32 * 128);
  // 64 reads of 14 ns, 80 shift-and-add cycles, a 5-stage tree, 32 bus cycles through the buffer
  // and 32 on the H-tree.
  EXPECT_LT(fc->time_s, 2e-6);
}

TEST(CimModelTest, NonPositiveShapeIsRefused) {
  const CimModel m(NeuroSim());
  absl::StatusOr<CimCost> c = m.Mvm({.in_channels = 0, .out_channels = 4, .out_pixels = 1});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("IC 0"));
  absl::StatusOr<CimCost> share =
      m.Mvm({.in_channels = 4, .out_channels = 4, .out_pixels = 1, .buffer_share = 0});
  ASSERT_FALSE(share.ok());
  EXPECT_THAT(share.status().message(), HasSubstr("buffer share 0"));
}

TEST(CimModelTest, DigitalOpsRunOnThePeriphery) {
  const CimSpec s = NeuroSim();
  const CimCost c = CimModel(s).Digital(128e3);
  EXPECT_DOUBLE_EQ(c.time_s, 1e3 / 1e9);
  EXPECT_DOUBLE_EQ(c.energy_j, 128e3 * s.add_energy_j);
}

}  // namespace
}  // namespace neupims::hw::cim

namespace neupims::hw::cim {
namespace {

TEST(CimModelTest, OnlyMappedCellsAndColumnsSpendEnergy) {
  const CimSpec s = NeuroSim();
  const CimModel m(s);
  // 7x7 over 3 channels (ResNet conv1): 49 arrays of 3 used rows each.
  absl::StatusOr<CimCost> c =
      m.Mvm({.in_channels = 3, .out_channels = 64, .kernel_h = 7, .kernel_w = 7, .out_pixels = 1});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->mapping.arrays, 49 * 2);
  EXPECT_DOUBLE_EQ(c->cell_energy_j,
                   8.0 * (49 * 3 * 64 * 4) * s.input_activity * s.cell_read_energy_j());
  EXPECT_DOUBLE_EQ(c->adc_energy_j, 8.0 * 49 * (64 * 4) * s.adc_energy_j);
}

}  // namespace
}  // namespace neupims::hw::cim
