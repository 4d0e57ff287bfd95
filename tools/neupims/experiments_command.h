// `neupims experiments`: the paper's experiments from first principles -> docs/results.md.
#ifndef NEUPIMS_TOOLS_NEUPIMS_EXPERIMENTS_COMMAND_H_
#define NEUPIMS_TOOLS_NEUPIMS_EXPERIMENTS_COMMAND_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterExperimentsCommand(CLI::App& app, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_EXPERIMENTS_COMMAND_H_
