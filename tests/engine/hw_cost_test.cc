#include "engine/hw_cost.h"

#include "gtest/gtest.h"

namespace neupims::engine {
namespace {

HwCost Sample() {
  HwCost c;
  c.systolic_busy_ns = 10;
  c.pim_mac_ns = 3;
  c.npu_macs = 100;
  c.npu_dynamic_j = 1;
  c.pim_j = 2;
  c.dram_background_j = 0.5;
  c.pim_commands[0] = 7;
  return c;
}

TEST(HwCost, AddScaledAddsEveryFieldAndCommandTimesK) {
  HwCost total;
  total.AddScaled(Sample(), 3);
  EXPECT_DOUBLE_EQ(total.systolic_busy_ns, 30);
  EXPECT_DOUBLE_EQ(total.pim_mac_ns, 9);
  EXPECT_DOUBLE_EQ(total.npu_macs, 300);
  EXPECT_EQ(total.pim_commands[0], 21);
  total -= Sample();
  EXPECT_DOUBLE_EQ(total.systolic_busy_ns, 20);
  EXPECT_EQ(total.pim_commands[0], 14);
}

TEST(HwCost, EnergyIsTheSumOfTheEnergyFieldsOnly) {
  EXPECT_DOUBLE_EQ(Sample().energy_j(), 3.5);  // not the busy times, MACs or commands
}

TEST(HwCost, ScaleEnergyLeavesBusyTimesAlone) {
  HwCost c = Sample();
  c.ScaleEnergy(4);
  EXPECT_DOUBLE_EQ(c.energy_j(), 14);
  EXPECT_DOUBLE_EQ(c.systolic_busy_ns, 10);
}

TEST(HwCost, GrowthClampsShrinkingFieldsToZero) {
  HwCost before = Sample(), after = Sample();
  after.systolic_busy_ns = 15;  // grew by 5
  after.pim_j = 1;              // shrank (e.g. a restarted engine): no growth
  after.pim_commands[0] = 3;
  const HwCost d = Growth(after, before);
  EXPECT_DOUBLE_EQ(d.systolic_busy_ns, 5);
  EXPECT_DOUBLE_EQ(d.pim_j, 0);
  EXPECT_EQ(d.pim_commands[0], 0);
}

}  // namespace
}  // namespace neupims::engine
