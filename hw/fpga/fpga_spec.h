// Parameters of a DNNVM-style FPGA CNN accelerator (paper 002, sec. 3.1 and 6.1), as typed data
// loaded from configs/fpga/<name>.json.
//
// The compute array multiplies ic_p/2 input channels x oc_p output channels x h_p output rows
// per cycle: the paper's ic_p counts operations (a multiply and an add), so ZU2's 24/12/4 is
// 576 INT8 MACs per cycle, 380.16 GOP/s at 330 MHz, and ZU9's 32/16/8 is 4.05 TOP/s on three
// cores (sec. 3.1; the same arrays as Xilinx's DPU B1152 and B4096). Every figure's source is
// in docs/offload.md.
#ifndef NEUPIMS_HW_FPGA_FPGA_SPEC_H_
#define NEUPIMS_HW_FPGA_FPGA_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/units.h"

namespace neupims::hw::fpga {

struct FpgaSpec {
  std::string name;
  std::string description;
  double frequency_mhz = 330;
  // Cores work on different images of a batch at once and share the DDR (Table 4: ZU9 runs
  // batch 3 on three cores).
  int cores = 1;
  int ic_p = 24;  // operations along input channels per cycle (ic_p / 2 MACs)
  int oc_p = 12;  // output channels per cycle
  int h_p = 4;    // output rows per cycle
  // On-chip buffers per core (eq. 6: B_in, B_weights, B_out).
  int64_t input_buffer_bytes = 0;
  int64_t weight_buffer_bytes = 0;
  int64_t output_buffer_bytes = 0;
  int bytes_per_element = 1;  // INT8 feature maps and weights
  // Off-chip DDR: the board's peak and the fraction an accelerator streaming bursts achieves.
  double ddr_peak_gb_per_s = 0;
  double ddr_efficiency = 1;
  // POOL and MISC engines: window-element operations and element-wise operations per cycle.
  int pool_ops_per_cycle = 48;
  int misc_ops_per_cycle = 48;
  // Cycles to dispatch one instruction group and fill the engines' pipelines before the first
  // tile moves (instruction fetch, decode, DDR access latency).
  int64_t group_overhead_cycles = 0;
  double power_w = 0;  // board power while running (Table 5)
  int bram18 = 0;      // Table 5, for the record
  int dsp = 0;

  Clock clock() const { return Clock{frequency_mhz}; }
  int ic_macs() const { return ic_p / 2; }
  int64_t macs_per_cycle() const { return int64_t{ic_macs()} * oc_p * h_p; }
  // Peak of all cores in operations per second (2 per MAC).
  double peak_ops_per_s() const { return 2.0 * macs_per_cycle() * frequency_mhz * 1e6 * cores; }
  // DDR bytes per accelerator cycle available to one of `active_cores` busy cores.
  double ddr_bytes_per_cycle(int active_cores) const {
    return ddr_peak_gb_per_s * ddr_efficiency * 1e3 / frequency_mhz / active_cores;
  }
};

// A built-in name ("zu2": configs/fpga/zu2.json) or a path to a JSON file. Errors name the file
// and the field; an unknown built-in lists the choices.
absl::StatusOr<FpgaSpec> LoadFpgaSpec(absl::string_view name_or_path);
std::vector<std::string> BuiltinFpgaNames();

}  // namespace neupims::hw::fpga

#endif  // NEUPIMS_HW_FPGA_FPGA_SPEC_H_
