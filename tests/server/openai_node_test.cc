// The OpenAI-compatible API driven by a real third-party client: the official `openai` npm
// package under Node (tests/server/openai_node/client.mjs) against a real server on an ephemeral
// port. The package is installed once into the build tree (npm install, bounded by `timeout`);
// the test skips, saying why, only when npm is absent or the install fails (offline).
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/run_command.h"

namespace neupims::server {
namespace {

namespace fs = std::filesystem;

using testing_util::CommandResult;
using testing_util::RunCommand;

TEST(OpenAiNodeClientTest, OfficialSdkStreamsChatAndCompletionAndGetsTypedErrors) {
  if (RunCommand("npm --version").exit_code != 0 || RunCommand("node --version").exit_code != 0) {
    GTEST_SKIP() << "npm or node is not installed: the openai npm package cannot be tried";
  }
  const fs::path fixture = fs::path(NEUPIMS_SOURCE_DIR) / "tests/server/openai_node";
  const fs::path dir = fs::path(NEUPIMS_BINARY_DIR) / "openai_node";
  fs::create_directories(dir);
  for (const char* file : {"package.json", "client.mjs"}) {
    fs::copy_file(fixture / file, dir / file, fs::copy_options::overwrite_existing);
  }
  if (!fs::exists(dir / "node_modules/openai/package.json")) {
    const CommandResult install = RunCommand(absl::StrCat(
        "cd '", dir.string(),
        "' && timeout 300 npm install --no-audit --no-fund --fetch-retries=1 --loglevel=error"));
    if (install.exit_code != 0) {
      GTEST_SKIP() << "npm install openai failed (offline?), exit " << install.exit_code << ":\n"
                   << install.output;
    }
  }

  ServerOptions o;
  o.port = 0;
  o.metrics_port = -1;
  o.http_port = 0;
  o.http_threads = 16;
  o.runner.pacing = Pacing::kFast;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const CommandResult client = RunCommand(absl::StrCat(
      "cd '", dir.string(),
      "' && timeout 120 node client.mjs http://127.0.0.1:", *(*server)->http_port(), "/v1"));
  EXPECT_EQ(client.exit_code, 0) << client.output;
  EXPECT_THAT(client.output, ::testing::HasSubstr("openai-node: ok"));
  (*server)->Shutdown();
}

}  // namespace
}  // namespace neupims::server
