// neupims: the command-line front door of the NeuPIMs serving simulator.
//
// Exit codes (docs/reliability.md, "Input guarantees"): 0 success; 1 a runtime failure (I/O,
// a port in use, out of memory, an internal error, standard output not written); 2 bad input (a
// flag, an input file or a request that the checks refuse, including every command-line parse
// error).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "CLI/CLI.hpp"
#include "common/out_of_memory.h"
#include "tools/neupims/cnn_command.h"
#include "tools/neupims/experiments_command.h"
#include "tools/neupims/hw_commands.h"
#include "tools/neupims/serve_command.h"
#include "tools/neupims/simulate_command.h"
#include "tools/neupims/step_command.h"
#include "tools/neupims/sweep_command.h"

namespace {

using neupims::kExitRuntimeError;  // common/out_of_memory.h
constexpr int kExitBadInput = 2;

// Output to a full disk or a closed pipe is an error, not a silent exit 0.
int CheckStdout(int exit_code) {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || std::cout.fail();
  if (!failed) return exit_code;
  const int error = errno;
  std::fprintf(stderr, "error: cannot write standard output: %s\n",
               error != 0 ? std::strerror(error) : "write failed");
  return exit_code != 0 ? exit_code : kExitRuntimeError;
}

}  // namespace

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
  // A run the memory checks let through (--max-memory-gb, a ulimit) that still does not fit: a
  // runtime failure saying so, not an abort with "terminate called ...".
  return neupims::ExitOnOutOfMemory(
      [&] {
        try {
          app.parse(argc, argv);
        } catch (const CLI::ParseError& e) {
          // --help and --version are "errors" with code 0; every real parse error is bad input.
          const int code = app.exit(e);
          return CheckStdout(code == 0 ? 0 : kExitBadInput);
        }
        return CheckStdout(exit_code);
      },
      "lower -n or the sizes, or raise the memory limit");
}
