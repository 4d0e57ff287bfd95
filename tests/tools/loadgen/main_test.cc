// neupims-bench's entry point (tools/loadgen/main.cc), run as a binary against an in-process
// server.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/run_command.h"
#include "tests/server/test_pki.h"

namespace neupims::loadgen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A workload larger than the process may allocate was an uncaught std::bad_alloc (SIGABRT,
// "terminate called ..."); `neupims` said "error: out of memory" and exited 1, and now so does
// neupims-bench, through the same helper (common/out_of_memory.h).
TEST(BenchMain, RunningOutOfMemoryIsAnErrorNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitized binary cannot run under ulimit -v";
#endif
  server::ServerOptions o;
  o.port = 0;
  o.metrics_port = -1;
  o.http_port = std::nullopt;
  o.runner.pacing = server::Pacing::kFast;
  o.drain_timeout = std::chrono::milliseconds(100);
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  // 10^8 requests (the flag's limit) hold several GB of workload; 1.5 GB is too little.
  const std::string command = absl::StrCat(
      "(ulimit -v 1500000; exec ", NEUPIMS_BENCH_PATH,
      " -q --no-progress -n 100000000 --synthetic 1:1 --server ", (*s)->address(), ")");
  const auto [status, out] = testing_util::RunCommand(command);
  (*s)->Shutdown();
  ASSERT_NE(status, -1) << "killed by a signal\n" << out;
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("error: out of memory"));
  EXPECT_THAT(out, Not(HasSubstr("terminate called")));
}

// Runs neupims-bench with `args`; its exit code and merged output.
std::pair<int, std::string> RunBench(const std::string& args) {
  testing_util::CommandResult r =
      testing_util::RunCommand(absl::StrCat(NEUPIMS_BENCH_PATH, " ", args));
  return {r.exit_code, std::move(r.output)};
}

// End to end against a server with mutual TLS and the bearer token: the binary with --tls-ca,
// --tls-cert, --tls-key and --auth-token-file completes every request over gRPC and https.
// Without the client certificate the https backend died of SIGPIPE (exit 141: the server drops
// the refused handshake and OpenSSL's write(2) has no MSG_NOSIGNAL); now it is a setup error.
TEST(BenchMain, LoadsAMutualTlsServerWithTheTokenAndReportsARefusedHandshake) {
  server::test_pki::TestPki pki;
  const absl::Status made = server::test_pki::MakeTestPki(
      (std::filesystem::path(::testing::TempDir()) / "bench_mtls").string(), &pki);
  if (!made.ok()) GTEST_SKIP() << made.message();
  std::ofstream(pki.Path("token")) << "bench-mtls-token\n";
  server::ServerOptions o;
  o.port = 0;
  o.metrics_port = -1;
  o.http_port = 0;
  o.runner.pacing = server::Pacing::kFast;
  o.security = {pki.server_cert, pki.server_key, pki.ca_cert, pki.Path("token")};
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string common =
      absl::StrCat("-q --no-progress -n 6 --synthetic 8:4 --connect-timeout-s 2 --tls-ca '",
                   pki.ca_cert, "' --auth-token-file '", pki.Path("token"), "'");
  const std::string cert =
      absl::StrCat(" --tls-cert '", pki.client_cert, "' --tls-key '", pki.client_key, "'");
  const std::string grpc = absl::StrCat(" --server localhost:", (*s)->port());
  const std::string https =
      absl::StrCat(" --backend openai --base-url https://localhost:", *(*s)->http_port());
  for (const std::string& backend : {grpc, https}) {
    SCOPED_TRACE(backend);
    const auto [status, out] = RunBench(common + cert + backend);
    EXPECT_EQ(status, 0) << out;
    EXPECT_THAT(out, Not(HasSubstr("error")));
  }
  // gRPC ignores SIGPIPE in this process, and an ignored signal stays ignored across exec: the
  // child gets the default disposition back, as from a shell.
  const testing_util::CommandResult refused = testing_util::RunCommand(
      absl::StrCat("env --default-signal=PIPE ", NEUPIMS_BENCH_PATH, " ", common, https));
  const auto& [status, out] = std::tie(refused.exit_code, refused.output);
  (*s)->Shutdown();
  ASSERT_NE(status, -1) << "killed by a signal\n" << out;
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("--tls-client-ca also needs --tls-cert"));
}

// A timeout of 1e308 s became a deadline through a double -> int64 nanoseconds conversion that
// overflows (undefined behaviour); --connect-timeout-s 1e308 waited without end. Both timeouts are
// at most 1e6 s (11.6 days), checked when the flags are parsed.
TEST(BenchMain, TimeoutsAreBoundedNamingTheFlag) {
  for (const char* flag : {"--connect-timeout-s 1e308", "--timeout-s 1e308", "--timeout-s nan"}) {
    const auto [status, out] = RunBench(absl::StrCat("--server 127.0.0.1:1 ", flag));
    EXPECT_EQ(status, 2) << flag << "\n" << out;
    EXPECT_THAT(out, HasSubstr(absl::StrCat(
                         std::string(flag).substr(0, std::string(flag).find(' ')), ": value ")))
        << out;
    EXPECT_THAT(out, HasSubstr("1e+06]")) << out;
  }
}

// CNN mode: a rate of 1e-308 made an infinite Poisson gap, converted to int64 nanoseconds
// (undefined); the request count had no bound, unlike -n.
TEST(BenchMain, CnnRateAndRequestsAreBoundedNamingTheFlag) {
  auto [status, out] = RunBench("--server 127.0.0.1:1 --cnn-model resnet50 --cnn-rate 1e-308");
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("--cnn-rate: value 1e-308 must be in [1e-06, 1e+09]"));
  std::tie(status, out) = RunBench("--server 127.0.0.1:1 --cnn-model resnet50 --cnn-requests 1e9");
  EXPECT_EQ(status, 2) << out;
  EXPECT_THAT(out, HasSubstr("--cnn-requests: Value 1e9 not in range 1 to 100000000"));
}

}  // namespace
}  // namespace neupims::loadgen
