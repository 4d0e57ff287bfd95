// ParallelFor: every index exactly once, serial order for one job, results a serial run's.
#include "common/parallel.h"

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace neupims {
namespace {

TEST(ParallelFor, CallsEveryIndexExactlyOnce) {
  for (int jobs : {1, 2, 4}) {
    std::vector<std::atomic<int>> calls(100);
    ParallelFor(100, jobs, [&](int i) { ++calls[i]; });
    for (int i = 0; i < 100; ++i) EXPECT_EQ(calls[i].load(), 1) << "jobs " << jobs << " i " << i;
  }
}

TEST(ParallelFor, OneJobRunsInOrderOnTheCallingThread) {
  std::vector<int> order;
  const std::thread::id caller = std::this_thread::get_id();
  ParallelFor(10, 1, [&](int i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(ParallelFor, ParallelRunEqualsSerialRun) {
  // Uneven floating-point work per index, results in per-index slots.
  auto run = [](int jobs) {
    std::vector<double> out(64);
    ParallelFor(64, jobs, [&](int i) {
      double x = i;
      for (int k = 0; k < 1000 * (i % 7 + 1); ++k) x = std::sin(x) + 0.5 * x;
      out[i] = x;
    });
    return out;
  };
  EXPECT_EQ(run(1), run(2));
  EXPECT_EQ(run(1), run(DefaultJobs()));
}

TEST(ParallelFor, EmptyRangeCallsNothing) {
  ParallelFor(0, 4, [](int) { ADD_FAILURE(); });
}

TEST(ParallelFor, DefaultJobsIsAtLeastOne) { EXPECT_GE(DefaultJobs(), 1); }

}  // namespace
}  // namespace neupims
