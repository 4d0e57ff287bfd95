#include "hw/hpim/hpim_model.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::hw::hpim {
namespace {

HpimSpec Hmc() {
  absl::StatusOr<HpimSpec> s = LoadHpimSpec("hmc");
  EXPECT_TRUE(s.ok()) << s.status();
  return s.value_or(HpimSpec{});
}

TEST(HpimSpecTest, BuiltinIsTheHmc20Stack) {
  const HpimSpec s = Hmc();
  EXPECT_EQ(s.vaults, 32);
  EXPECT_DOUBLE_EQ(s.memory_clock_hz, 312.5e6);
  EXPECT_EQ(s.ff_units, 444);
  EXPECT_EQ(s.core_count, 4);
  EXPECT_DOUBLE_EQ(s.core_clock_hz, 2e9);
  EXPECT_DOUBLE_EQ(s.ff_macs_per_s(), 444 * 312.5e6);
}

TEST(HpimModelTest, MacsRunOnFixedFunctionUnitsAndTheRestOnTheCore) {
  const HpimSpec s = Hmc();
  const HpimModel m(s);
  absl::StatusOr<PimCost> c = m.Cost({.macs = 444'000'000, .other_flops = 16e6});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->ff_s, 1e6 / 312.5e6);
  EXPECT_DOUBLE_EQ(c->core_s, 16e6 / (4 * 2e9 * s.core_flops_per_cycle));
  EXPECT_DOUBLE_EQ(c->time_s, c->ff_s + c->core_s + s.host_launch_s + s.ff_call_s);
  EXPECT_DOUBLE_EQ(c->energy_j,
                   444e6 * (s.ff_mul_energy_j + s.ff_add_energy_j) + 16e6 * s.core_flop_energy_j);
}

TEST(HpimModelTest, RecursiveCallSavesAHostLaunchPerExtraKernel) {
  const HpimSpec s = Hmc();
  const HpimModel m(s);
  const PimOp op{.macs = 1'000'000, .other_flops = 1e5};  // Conv2DBackpropFilter-like (Fig. 6)
  absl::StatusOr<PimCost> recursive = m.Cost(op, /*recursive=*/true);
  absl::StatusOr<PimCost> separate = m.Cost(op, /*recursive=*/false);
  ASSERT_TRUE(recursive.ok() && separate.ok());
  EXPECT_EQ(recursive->launches, 1);
  EXPECT_EQ(separate->launches, 2);
  EXPECT_NEAR(separate->time_s - recursive->time_s, s.host_launch_s - s.ff_call_s, 1e-15);
  EXPECT_LT(recursive->time_s, separate->time_s);
  // A pure-MAC op needs no call: both schemes launch once.
  EXPECT_DOUBLE_EQ(m.Cost({.macs = 1000}, true)->time_s, m.Cost({.macs = 1000}, false)->time_s);
}

TEST(HpimModelTest, ElevenByElevenWindowUsesFiftyFourPercentOfTheUnits) {
  // Sec. III-C: an 11x11 convolution window occupies 121 multipliers and 120 adders, 241 of
  // 444 fixed-function PIMs.
  const HpimModel m(Hmc());
  absl::StatusOr<PimCost> c = m.Cost({.macs = 241 * 1000, .ff_width = 241});
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(c->ff_utilization, 0.54, 0.005);
}

TEST(HpimModelTest, OperationPipeliningFillsIdleUnitsAcrossSteps) {
  const HpimSpec s = Hmc();
  const HpimModel m(s);
  const std::vector<PimOp> step = {{.macs = 241'000'000, .ff_width = 241},
                                   {.macs = 0, .other_flops = 1e6}};
  absl::StatusOr<StepTiming> piped = m.Steps(step, true, /*pipelined=*/true);
  absl::StatusOr<StepTiming> serial = m.Steps(step, true, /*pipelined=*/false);
  ASSERT_TRUE(piped.ok() && serial.ok());
  EXPECT_DOUBLE_EQ(piped->latency_s, serial->latency_s);
  EXPECT_DOUBLE_EQ(serial->interval_s, serial->latency_s);
  // Back to back, the units are all busy: the interval is the MACs over all 444 units.
  EXPECT_DOUBLE_EQ(piped->interval_s, 241e6 / s.ff_macs_per_s() + s.host_launch_s);
  EXPECT_LT(piped->TimeS(10), serial->TimeS(10));
  EXPECT_DOUBLE_EQ(piped->TimeS(1), piped->latency_s);
  EXPECT_DOUBLE_EQ(piped->TimeS(3), piped->latency_s + 2 * piped->interval_s);
}

TEST(HpimModelTest, MemoryBoundOpWaitsForTheStack) {
  const HpimSpec s = Hmc();
  absl::StatusOr<PimCost> c = HpimModel(s).Cost({.macs = 1, .bytes = 320'000'000});
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->memory_s, 1e-3);
  EXPECT_DOUBLE_EQ(c->time_s, 1e-3 + s.host_launch_s);
}

TEST(HpimModelTest, NegativeWorkIsRefused) {
  EXPECT_FALSE(HpimModel(Hmc()).Cost({.macs = -1}).ok());
}

}  // namespace
}  // namespace neupims::hw::hpim
