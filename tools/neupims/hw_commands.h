// `neupims hw ...`: one hardware operation on a chosen device and level of detail.
#ifndef NEUPIMS_TOOLS_NEUPIMS_HW_COMMANDS_H_
#define NEUPIMS_TOOLS_NEUPIMS_HW_COMMANDS_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

// Adds the `hw` subcommand tree to `app`. Callbacks store their exit status in *exit_code.
void RegisterHwCommands(CLI::App& app, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_HW_COMMANDS_H_
