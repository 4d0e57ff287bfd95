// TimingChecker: an independent validator of command traces.
//
// Role: replays a trace of issued commands and reports every violated rule. It deliberately
// does not use TimingTable/TimingEngine: each rule is re-derived here from the raw parameters
// as explicit pairwise conditions, a sliding tFAW window, a data-bus occupancy check, refresh
// intervals, and a bank state machine (what must be open or closed for each command). Tests run
// it over traces of the controller (expecting none) and over deliberately broken traces
// (expecting the broken rule by name).
#ifndef NEUPIMS_HW_DRAM_TIMING_CHECKER_H_
#define NEUPIMS_HW_DRAM_TIMING_CHECKER_H_

#include <string>
#include <vector>

#include "hw/dram/command.h"
#include "hw/dram/hbm_spec.h"

namespace neupims::hw {

struct Violation {
  std::string rule;     // e.g. "tRCD", "tFAW", "data_bus", "state"
  size_t index = 0;     // the offending command in the trace
  size_t earlier = 0;   // the command it conflicts with (== index for state rules)
  Cycles required = 0;  // minimum gap (timing rules)
  Cycles actual = 0;    // observed gap
  std::string detail;
};

class TimingChecker {
 public:
  explicit TimingChecker(const HbmSpec& spec);
  // Every violation in `trace` (which must be in non-decreasing cycle order).
  std::vector<Violation> Check(const std::vector<IssuedCommand>& trace) const;

 private:
  HbmSpec spec_;
};

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_DRAM_TIMING_CHECKER_H_
