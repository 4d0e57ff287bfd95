// `neupims cnn select` (heterogeneous-PIM offload selection, paper 000) and `neupims cnn hype`
// (Hype-training per-operation GPU+FPGA placement and power-capped schedule, paper 004).
#ifndef NEUPIMS_TOOLS_NEUPIMS_CNN_PARTITION_COMMANDS_H_
#define NEUPIMS_TOOLS_NEUPIMS_CNN_PARTITION_COMMANDS_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterCnnPartitionCommands(CLI::App* cnn, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_CNN_PARTITION_COMMANDS_H_
