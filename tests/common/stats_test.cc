#include "common/stats.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace neupims {
namespace {

TEST(Summarize, FourSamplesUseNumpyLinearInterpolation) {
  // Deliberately unsorted: Summarize sorts its copy.
  const Summary s = Summarize({4, 1, 3, 2});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.median, 2.5);  // numpy.percentile([1, 2, 3, 4], 50)
  EXPECT_DOUBLE_EQ(s.p90, 3.7);     // numpy.percentile([1, 2, 3, 4], 90)
  EXPECT_DOUBLE_EQ(s.p99, 3.97);    // numpy.percentile([1, 2, 3, 4], 99)
  // Population standard deviation (numpy.std's default, ddof = 0).
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(1.25));
}

TEST(Summarize, PercentilesOfOneToHundredMatchNumpy) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);
  const Summary s = Summarize(samples);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.median, 50.5);  // numpy.percentile(range(1, 101), 50)
  EXPECT_DOUBLE_EQ(s.p90, 90.1);     // numpy.percentile(range(1, 101), 90)
  EXPECT_DOUBLE_EQ(s.p99, 99.01);    // numpy.percentile(range(1, 101), 99)
}

TEST(Summarize, EmptyInputGivesAnAllZeroSummaryWithCountZero) {
  const Summary s = Summarize({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.mean, 0);
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 0);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.p90, 0);
  EXPECT_EQ(s.p99, 0);
  EXPECT_EQ(s.stddev, 0);
}

TEST(Summarize, StddevOfAConstantIsZero) {
  const Summary s = Summarize({7.25, 7.25, 7.25, 7.25, 7.25});
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 7.25);
  EXPECT_EQ(s.stddev, 0);
  EXPECT_DOUBLE_EQ(s.median, 7.25);
  EXPECT_DOUBLE_EQ(s.p99, 7.25);
}

TEST(Summarize, SingleSampleIsEveryStatistic) {
  const Summary s = Summarize({3});
  EXPECT_EQ(s.count, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 3);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.p90, 3);
  EXPECT_DOUBLE_EQ(s.p99, 3);
  EXPECT_EQ(s.stddev, 0);
}

TEST(QuantileSorted, EndpointsAreMinAndMaxAndOutOfRangeQIsClamped) {
  const std::vector<double> sorted = {10, 20, 30};
  EXPECT_DOUBLE_EQ(QuantileSorted(sorted, 0.0), 10);
  EXPECT_DOUBLE_EQ(QuantileSorted(sorted, 1.0), 30);
  EXPECT_DOUBLE_EQ(QuantileSorted(sorted, 0.25), 15);
  EXPECT_DOUBLE_EQ(QuantileSorted(sorted, -1.0), 10);
  EXPECT_DOUBLE_EQ(QuantileSorted(sorted, 2.0), 30);
}

TEST(QuantileSorted, EmptyInputIsZero) { EXPECT_EQ(QuantileSorted({}, 0.5), 0); }

}  // namespace
}  // namespace neupims

namespace neupims {
namespace {

TEST(SummarizeRuns, EqualsSummarizeOfTheExpandedSamples) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> value(0, 40), count(0, 7);
  std::vector<SampleRun> runs;
  std::vector<double> expanded;
  for (int i = 0; i < 300; ++i) {
    const SampleRun r{value(rng) * 0.25, count(rng)};
    runs.push_back(r);
    for (int64_t k = 0; k < r.count; ++k) expanded.push_back(r.value);
  }
  const Summary a = Summarize(expanded);
  const Summary b = SummarizeRuns(runs);
  EXPECT_EQ(b.count, a.count);
  EXPECT_EQ(b.min, a.min);
  EXPECT_EQ(b.max, a.max);
  EXPECT_EQ(b.median, a.median);  // quantiles exactly
  EXPECT_EQ(b.p90, a.p90);
  EXPECT_EQ(b.p99, a.p99);
  EXPECT_NEAR(b.mean, a.mean, 1e-12 * a.mean);
  EXPECT_NEAR(b.stddev, a.stddev, 1e-9 * a.stddev);
}

TEST(SummarizeRuns, InterpolatesBetweenRunsLikeNumpy) {
  // {1, 1, 2, 4}: median 1.5, p90 at position 2.7 -> 2 + 0.7 * 2.
  const Summary s = SummarizeRuns({{4, 1}, {1, 2}, {2, 1}, {9, 0}});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.median, 1.5);
  EXPECT_DOUBLE_EQ(s.p90, 3.4);
  EXPECT_DOUBLE_EQ(s.mean, 2.0);
  EXPECT_EQ(s.max, 4);  // the empty run of 9 is ignored
}

TEST(SummarizeRuns, NoSamplesGiveAnAllZeroSummary) {
  EXPECT_EQ(SummarizeRuns({{5, 0}}).count, 0u);
  EXPECT_EQ(SummarizeRuns({}).mean, 0);
}

}  // namespace
}  // namespace neupims
