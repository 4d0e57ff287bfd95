// Runs the built `neupims` binary (NEUPIMS_CLI_PATH) with arguments and captures its exit code
// and its merged stdout + stderr: the one helper of the CLI tests.
#ifndef NEUPIMS_TESTS_TOOLS_NEUPIMS_CLI_RUNNER_H_
#define NEUPIMS_TESTS_TOOLS_NEUPIMS_CLI_RUNNER_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace neupims::cli {

struct CliOutput {
  int status;
  std::string out;
};

inline CliOutput RunCli(const std::string& args) {
  const std::string command = absl::StrCat(NEUPIMS_CLI_PATH, " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  return {WEXITSTATUS(pclose(pipe)), out};
}

}  // namespace neupims::cli

#endif  // NEUPIMS_TESTS_TOOLS_NEUPIMS_CLI_RUNNER_H_
