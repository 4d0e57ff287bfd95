#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace neupims {

double QuantileSorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  q = std::clamp(q, 0.0, 1.0);
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Summary Summarize(std::vector<double> samples) {
  Summary s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.max = samples.back();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.count);
  double var = 0;
  for (double x : samples) var += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(var / static_cast<double>(s.count));
  s.median = QuantileSorted(samples, 0.5);
  s.p90 = QuantileSorted(samples, 0.9);
  s.p99 = QuantileSorted(samples, 0.99);
  return s;
}

Summary SummarizeRuns(std::vector<SampleRun> runs) {
  std::erase_if(runs, [](const SampleRun& r) { return r.count <= 0; });
  Summary s;
  if (runs.empty()) return s;
  std::sort(runs.begin(), runs.end(),
            [](const SampleRun& a, const SampleRun& b) { return a.value < b.value; });
  // cum[i]: samples in runs 0 .. i (the expanded index of run i's last sample is cum[i] - 1).
  std::vector<int64_t> cum(runs.size());
  int64_t n = 0;
  double sum = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    n += runs[i].count;
    cum[i] = n;
    sum += runs[i].value * static_cast<double>(runs[i].count);
  }
  s.count = static_cast<size_t>(n);
  s.min = runs.front().value;
  s.max = runs.back().value;
  s.mean = sum / static_cast<double>(n);
  double var = 0;
  for (const SampleRun& r : runs) {
    var += static_cast<double>(r.count) * (r.value - s.mean) * (r.value - s.mean);
  }
  s.stddev = std::sqrt(var / static_cast<double>(n));
  // The sample at expanded index i of the sorted samples.
  auto at = [&](int64_t i) {
    return runs[static_cast<size_t>(std::upper_bound(cum.begin(), cum.end(), i) - cum.begin())]
        .value;
  };
  // As QuantileSorted on the expanded samples.
  auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(n - 1);
    const int64_t lo = static_cast<int64_t>(std::floor(pos));
    const int64_t hi = std::min(lo + 1, n - 1);
    const double frac = pos - static_cast<double>(lo);
    return at(lo) + (at(hi) - at(lo)) * frac;
  };
  s.median = quantile(0.5);
  s.p90 = quantile(0.9);
  s.p99 = quantile(0.99);
  return s;
}

}  // namespace neupims
