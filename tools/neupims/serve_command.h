// `neupims serve`: the gRPC serving front end on the simulated device.
#ifndef NEUPIMS_TOOLS_NEUPIMS_SERVE_COMMAND_H_
#define NEUPIMS_TOOLS_NEUPIMS_SERVE_COMMAND_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterServeCommand(CLI::App& app, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_SERVE_COMMAND_H_
