// A heterogeneous processing-in-memory stack (paper 000): fixed-function PIM units (pairs of FP32
// multipliers and adders) and one programmable PIM (an ARM Cortex-A9-class core with four 2 GHz
// cores) on the logic die of an HMC 2.0-like stack (32 vaults at 312.5 MHz). Parameters are data
// (configs/hpim/*.json), each with its source in the file's `sources` object.
//
// An operation is split (sec. II-A, III-C) into MACs, which run on the fixed-function units, and
// the rest (control, pooling, activation, optimiser maths), which runs on the programmable core:
//
//   ff_s   = macs / (min(ff_width, ff_units) * f_mem)        (one MAC per unit per cycle)
//   core_s = other_flops / (cores * f_core * flops_per_cycle)
//   mem_s  = bytes / internal bandwidth                      (overlaps the compute)
//
// Recursive kernel call (sec. III-B, Fig. 6): the core runs the operation as one kernel and calls
// the fixed-function units for its MAC part (one host launch + ff_call_s per call); without it,
// the host launches the core phase and the fixed-function phase as separate kernels and
// synchronises after each:
//
//   latency = max(core_s + ff_s, mem_s) + launches * host_launch_s (+ ff_call_s when recursive)
//
// Operation pipelining (sec. III-C): when an operation cannot fill the fixed-function units, the
// runtime starts the next step's independent work on the idle ones. Back-to-back steps then
// repeat at the busiest resource's occupancy, not at one step's latency:
//
//   interval = max(sum macs / (ff_units * f_mem), sum core_s, sum mem_s) + host_launch_s
//   time(N steps) = latency(step) + (N - 1) * interval
//
// Energy: macs * (E_mul + E_add) + other_flops * E_core_flop + bytes * E_byte.
#ifndef NEUPIMS_HW_HPIM_HPIM_MODEL_H_
#define NEUPIMS_HW_HPIM_HPIM_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::hw::hpim {

struct HpimSpec {
  std::string name;
  std::string description;
  int vaults = 32;
  double memory_clock_hz = 312.5e6;  // also the fixed-function units' clock
  int ff_units = 444;                // multiplier + adder pairs (FP32)
  int core_count = 4;
  double core_clock_hz = 2e9;
  double core_flops_per_cycle = 1;
  double internal_bytes_per_s = 0;
  int64_t memory_bytes = 0;
  double host_launch_s = 0;  // host spawns a PIM kernel and synchronises with it
  double ff_call_s = 0;      // the programmable core calls the fixed-function units
  double ff_mul_energy_j = 0;
  double ff_add_energy_j = 0;
  double core_flop_energy_j = 0;
  double byte_energy_j = 0;
  int bytes_per_element = 4;  // FP32

  double ff_macs_per_s() const { return ff_units * memory_clock_hz; }
  double core_flops_per_s() const { return core_count * core_clock_hz * core_flops_per_cycle; }
};

absl::StatusOr<HpimSpec> LoadHpimSpec(absl::string_view name_or_path);
std::vector<std::string> BuiltinHpimNames();

// One operation (a layer, or an NN training op).
struct PimOp {
  int64_t macs = 0;        // on the fixed-function units
  double other_flops = 0;  // on the programmable core
  int64_t bytes = 0;       // read and written in the stack
  int64_t ff_width = 0;    // units the op can occupy at once (0: all of them)
};

struct PimCost {
  double time_s = 0;
  double energy_j = 0;
  double ff_s = 0, core_s = 0, memory_s = 0;
  double ff_utilization = 0;  // units busy during the fixed-function phase
  int launches = 0;           // host kernel launches
};

struct StepTiming {
  double latency_s = 0;   // one step alone
  double interval_s = 0;  // between back-to-back steps with operation pipelining
  double TimeS(int64_t steps) const {
    return steps <= 0 ? 0 : latency_s + static_cast<double>(steps - 1) * interval_s;
  }
};

class HpimModel {
 public:
  explicit HpimModel(HpimSpec spec) : spec_(std::move(spec)) {}

  // One operation; `recursive`: the core calls the fixed-function units (one kernel).
  absl::StatusOr<PimCost> Cost(const PimOp& op, bool recursive = true) const;
  // A training or inference step of `ops` in order; with `pipelined`, steps overlap.
  absl::StatusOr<StepTiming> Steps(const std::vector<PimOp>& ops, bool recursive = true,
                                   bool pipelined = true) const;

  const HpimSpec& spec() const { return spec_; }

 private:
  HpimSpec spec_;
};

}  // namespace neupims::hw::hpim

#endif  // NEUPIMS_HW_HPIM_HPIM_MODEL_H_
