// `neupims cnn`: the CNN offload half. `models` lists the built-in networks, `compile` runs the
// DNNVM compiler (paper 002) for an FPGA device and prints per-group time, the fusions chosen,
// throughput and energy.
#ifndef NEUPIMS_TOOLS_NEUPIMS_CNN_COMMAND_H_
#define NEUPIMS_TOOLS_NEUPIMS_CNN_COMMAND_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterCnnCommand(CLI::App& app, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_CNN_COMMAND_H_
