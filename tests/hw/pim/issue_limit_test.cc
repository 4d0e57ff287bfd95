#include "hw/pim/issue_limit.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "hw/pim/gemv_plan.h"

namespace neupims::hw {
namespace {

// Logit + attend instructions of one request-layer with `heads` heads of 128 at `seq_len`.
int64_t AttentionInstructions(int64_t seq_len, int heads, PimCommandSet set) {
  const AttentionShape shape{seq_len, heads, heads, 128};
  const PimGeometry g;  // 32 banks, 512-element pages, 16 lanes
  absl::StatusOr<GemvProgram> logit = PlanLogit(shape, g);
  absl::StatusOr<GemvProgram> attend = PlanAttend(shape, g);
  EXPECT_TRUE(logit.ok() && attend.ok());
  if (!logit.ok() || !attend.ok()) return -1;
  return PimInstructions(*logit, set) + PimInstructions(*attend, set);
}

// Issue 14's facts about the reference simulator: per head of 128 at L = 512, QK^T takes
// 9.25 T (Newton) vs 1.25 T (NeuPIMs) with T = 16 rows, and logits x V 4n + 9 vs 9 with
// n = 32: 285 vs 29. Four heads share a key row, so count four and divide (the query's one
// vector load per row of heads adds the quarter).
TEST(PimInstructions, OneHeadAtL512Is285UnderNewtonAnd29UnderNeuPims) {
  const int64_t newton = AttentionInstructions(512, 4, PimCommandSet::kNewton);
  const int64_t neupims = AttentionInstructions(512, 4, PimCommandSet::kNeuPims);
  EXPECT_EQ(newton, 4 * (9.25 * 16 + (4 * 32 + 9)) + 1);  // 1141
  EXPECT_EQ(neupims, 4 * (1.25 * 16 + 9) + 1);            // 117
  EXPECT_NEAR(newton / 4.0, 285, 0.5);
  EXPECT_NEAR(neupims / 4.0, 29, 0.5);
}

TEST(PimInstructions, NewtonCountsEveryColumnStepNeuPimsOnlyTheResult) {
  const AttentionShape shape{100, 8, 8, 128};
  absl::StatusOr<GemvProgram> p = PlanLogit(shape, PimGeometry{});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(
      PimInstructions(*p, PimCommandSet::kNewton) - PimInstructions(*p, PimCommandSet::kNeuPims),
      p->column_steps());
  EXPECT_EQ(PimInstructions(*p, PimCommandSet::kNeuPims),
            p->tiles() + p->dot_products() + p->vector_loads());
}

TEST(IssueLimitedSpan, UnlimitedIsTheBusiestChannel) {
  const std::vector<double> exec{100, 10, 50};
  EXPECT_EQ(IssueLimitedSpanNs(exec, {}, PimIssue{}), 100);
}

// The unlimited span is one running std::max from 0 over the channels, bit for bit, whatever
// the channel count and wherever the busiest channel sits (also with -0, NaN and ties).
TEST(IssueLimitedSpan, UnlimitedEqualsOneRunningMaximumBitForBit) {
  std::mt19937_64 rng(7);
  const double specials[] = {0.0, -0.0, std::numeric_limits<double>::quiet_NaN(), 3.5, 1e-300};
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<double> exec(rng() % 70);
    for (double& e : exec) {
      e = rng() % 3 == 0 ? specials[rng() % 5] : static_cast<double>(rng() % 1000) / 7.0;
    }
    double expected = 0;
    for (double e : exec) expected = std::max(expected, e);
    const double span = IssueLimitedSpanNs(exec, {}, PimIssue{});
    EXPECT_EQ(std::bit_cast<uint64_t>(span), std::bit_cast<uint64_t>(expected)) << trial;
  }
}

TEST(IssueLimitedSpan, PerChannelLimitEndsAChannelWithItsLastInstruction) {
  const std::vector<double> exec{100, 10, 50};
  const std::vector<double> instructions{20, 200, 10};
  const PimIssue one_per_ns{PimIssueScope::kChannel, 1.0};
  EXPECT_EQ(IssueLimitedSpanNs(exec, instructions, one_per_ns), 200);
  const PimIssue two_per_ns{PimIssueScope::kChannel, 2.0};
  EXPECT_EQ(IssueLimitedSpanNs(exec, instructions, two_per_ns), 100);
}

// One queue for the chip, ordered by channel: channel c starts when the lower channels'
// instructions are issued. c0: 0 + max(100, 20) = 100; c1: 20 + max(10, 200) = 220;
// c2: 220 + max(50, 10) = 270.
TEST(IssueLimitedSpan, ChipQueueStartsEachChannelAfterTheLowerChannelsInstructions) {
  const std::vector<double> exec{100, 10, 50};
  const std::vector<double> instructions{20, 200, 10};
  EXPECT_EQ(IssueLimitedSpanNs(exec, instructions, PimIssue{PimIssueScope::kChip, 1.0}), 270);
}

TEST(IssueLimitedSpan, ChipQueueWithFastIssueApproachesTheBusiestChannel) {
  const std::vector<double> exec{100, 10, 50};
  const std::vector<double> instructions{20, 200, 10};
  EXPECT_NEAR(IssueLimitedSpanNs(exec, instructions, PimIssue{PimIssueScope::kChip, 1e6}), 100,
              0.01);
}

TEST(IssueLimitedSpan, IdleChannelsAddNothing) {
  const std::vector<double> exec{0, 40, 0, 0};
  const std::vector<double> instructions{0, 30, 0, 0};
  EXPECT_EQ(IssueLimitedSpanNs(exec, instructions, PimIssue{PimIssueScope::kChip, 1.0}), 40);
}

}  // namespace
}  // namespace neupims::hw
