// Runs a shell command and captures its exit code and merged stdout + stderr: the one helper of
// the tests that drive a program (npm, node, a script, a binary under `ulimit`) through a shell.
#ifndef NEUPIMS_TESTS_RUN_COMMAND_H_
#define NEUPIMS_TESTS_RUN_COMMAND_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace neupims::testing_util {

struct CommandResult {
  int exit_code = -1;  // -1: the shell could not start, or the command ended by a signal
  std::string output;  // stdout and stderr
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* pipe = popen(absl::StrCat(command, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace neupims::testing_util

#endif  // NEUPIMS_TESTS_RUN_COMMAND_H_
