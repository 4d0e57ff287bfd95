// Acceptance with real peer clients (tests/server/peer_acceptance/): the official openai SDK
// against the HTTP API of a fast-pacing server, and @grpc/grpc-js (its LlmService built from the
// server's reflection) against the gRPC API of a realtime one, under Node; both again against
// servers with TLS and a bearer token, and with mutual TLS (a throw-away PKI, test_pki.h); and
// Debian's python3-grpcio against the KServe v2 CNN API; and headless Chromium loading a page from
// another origin that calls the HTTP API (CORS). The npm packages are installed once into
// the build tree (npm install, bounded by `timeout`); a test skips, saying why, only when node /
// npm, python3-grpcio / grpc_tools or chromium are absent, or the install fails (offline).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "server/server.h"
#include "tests/run_command.h"
#include "tests/server/test_pki.h"

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
    for (const char* file :
         {"package.json", "openai_accept.mjs", "grpc_accept.mjs", "secure_accept.mjs"}) {
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

  static ServerOptions Options(Pacing pacing) {
    ServerOptions o;
    o.port = 0;
    o.metrics_port = -1;
    o.http_port = 0;
    o.http_threads = 16;
    o.runner.pacing = pacing;
    return o;
  }
  static std::unique_ptr<Server> StartServer(Pacing pacing) { return StartServer(Options(pacing)); }
  static std::unique_ptr<Server> StartServer(const ServerOptions& o) {
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }

  // A fresh PKI (test_pki.h) and a bearer-token file `token` in it; false with the reason in `skip`
  // when the openssl command is missing.
  static bool MakePki(test_pki::TestPki* pki, std::string* skip) {
    const absl::Status made =
        test_pki::MakeTestPki((fs::path(::testing::TempDir()) / "peer_acceptance").string(), pki);
    if (!made.ok()) {
      *skip = std::string(made.message());
      return false;
    }
    std::ofstream(pki->Path("token")) << kToken << "\n";
    return true;
  }
  static constexpr char kToken[] = "qa13e-peer-token";

  // A peer script's run: exit code 0 and its summary line "N passed, 0 failed".
  static void ExpectEveryCheckPassed(const CommandResult& client) {
    EXPECT_EQ(client.exit_code, 0) << client.output;
    EXPECT_THAT(client.output, ::testing::HasSubstr(" 0 failed")) << client.output;
  }

  // secure_accept.mjs in `mode` ("token": TLS and the bearer token; "mtls": mutual TLS) against a
  // fast server with the test PKI's server certificate and what `secure` adds (the token file or
  // the client CA); `token` "-" for none. Skips without node / npm or openssl.
  static void RunSecureAccept(absl::string_view mode, absl::string_view token,
                              void (*secure)(const test_pki::TestPki&, ServerOptions*)) {
    std::string skip;
    const fs::path dir = Prepare(&skip);
    if (dir.empty()) GTEST_SKIP() << skip;
    test_pki::TestPki pki;
    if (!MakePki(&pki, &skip)) GTEST_SKIP() << skip;
    ServerOptions o = Options(Pacing::kFast);
    secure(pki, &o);
    o.security.tls_cert = pki.server_cert;
    o.security.tls_key = pki.server_key;
    std::unique_ptr<Server> server = StartServer(o);
    ASSERT_NE(server, nullptr);
    const CommandResult client = RunCommand(
        absl::StrCat("cd '", dir.string(), "' && NODE_EXTRA_CA_CERTS='", pki.ca_cert,
                     "' timeout 120 node secure_accept.mjs ", mode,
                     " https://localhost:", *server->http_port(), "/v1 localhost:", server->port(),
                     " '", pki.dir, "' ", token, " '", ProtoDir().string(), "'"));
    ExpectEveryCheckPassed(client);
    server->Shutdown();
  }
  static const fs::path& ProtoDir() {
    static const fs::path dir = fs::path(NEUPIMS_SOURCE_DIR) / "proto";
    return dir;
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
  ExpectEveryCheckPassed(client);
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
  ExpectEveryCheckPassed(client);
  server->Shutdown();
}

// TLS + bearer token with the real peers: the openai SDK over https (NODE_EXTRA_CA_CERTS trusts
// the test CA) with the token as apiKey, 401 in OpenAI's shape without / with a wrong one;
// grpc-js with ssl credentials and `authorization: Bearer` metadata, UNAUTHENTICATED without it,
// health without it.
TEST_F(PeerAcceptanceTest, OpenAiSdkAndGrpcJsOverTlsWithTheBearerToken) {
  RunSecureAccept("token", kToken, [](const test_pki::TestPki& pki, ServerOptions* o) {
    o->security.auth_token_file = pki.Path("token");
  });
}

// Mutual TLS: grpc-js and node's https with the client certificate are served; without one, or
// with one of another CA, the handshake is refused (health too, since TLS comes before it).
TEST_F(PeerAcceptanceTest, MutualTlsRefusesGrpcJsAndHttpsClientsWithoutATrustedCertificate) {
  RunSecureAccept("mtls", "-", [](const test_pki::TestPki& pki, ServerOptions* o) {
    o->security.tls_client_ca = pki.ca_cert;
  });
}

// The KServe v2 CNN API with Debian's python3-grpcio (stubs generated by grpc_tools from
// proto/inference): over TLS with the token on a fast server, and cancel / deadline on a realtime
// one too slow (speed 1e-4) for an image to finish; the cancelled call leaves the in-flight count.
TEST_F(PeerAcceptanceTest, PythonGrpcioDrivesTheKserveV2CnnApi) {
  if (RunCommand("/usr/bin/python3 -c 'import grpc, grpc_tools'").exit_code != 0) {
    GTEST_SKIP() << "python3-grpcio or python3-grpc-tools is not installed (Debian packages): "
                    "the Python KServe client cannot be tried";
  }
  std::string skip;
  test_pki::TestPki pki;
  if (!MakePki(&pki, &skip)) GTEST_SKIP() << skip;
  ServerOptions fast = Options(Pacing::kFast);
  fast.http_port = std::nullopt;
  fast.cnn.models = {"resnet50"};
  fast.security.tls_cert = pki.server_cert;
  fast.security.tls_key = pki.server_key;
  fast.security.auth_token_file = pki.Path("token");
  ServerOptions slow = Options(Pacing::kRealtime);
  slow.http_port = std::nullopt;
  slow.cnn.models = {"resnet50"};
  slow.runner.speed = 1e-4;  // seconds of wall time per image: none finishes during the test
  std::unique_ptr<Server> fast_server = StartServer(fast);
  std::unique_ptr<Server> slow_server = StartServer(slow);
  ASSERT_NE(fast_server, nullptr);
  ASSERT_NE(slow_server, nullptr);
  const fs::path out = fs::path(pki.dir) / "py";
  const CommandResult client =
      RunCommand(absl::StrCat("timeout 120 /usr/bin/python3 '", NEUPIMS_SOURCE_DIR,
                              "/tests/server/peer_acceptance/cnn_accept.py' '", ProtoDir().string(),
                              "' '", out.string(), "' localhost:", fast_server->port(), " '",
                              pki.ca_cert, "' ", kToken, " 127.0.0.1:", slow_server->port()));
  ExpectEveryCheckPassed(client);
  // The server sees the client's cancel (RST_STREAM) and the deadline on its own thread.
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // hang guard
  while (slow_server->cnn_runner()->in_flight() > 0 && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(slow_server->cnn_runner()->in_flight(), 0) << "the cancelled / expired calls stay";
  fast_server->Shutdown();
  slow_server->Shutdown();
}

// CORS (docs/api.md) with a real browser: headless Chromium loads cors_page.html from a second
// server on another origin, and the page calls the API with the bearer token (preflights
// included), reads the 401 error object without it and a streamed completion to [DONE]. Without
// --allowed-origins the browser refuses every answer to the page. Skips when chromium is absent.
TEST_F(PeerAcceptanceTest, ABrowserPageOnAnotherOriginCallsTheApiWithCors) {
  if (RunCommand("chromium --version").exit_code != 0) {
    GTEST_SKIP() << "chromium is not installed: the browser cannot be tried";
  }
  std::ifstream in(fs::path(NEUPIMS_SOURCE_DIR) / "tests/server/peer_acceptance/cors_page.html");
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(page.empty());
  httplib::Server page_server;
  page_server.Get("/", [&page](const httplib::Request&, httplib::Response& res) {
    res.set_content(page, "text/html");
  });
  const int page_port = page_server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(page_port, 0);
  std::thread page_thread([&page_server] { page_server.listen_after_bind(); });
  const absl::Cleanup stop_page = [&] {
    page_server.stop();
    page_thread.join();
  };
  const fs::path token = fs::path(::testing::TempDir()) / "cors_browser_token";
  std::ofstream(token) << kToken << "\n";
  // The API as localhost, the page as 127.0.0.1: two origins. Chromium dumps the DOM when its
  // virtual-time budget runs out, which under load (rarely, about once in 40 runs) came before
  // the page's script had written anything: the page still says "pending", a result of the
  // harness's timing, not of the server. Only that is loaded again (at most three times), each
  // time with a profile of its own; any answer the script did write is checked as it is.
  auto load_page = [&](const Server& server) {
    CommandResult seen;
    for (int attempt = 1; attempt <= 3; ++attempt) {
      const fs::path profile =
          fs::path(::testing::TempDir()) / absl::StrCat("cors_chromium_", ::getpid(), "_", attempt);
      fs::remove_all(profile);
      seen = RunCommand(absl::StrCat(
          "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run "
          "--disable-background-networking --disable-component-update --disable-sync "
          "--user-data-dir='",
          profile.string(),
          "' --virtual-time-budget=15000 --dump-dom 'http://127.0.0.1:", page_port,
          "/?api=http://localhost:", *server.http_port(), "&token=", kToken, "' 2>/dev/null"));
      fs::remove_all(profile);
      if (!absl::StrContains(seen.output, "<pre id=\"out\">pending</pre>")) break;
    }
    return seen;
  };
  ServerOptions o = Options(Pacing::kFast);
  o.security.auth_token_file = token.string();
  o.cors.allowed_origins = {absl::StrCat("http://127.0.0.1:", page_port)};
  std::unique_ptr<Server> allowed = StartServer(o);
  ASSERT_NE(allowed, nullptr);
  const CommandResult seen = load_page(*allowed);
  allowed->Shutdown();
  EXPECT_THAT(seen.output, ::testing::HasSubstr("models 200 gpt3-7b")) << seen.output;
  EXPECT_THAT(seen.output, ::testing::HasSubstr("noauth 401 authentication_error")) << seen.output;
  EXPECT_THAT(seen.output, ::testing::HasSubstr("stream 200 events=")) << seen.output;
  EXPECT_THAT(seen.output, ::testing::HasSubstr("last=data: [DONE]")) << seen.output;

  o.cors = {};
  std::unique_ptr<Server> not_allowed = StartServer(o);
  ASSERT_NE(not_allowed, nullptr);
  const CommandResult refused = load_page(*not_allowed);
  not_allowed->Shutdown();
  EXPECT_THAT(refused.output, ::testing::HasSubstr("error TypeError: Failed to fetch"))
      << refused.output;
}

}  // namespace
}  // namespace neupims::server
