// DNNVM for the engine: compiles a CNN graph onto a DNNVM FPGA accelerator (paper 002) and
// reports what the device would take.
//
//   Graph --Canonicalize--> XGraph --Algorithm 1--> fusion candidates
//         --lower each group to hw::fpga ops, cost it--> Algorithm 2 / greedy / none
//         --> groups in execution order, per-group time and traffic, throughput, energy
//
// What runs where (sec. 6.1, "we map all operations, with the exception of fully connected
// layers, onto FPGA accelerators"): convolutions, pooling and element-wise adds (and a ReLU left
// standalone) on the FPGA; fully-connected, LRN and Softmax on the host CPU, not timed here;
// Concat is free (a strided SAVE of its producers, sec. 3.1) and so is the input.
// Throughput is the paper's: eq. 3 convolution work over the FPGA time.
#ifndef NEUPIMS_ENGINE_CNN_FPGA_COMPILER_H_
#define NEUPIMS_ENGINE_CNN_FPGA_COMPILER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/fpga/fpga_model.h"
#include "hw/fpga/fpga_spec.h"
#include "models/cnn/fusion.h"
#include "models/cnn/graph.h"
#include "models/cnn/strategy.h"

namespace neupims::engine::cnn {

// Where a node of the canonical graph executes.
enum class Placement { kFpga, kHost, kFree };
Placement PlacementOf(const models::cnn::Node& node);

// The hardware operations of `group` (nodes of the canonical `graph`), or an error if a node
// does not run on the FPGA.
absl::StatusOr<hw::fpga::Group> LowerGroup(const models::cnn::Graph& graph,
                                           const models::cnn::FusionGroup& group);

struct CompiledGroup {
  models::cnn::FusionGroup group;
  std::string label;         // node names joined by '+'
  hw::fpga::GroupCost cost;  // one image on one core, `active_cores` sharing the DDR
};

struct FpgaCompilation {
  std::string model;
  std::string device;
  models::cnn::StrategyKind strategy = models::cnn::StrategyKind::kOptimal;
  int64_t batch = 1;
  int active_cores = 1;                 // min(cores, batch)
  std::vector<CompiledGroup> groups;    // FPGA groups in execution order
  std::vector<std::string> host_nodes;  // run on the host CPU
  int candidates = 0;                   // fusion opportunities Algorithm 1 found
  int fused_groups = 0;                 // groups of more than one node
  double conv_gop = 0;                  // eq. 3 work of the whole batch
  double time_s = 0;                    // the batch on the device
  double energy_j = 0;
  double gops_per_s = 0;
  double gops_per_w = 0;
  int64_t load_bytes = 0;  // DDR traffic of the batch
  int64_t save_bytes = 0;
};

// Compiles `graph` (framework or canonical form) for `spec` with `strategy`.
absl::StatusOr<FpgaCompilation> CompileForFpga(const models::cnn::Graph& graph,
                                               const hw::fpga::FpgaSpec& spec,
                                               models::cnn::StrategyKind strategy);

}  // namespace neupims::engine::cnn

#endif  // NEUPIMS_ENGINE_CNN_FPGA_COMPILER_H_
