#include "server/busy_clock.h"

#include "gtest/gtest.h"

namespace neupims::server {
namespace {

TEST(BusyClockTest, ZeroBeforeAnyBusyTime) {
  BusyClock c;
  EXPECT_EQ(c.ratio(), 0);
  c.Observe(false, {.wall_s = 1, .sim_s = 0});
  c.Observe(false, {.wall_s = 5, .sim_s = 0});
  EXPECT_EQ(c.ratio(), 0);
}

TEST(BusyClockTest, IdleWallTimeDoesNotDiluteTheRatio) {
  BusyClock c;
  c.Observe(false, {.wall_s = 0, .sim_s = 0});
  // Idle for 10 wall seconds, then 0.5 wall s of work that simulates 100 s.
  c.Observe(true, {.wall_s = 10, .sim_s = 0});
  c.Observe(true, {.wall_s = 10.25, .sim_s = 60});
  c.Observe(false, {.wall_s = 10.5, .sim_s = 100});
  // Idle again for a minute: nothing changes.
  c.Observe(false, {.wall_s = 70.5, .sim_s = 100});
  EXPECT_DOUBLE_EQ(c.busy_wall_s(), 0.5);
  EXPECT_DOUBLE_EQ(c.busy_sim_s(), 100);
  EXPECT_DOUBLE_EQ(c.ratio(), 200);
  // A second burst adds to both sides.
  c.Observe(true, {.wall_s = 80, .sim_s = 100});
  c.Observe(false, {.wall_s = 80.5, .sim_s = 200});
  EXPECT_DOUBLE_EQ(c.ratio(), 200);
}

TEST(BusyClockTest, RealtimePacingReadsTheSpeed) {
  // Under realtime pacing the simulated clock follows the wall clock times the speed, idle or not.
  BusyClock c;
  for (int i = 0; i <= 10; ++i) c.Observe(i % 3 != 0, {.wall_s = i * 1.0, .sim_s = i * 2.0});
  EXPECT_DOUBLE_EQ(c.ratio(), 2.0);
}

TEST(BusyClockTest, ReadingsThatRunBackwardsAddNothing) {
  BusyClock c;
  c.Observe(true, {.wall_s = 2, .sim_s = 4});
  c.Observe(true, {.wall_s = 1, .sim_s = 1});
  EXPECT_EQ(c.busy_wall_s(), 0);
  c.Observe(false, {.wall_s = 3, .sim_s = 6});
  EXPECT_DOUBLE_EQ(c.ratio(), 2.0);
}

}  // namespace
}  // namespace neupims::server
