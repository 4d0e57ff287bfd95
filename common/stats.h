// Descriptive statistics over samples (latencies, utilisations).
#ifndef NEUPIMS_COMMON_STATS_H_
#define NEUPIMS_COMMON_STATS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace neupims {

struct Summary {
  size_t count = 0;
  double mean = 0, min = 0, max = 0, median = 0, p90 = 0, p99 = 0, stddev = 0;
};

// Percentiles use linear interpolation between closest ranks (numpy's default), so the median
// of {1, 2, 3, 4} is 2.5. An empty input gives an all-zero Summary with count 0.
Summary Summarize(std::vector<double> samples);

// The q-quantile (q in [0, 1]) of already sorted samples; 0 if empty.
double QuantileSorted(const std::vector<double>& sorted, double q);

// A value that occurs `count` times: run-length samples, e.g. every token of an iteration has
// the same inter-token gap.
struct SampleRun {
  double value = 0;
  int64_t count = 0;
};

// Summarize of the samples the runs expand to, in O(runs) memory (runs with count <= 0 are
// ignored). Quantiles, min and max are exactly Summarize's; mean and stddev agree up to
// rounding (products instead of repeated sums).
Summary SummarizeRuns(std::vector<SampleRun> runs);

}  // namespace neupims

#endif  // NEUPIMS_COMMON_STATS_H_
