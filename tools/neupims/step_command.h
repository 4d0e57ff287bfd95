// `neupims step`: one decode iteration of a given batch, with a per-stage breakdown.
#ifndef NEUPIMS_TOOLS_NEUPIMS_STEP_COMMAND_H_
#define NEUPIMS_TOOLS_NEUPIMS_STEP_COMMAND_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterStepCommand(CLI::App& app, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_STEP_COMMAND_H_
