// Units shared by every model. Simulated time is an integer count of cycles of a named clock;
// conversions to seconds go through the clock's frequency so units never mix silently.
#ifndef NEUPIMS_COMMON_UNITS_H_
#define NEUPIMS_COMMON_UNITS_H_

#include <cstdint>

namespace neupims {

using Cycles = int64_t;  // cycles of the clock named by the context (NPU core or HBM clock)
using Bytes = int64_t;

constexpr double kPicoJoulesPerJoule = 1e12;

// A clock frequency; all conversions between cycles and time go through it.
struct Clock {
  double frequency_mhz = 1000.0;

  double CyclesToNs(double cycles) const { return cycles * 1e3 / frequency_mhz; }
  double CyclesToSeconds(double cycles) const { return cycles / (frequency_mhz * 1e6); }
  double NsToCycles(double ns) const { return ns * frequency_mhz / 1e3; }
};

// Ceiling division for non-negative integers.
constexpr int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace neupims

#endif  // NEUPIMS_COMMON_UNITS_H_
