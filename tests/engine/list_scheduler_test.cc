#include "engine/list_scheduler.h"

#include <vector>

#include "gtest/gtest.h"

namespace neupims::engine {
namespace {

ScheduleNode N(Lane lane, int priority, double ns, const std::vector<int>& deps = {},
               double shared_ns = 0) {
  ScheduleNode n;
  n.lane = lane;
  n.priority = priority;
  n.dur_ns = ns;
  n.dur_shared_ns = shared_ns > 0 ? shared_ns : ns;
  n.deps.assign(deps.begin(), deps.end());
  return n;
}

TEST(ListScheduler, AChainTakesTheSumOfItsDurations) {
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kVector, 1, 5, {0}),
                                     N(Lane::kPim, 2, 7, {1})};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 22);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 15);
}

TEST(ListScheduler, IndependentLanesOverlap) {
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 8)};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 10);
}

TEST(ListScheduler, BlockedModeSerialisesSystolicAndPim) {
  // Single row buffer: the PIM decides first, the GEMM waits for it.
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 8)};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), true), 18);
  EXPECT_DOUBLE_EQ(nodes[0].start_ns, 8);
}

TEST(ListScheduler, AGemmUnderThePimRunsAtTheSharedRateThenAtFullSpeed) {
  // PIM busy 0..8; the GEMM needs 10 ns alone or 20 ns entirely under the PIM (half speed):
  // 8 ns at half speed do 4 ns of work, the remaining 6 ns run at full speed: ends at 14.
  std::vector<ScheduleNode> nodes = {N(Lane::kPim, 0, 8), N(Lane::kSystolic, 1, 10, {}, 20)};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 14);
}

TEST(ListScheduler, HigherPriorityReadyNodeGoesFirst) {
  std::vector<ScheduleNode> nodes = {N(Lane::kVector, 5, 4), N(Lane::kVector, 1, 3)};
  ListScheduler s;
  s.Run(absl::MakeSpan(nodes), false);
  EXPECT_DOUBLE_EQ(nodes[1].start_ns, 0);
  EXPECT_DOUBLE_EQ(nodes[0].start_ns, 3);
}

// Stage barriers (the reference simulator's stages): an SB1 GEMM of stage 1 that could run
// beside SB0's stage-0 work waits for all of it; within a stage units still overlap, so a stage
// lasts its longest unit.
TEST(ListScheduler, BarriersHoldALaterStageUntilEveryNodeOfTheEarlierOnesEnded) {
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 30, {0}),
                                     N(Lane::kSystolic, 2, 12), N(Lane::kSystolic, 3, 5, {1})};
  nodes[0].stage = 0;  // A: SB0 pre
  nodes[1].stage = 1;  // B: SB0 attention ...
  nodes[2].stage = 1;  //    || SB1 pre
  nodes[3].stage = 2;  // C: SB0 post
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 45);  // 10 + 30 + 5, no barrier needed
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);                    // list: after node 0 (priority)
  nodes[2].priority = -1;                                     // SB1's GEMM first, at t = 0
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 57);  // 12 + 10 + 30 + 5
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 0);
  // With barriers it cannot start before stage A ends: B = max(30, 12), then C.
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false, /*barriers=*/true), 45);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);
  EXPECT_DOUBLE_EQ(nodes[1].start_ns, 10);
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 40);
}

TEST(ListScheduler, ABarrierWaitsForTheSlowerUnitOfItsStage) {
  // Stage 0: a 10 ns GEMM and a 25 ns PIM op; stage 1: a GEMM independent of both.
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 25),
                                     N(Lane::kSystolic, 2, 4)};
  nodes[2].stage = 1;
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 25);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false, true), 29);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 25);
}

TEST(ListScheduler, ReusedSchedulerGivesTheSameResult) {
  std::vector<ScheduleNode> a = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 8, {0}),
                                 N(Lane::kVector, 2, 3, {0}), N(Lane::kSystolic, 3, 4, {1, 2})};
  std::vector<ScheduleNode> b = a;
  ListScheduler s;
  const double first = s.Run(absl::MakeSpan(a), false);
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(b), false), first);
  EXPECT_DOUBLE_EQ(first, 22);
}

}  // namespace
}  // namespace neupims::engine
