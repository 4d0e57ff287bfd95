#include "hw/cim/cim_model.h"

#include <cmath>

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
  EXPECT_DOUBLE_EQ(c->time_s, c->read_s + c->accumulate_s);
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
  EXPECT_DOUBLE_EQ(c->energy_j, c->adc_energy_j + c->cell_energy_j);
}

TEST(CimModelTest, FullyConnectedLayerIsOneOutputPixel) {
  const CimModel m(NeuroSim());
  absl::StatusOr<CimCost> fc = m.Mvm(
      {.in_channels = 4096, .out_channels = 4096, .kernel_h = 1, .kernel_w = 1, .out_pixels = 1});
  ASSERT_TRUE(fc.ok());
  EXPECT_EQ(fc->mapping.arrays, 32 * 128);
  EXPECT_LT(fc->time_s, 2e-6);  // 64 reads of 14 ns plus a 5-stage tree
}

TEST(CimModelTest, NonPositiveShapeIsRefused) {
  const CimModel m(NeuroSim());
  absl::StatusOr<CimCost> c = m.Mvm({.in_channels = 0, .out_channels = 4, .out_pixels = 1});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("IC 0"));
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
