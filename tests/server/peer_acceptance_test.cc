// Acceptance with real peer clients (tests/server/peer_acceptance/): the official openai SDK
// against the HTTP API of a fast-pacing server, and @grpc/grpc-js (its LlmService built from the
// server's reflection) against the gRPC API of a realtime one, under Node. The npm packages are
// installed once into the build tree (npm install, bounded by `timeout`); a test skips, saying
// why, only when node / npm is absent or the install fails (offline).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/cleanup/cleanup.h"
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

class PeerAcceptanceTest : public ::testing::Test {
 protected:
  // The build-tree folder with the scripts and their node_modules; "" with the reason in `skip`.
  static fs::path Prepare(std::string* skip) {
    if (RunCommand("npm --version").exit_code != 0 || RunCommand("node --version").exit_code != 0) {
      *skip = "npm or node is not installed: the peer clients cannot be tried";
      return {};
    }
    const fs::path fixture = fs::path(NEUPIMS_SOURCE_DIR) / "tests/server/peer_acceptance";
    const fs::path dir = fs::path(NEUPIMS_BINARY_DIR) / "peer_acceptance";
    fs::create_directories(dir);
    // ctest -j runs the tests of this fixture as concurrent processes: one at a time copies the
    // scripts and installs, so that no test reads a package.json or node_modules another is
    // writing (seen in a fresh clone: "Cannot find package .../node_modules/openai/index.js").
    const int lock = ::open((dir / ".prepare.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
      *skip = absl::StrCat("cannot lock ", (dir / ".prepare.lock").string());
      if (lock >= 0) ::close(lock);
      return {};
    }
    const absl::Cleanup unlock = [lock] { ::close(lock); };  // closing releases the lock
    for (const char* file : {"package.json", "openai_accept.mjs", "grpc_accept.mjs"}) {
      fs::copy_file(fixture / file, dir / file, fs::copy_options::overwrite_existing);
    }
    for (const char* package : {"openai", "@grpc/grpc-js", "@grpc/proto-loader", "@grpc/reflection",
                                "grpc-health-check"}) {
      if (fs::exists(dir / "node_modules" / package / "package.json")) continue;
      const CommandResult install = RunCommand(absl::StrCat(
          "cd '", dir.string(),
          "' && timeout 300 npm install --no-audit --no-fund --fetch-retries=1 --loglevel=error"));
      if (install.exit_code != 0) {
        *skip = absl::StrCat("npm install failed (offline?), exit ", install.exit_code, ":\n",
                             install.output);
        return {};
      }
      break;
    }
    return dir;
  }

  static std::unique_ptr<Server> StartServer(Pacing pacing) {
    ServerOptions o;
    o.port = 0;
    o.metrics_port = -1;
    o.http_port = 0;
    o.http_threads = 16;
    o.runner.pacing = pacing;
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }
};

TEST_F(PeerAcceptanceTest, OpenAiSdkParsesEveryAnswerAndErrorOfTheHttpApi) {
  std::string skip;
  const fs::path dir = Prepare(&skip);
  if (dir.empty()) GTEST_SKIP() << skip;
  std::unique_ptr<Server> server = StartServer(Pacing::kFast);
  ASSERT_NE(server, nullptr);
  const CommandResult client =
      RunCommand(absl::StrCat("cd '", dir.string(), "' && timeout 180 node openai_accept.mjs ",
                              "http://127.0.0.1:", *server->http_port(), "/v1"));
  EXPECT_EQ(client.exit_code, 0) << client.output;
  EXPECT_THAT(client.output, ::testing::HasSubstr(" 0 failed")) << client.output;
  server->Shutdown();
}

TEST_F(PeerAcceptanceTest, GrpcJsUsesReflectionHealthStreamingCancelAndAbort) {
  std::string skip;
  const fs::path dir = Prepare(&skip);
  if (dir.empty()) GTEST_SKIP() << skip;
  // Realtime at speed 1: a 1,900-token stream lasts seconds, so it is live when cancelled.
  std::unique_ptr<Server> server = StartServer(Pacing::kRealtime);
  ASSERT_NE(server, nullptr);
  const CommandResult client =
      RunCommand(absl::StrCat("cd '", dir.string(), "' && timeout 180 node grpc_accept.mjs ",
                              "127.0.0.1:", server->port()));
  EXPECT_EQ(client.exit_code, 0) << client.output;
  EXPECT_THAT(client.output, ::testing::HasSubstr(" 0 failed")) << client.output;
  server->Shutdown();
}

}  // namespace
}  // namespace neupims::server
