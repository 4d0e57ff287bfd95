// neupims: the command-line front door of the NeuPIMs serving simulator.
#include "CLI/CLI.hpp"
#include "tools/neupims/cnn_command.h"
#include "tools/neupims/experiments_command.h"
#include "tools/neupims/hw_commands.h"
#include "tools/neupims/serve_command.h"
#include "tools/neupims/simulate_command.h"
#include "tools/neupims/step_command.h"
#include "tools/neupims/sweep_command.h"

int main(int argc, char** argv) {
  CLI::App app{
      "neupims - an LLM serving engine on a simulated NPU + HBM-PIM (NeuPIMs) accelerator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "neupims 0.1.0");
  int exit_code = 0;
  neupims::cli::RegisterHwCommands(app, &exit_code);
  neupims::cli::RegisterSimulateCommand(app, &exit_code);
  neupims::cli::RegisterStepCommand(app, &exit_code);
  neupims::cli::RegisterExperimentsCommand(app, &exit_code);
  neupims::cli::RegisterServeCommand(app, &exit_code);
  neupims::cli::RegisterCnnCommand(app, &exit_code);
  neupims::cli::RegisterSweepCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
