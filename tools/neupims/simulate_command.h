// `neupims simulate`: offline replay of a workload through the serving engine.
#ifndef NEUPIMS_TOOLS_NEUPIMS_SIMULATE_COMMAND_H_
#define NEUPIMS_TOOLS_NEUPIMS_SIMULATE_COMMAND_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterSimulateCommand(CLI::App& app, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_SIMULATE_COMMAND_H_
