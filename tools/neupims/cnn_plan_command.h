// `neupims cnn plan` and `neupims cnn pareto`: DONNA's partition of a CNN over a cluster of
// devices (paper 003): the stages, per-stage time and energy, throughput; and the alpha sweep
// with the throughput-energy Pareto front.
#ifndef NEUPIMS_TOOLS_NEUPIMS_CNN_PLAN_COMMAND_H_
#define NEUPIMS_TOOLS_NEUPIMS_CNN_PLAN_COMMAND_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterCnnPlanCommands(CLI::App* cnn, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_CNN_PLAN_COMMAND_H_
