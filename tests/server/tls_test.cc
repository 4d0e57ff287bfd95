// TLS, mutual TLS and the bearer token on the real server::Server: gRPC clients (the generated
// stub, generic stubs for health and reflection) and cpp-httplib HTTPS clients, against a CA and
// certificates made for the test by the `openssl` command (test_pki.h).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/server/grpc_bytes.h"
#include "tests/server/server_test_util.h"
#include "tests/server/test_pki.h"

namespace neupims::server {
namespace {

using neupims::v1::CompleteResponse;
using neupims::v1::GenerateRequest;
using neupims::v1::GetServerInfoRequest;
using neupims::v1::LlmService;
using neupims::v1::ServerInfo;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kToken[] = "tls-test-token-0123456789";

std::chrono::system_clock::time_point Deadline(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

using testing_util::FromByteBuffer;
using testing_util::ToByteBuffer;

// How a client authenticates a call: nothing, raw `authorization` metadata, or gRPC's own
// bearer-token call credentials (which gRPC sends over TLS only).
struct CallAuth {
  std::string header;  // "" = none
  bool call_credentials = false;

  void Apply(grpc::ClientContext* ctx) const {
    if (call_credentials) {
      ctx->set_credentials(grpc::AccessTokenCredentials(kToken));
    } else if (!header.empty()) {
      ctx->AddMetadata("authorization", header);
    }
  }
};

const CallAuth kNoAuth{};
const CallAuth kGoodToken{absl::StrCat("Bearer ", kToken)};

// grpc.health.v1.Health/Check of the whole server; SERVING is the response bytes 08 01.
grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel, std::string* response) {
  grpc::GenericStub stub(channel);
  const grpc::ByteBuffer request = ToByteBuffer("");
  grpc::ByteBuffer reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(20));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &reply,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status status = done.get_future().get();
  *response = FromByteBuffer(reply);
  return status;
}

// One list_services request (field 7, empty) on the reflection stream; the answer's bytes in
// `response`.
grpc::Status ReflectionListServices(const std::shared_ptr<grpc::Channel>& channel,
                                    const CallAuth& auth, std::string* response) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(20));
  auth.Apply(&ctx);
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto next = [&cq] {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && ok;
  };
  call->StartCall(nullptr);
  next();
  call->Write(ToByteBuffer(std::string("\x3a\x00", 2)), nullptr);
  next();
  call->WritesDone(nullptr);
  next();
  grpc::ByteBuffer reply;
  call->Read(&reply, nullptr);
  if (next()) *response = FromByteBuffer(reply);
  grpc::Status status;
  call->Finish(&status, nullptr);
  next();
  cq.Shutdown();
  while (next()) {
  }
  return status;
}

// A channel to 127.0.0.1:port verifying the server's certificate for "localhost" against `ca`;
// with a client certificate when `cert` is given.
std::shared_ptr<grpc::Channel> TlsChannel(int port, const std::string& ca,
                                          const std::string& cert = "",
                                          const std::string& key = "") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = test_pki::ReadText(ca);
  if (!cert.empty()) {
    ssl.pem_cert_chain = test_pki::ReadText(cert);
    ssl.pem_private_key = test_pki::ReadText(key);
  }
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), grpc::SslCredentials(ssl),
                                   args);
}

std::shared_ptr<grpc::Channel> PlainChannel(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}

grpc::Status ServerInfoCall(const std::shared_ptr<grpc::Channel>& channel, const CallAuth& auth) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(10));
  auth.Apply(&ctx);
  ServerInfo info;
  return LlmService::NewStub(channel)->GetServerInfo(&ctx, GetServerInfoRequest(), &info);
}

// A short Complete: 4 prompt tokens, 3 new ones.
grpc::Status CompleteCall(const std::shared_ptr<grpc::Channel>& channel, const CallAuth& auth,
                          CompleteResponse* response) {
  GenerateRequest r;
  r.set_prompt_length(4);
  r.set_max_new_tokens(3);
  r.set_ignore_eos(true);
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(30));
  auth.Apply(&ctx);
  return LlmService::NewStub(channel)->Complete(&ctx, r, response);
}

// The value of neupims:request_errors_total{code="UNAUTHENTICATED",...} in an exposition text.
std::string UnauthenticatedCount(const std::string& text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "neupims:request_errors_total{") &&
        absl::StrContains(line, "code=\"UNAUTHENTICATED\"")) {
      return std::string(line.substr(line.rfind(' ') + 1));
    }
  }
  return "";
}

// A TCP connection to 127.0.0.1:port (the caller closes it); -1 if it failed.
int ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (fd >= 0 && connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the peer has closed `fd` (end of stream or reset), waiting at most `timeout_ms`.
bool ClosedByPeer(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  char c;
  return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

// The client side of a TLS connection on socket `fd` (OpenSSL, the server's certificate not
// checked: only the server's handling of the connection is under test), freed with it; it
// closes `fd` too when it owns it.
class TlsClientSide {
 public:
  TlsClientSide(int fd, bool owns_fd)
      : fd_(fd), owns_fd_(owns_fd), ctx_(SSL_CTX_new(TLS_client_method())), ssl_(SSL_new(ctx_)) {}
  ~TlsClientSide() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    if (owns_fd_ && fd_ >= 0) close(fd_);
  }
  TlsClientSide(const TlsClientSide&) = delete;
  TlsClientSide& operator=(const TlsClientSide&) = delete;
  int fd() const { return fd_; }
  SSL* ssl() const { return ssl_; }
  // The handshake on the socket; true when it completed.
  bool Connect() { return fd_ >= 0 && SSL_set_fd(ssl_, fd_) == 1 && SSL_connect(ssl_) == 1; }
  // Sends `request` on the connection, then reads what the server sends until it closes it.
  std::string Ask(const std::string& request) {
    if (SSL_write(ssl_, request.data(), static_cast<int>(request.size())) <= 0) return "";
    std::string answer;
    char buf[1024];
    for (int n; (n = SSL_read(ssl_, buf, sizeof buf)) > 0;) answer.append(buf, n);
    return answer;
  }

 private:
  const int fd_;
  const bool owns_fd_;
  SSL_CTX* const ctx_;
  SSL* const ssl_;
};

constexpr char kHealthThenClose[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

// A keep-alive HTTPS connection driven by hand, on the test's thread: whether the server keeps
// it open is what is under test.
class RawHttpsConnection {
 public:
  explicit RawHttpsConnection(int port) : tls_(ConnectTcp(port), /*owns_fd=*/true) {
    connected_ = tls_.Connect();
  }
  bool connected() const { return connected_; }
  int fd() const { return tls_.fd(); }
  // GET `path` on this connection; the status line, headers and body ("" if the connection
  // failed). Bodies are read by their Content-Length.
  std::string Get(const std::string& path) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n\r\n");
    if (SSL_write(tls_.ssl(), request.data(), static_cast<int>(request.size())) <= 0) return "";
    std::string response;
    char buf[4096];
    for (;;) {
      const size_t head_end = response.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t at = response.find("Content-Length: ");
        const size_t length = at == std::string::npos ? 0 : std::stoul(response.substr(at + 16));
        if (response.size() >= head_end + 4 + length) return response;
      }
      const int n = SSL_read(tls_.ssl(), buf, sizeof buf);
      if (n <= 0) return "";
      response.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  TlsClientSide tls_;
  bool connected_ = false;
};

// The sum of every sample named `name` in /metrics, read over `client`; -1 if it was not read.
double MetricSum(httplib::SSLClient& client, const std::string& name) {
  httplib::Result r = client.Get("/metrics");
  if (!r || r->status != 200) return -1;
  double sum = 0;
  for (const testing_util::Sample& s : testing_util::ParsePrometheus(r->body)) {
    if (s.name == name) sum += s.value;
  }
  return sum;
}

// A raw TLS client (OpenSSL, the server's certificate not checked: only the server's handling of
// the connection is under test) that completes the handshake, sends `head`, then `trickle` one
// byte (one TLS record) every `interval`, until the server closes the connection or `trickle`
// runs out. Everything runs on its own thread: an SSL object is not shared between threads.
class TlsTrickler {
 public:
  TlsTrickler(int port, std::string head, std::string trickle, absl::Duration interval) {
    std::signal(SIGPIPE, SIG_IGN);  // a write to the closed connection must fail, not kill
    thread_ = std::thread([=, this] { Run(port, head, trickle, interval); });
  }
  ~TlsTrickler() {
    stop_ = true;
    thread_.join();
  }
  // Waits (at most `timeout`) for the client to end; true if the server closed the connection
  // before the trickle ran out.
  bool ClosedByServerWithin(absl::Duration timeout) const {
    const absl::Time end = absl::Now() + timeout;
    while (!done_ && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
    return closed_by_server_;
  }
  bool handshake_done() const { return handshake_done_; }
  // What the server sent (read it once ClosedByServerWithin has returned true).
  const std::string& received() const { return received_; }

 private:
  void Run(int port, const std::string& head, const std::string& trickle, absl::Duration interval) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
        SSL_connect(ssl) == 1) {
      handshake_done_ = true;
      bool open = head.empty() || SSL_write(ssl, head.data(), static_cast<int>(head.size())) > 0;
      for (size_t i = 0; open && i < trickle.size() && !stop_; ++i) {
        open = SSL_write(ssl, &trickle[i], 1) == 1;
        pollfd p{fd, POLLIN, 0};
        if (open && poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(interval))) > 0) {
          open = ReadUntilClosed(ssl, fd);
        }
      }
      closed_by_server_ = !open;
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    done_ = true;
  }
  // Reads what the server sent; false once it has closed the connection (or broken it). The
  // socket is non-blocking meanwhile: a TLS 1.3 server's session tickets make it readable with
  // no data to read, and a blocking SSL_read would then wait for the server's answer, ending the
  // trickle after its first byte.
  bool ReadUntilClosed(SSL* ssl, int fd) {
    const int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    char buf[4096];
    bool open = true;
    for (;;) {
      const int n = SSL_read(ssl, buf, sizeof buf);
      if (n > 0) {
        received_.append(buf, static_cast<size_t>(n));
        continue;
      }
      pollfd p{fd, POLLIN, 0};
      if (SSL_get_error(ssl, n) != SSL_ERROR_WANT_READ) {
        open = false;
      } else if (poll(&p, 1, 100) > 0) {
        continue;
      }
      break;
    }
    fcntl(fd, F_SETFL, flags);
    return open;
  }

  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> closed_by_server_{false};
  std::atomic<bool> handshake_done_{false};
  std::string received_;
};

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new test_pki::TestPki();
    const absl::Status s = test_pki::MakeTestPki(
        (std::filesystem::path(::testing::TempDir()) / "tls_test").string(), pki_);
    ASSERT_TRUE(s.ok()) << s;
    token_file_ = pki_->Path("token");
    std::ofstream(token_file_) << kToken << "\n";
  }
  static void TearDownTestSuite() {
    if (!pki_->dir.empty()) std::filesystem::remove_all(pki_->dir);
    delete pki_;
    pki_ = nullptr;
  }

  void SetUp() override {
    ASSERT_FALSE(pki_->ca_cert.empty()) << "no test PKI (see the set-up failure above)";
  }

  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // Fast pacing, no metrics port, the HTTP API on a free port.
  static ServerOptions Options(bool tls, bool mutual, bool token) {
    ServerOptions o;
    o.port = 0;
    o.metrics_port = -1;
    o.http_port = 0;
    o.http_threads = 16;
    o.runner.pacing = Pacing::kFast;
    o.drain_timeout = std::chrono::milliseconds(5000);
    if (tls) {
      o.security.tls_cert = pki_->server_cert;
      o.security.tls_key = pki_->server_key;
    }
    if (mutual) o.security.tls_client_ca = pki_->ca_cert;
    if (token) o.security.auth_token_file = token_file_;
    return o;
  }

  void StartServer(const ServerOptions& options) {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  // A new HTTPS client, which gives up after `timeout_s`, is answered 200 on `path`: what a
  // connection that holds no thread must not keep waiting.
  void ExpectANewClientServed(const char* path, int timeout_s) const {
    std::unique_ptr<httplib::SSLClient> fresh = HttpsClient();
    fresh->set_connection_timeout(timeout_s, 0);
    fresh->set_read_timeout(timeout_s, 0);
    httplib::Result r = fresh->Get(path);
    ASSERT_TRUE(r) << "the new client was not served: " << static_cast<int>(r.error());
    EXPECT_EQ(r->status, 200);
  }

  // An HTTPS client verifying the server against the test CA (and presenting the test client
  // certificate when asked).
  std::unique_ptr<httplib::SSLClient> HttpsClient(bool client_cert = false) const {
    auto c = client_cert ? std::make_unique<httplib::SSLClient>("127.0.0.1", *server_->http_port(),
                                                                pki_->client_cert, pki_->client_key)
                         : std::make_unique<httplib::SSLClient>("127.0.0.1", *server_->http_port());
    c->set_ca_cert_path(pki_->ca_cert.c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(10, 0);
    c->set_read_timeout(30, 0);
    return c;
  }

  static test_pki::TestPki* pki_;
  static std::string token_file_;
  std::unique_ptr<Server> server_;
};

test_pki::TestPki* TlsTest::pki_ = nullptr;
std::string TlsTest::token_file_;

// ---- gRPC

TEST_F(TlsTest, GrpcOverTlsServesAClientThatTrustsTheCa) {
  StartServer(Options(/*tls=*/true, /*mutual=*/false, /*token=*/false));
  auto channel = TlsChannel(server_->port(), pki_->ca_cert);
  CompleteResponse response;
  const grpc::Status s = CompleteCall(channel, kNoAuth, &response);
  ASSERT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
  EXPECT_EQ(response.tokens_size(), 3);
  EXPECT_EQ(response.complete().completion_tokens(), 3);
  std::string health;
  ASSERT_TRUE(HealthCheck(channel, &health).ok());
  EXPECT_EQ(health, std::string("\x08\x01", 2));  // SERVING
  std::string services;
  ASSERT_TRUE(ReflectionListServices(channel, kNoAuth, &services).ok());
  EXPECT_THAT(services, HasSubstr("neupims.v1.LlmService"));
}

TEST_F(TlsTest, GrpcOverTlsRefusesPlaintextClientsAndClientsThatDoNotTrustTheCa) {
  StartServer(Options(/*tls=*/true, /*mutual=*/false, /*token=*/false));
  const grpc::Status plain = ServerInfoCall(PlainChannel(server_->port()), kNoAuth);
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
  const grpc::Status untrusted =
      ServerInfoCall(TlsChannel(server_->port(), pki_->Path("rogue_ca.pem")), kNoAuth);
  EXPECT_EQ(untrusted.error_code(), grpc::StatusCode::UNAVAILABLE) << untrusted.error_message();
}

TEST_F(TlsTest, MutualTlsRefusesClientsWithoutACertificateFromTheClientCa) {
  StartServer(Options(/*tls=*/true, /*mutual=*/true, /*token=*/false));
  const grpc::Status no_cert = ServerInfoCall(TlsChannel(server_->port(), pki_->ca_cert), kNoAuth);
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAVAILABLE) << no_cert.error_message();
  const grpc::Status rogue = ServerInfoCall(
      TlsChannel(server_->port(), pki_->ca_cert, pki_->rogue_client_cert, pki_->rogue_client_key),
      kNoAuth);
  EXPECT_EQ(rogue.error_code(), grpc::StatusCode::UNAVAILABLE) << rogue.error_message();
  const grpc::Status good = ServerInfoCall(
      TlsChannel(server_->port(), pki_->ca_cert, pki_->client_cert, pki_->client_key), kNoAuth);
  EXPECT_TRUE(good.ok()) << good.error_code() << ": " << good.error_message();
}

TEST_F(TlsTest, TheTokenGuardsEveryGrpcServiceButHealth) {
  StartServer(Options(/*tls=*/true, /*mutual=*/false, /*token=*/true));
  auto channel = TlsChannel(server_->port(), pki_->ca_cert);
  const CallAuth wrong{"Bearer not-the-token"};
  for (const CallAuth* auth : {&kNoAuth, &wrong}) {
    const grpc::Status info = ServerInfoCall(channel, *auth);
    EXPECT_EQ(info.error_code(), grpc::StatusCode::UNAUTHENTICATED) << auth->header;
    EXPECT_THAT(info.error_message(), Not(HasSubstr("not-the-token")));
    CompleteResponse response;
    EXPECT_EQ(CompleteCall(channel, *auth, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    std::string services;
    EXPECT_EQ(ReflectionListServices(channel, *auth, &services).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(services, Not(HasSubstr("neupims.v1.LlmService")));
  }
  EXPECT_THAT(ServerInfoCall(channel, kNoAuth).error_message(), HasSubstr("missing bearer token"));
  EXPECT_THAT(ServerInfoCall(channel, wrong).error_message(), HasSubstr("invalid bearer token"));

  std::string health;
  const grpc::Status h = HealthCheck(channel, &health);
  ASSERT_TRUE(h.ok()) << h.error_code() << ": " << h.error_message();
  EXPECT_EQ(health, std::string("\x08\x01", 2));

  const CallAuth call_credentials{"", /*call_credentials=*/true};
  for (const CallAuth* auth : {&kGoodToken, &call_credentials}) {
    EXPECT_TRUE(ServerInfoCall(channel, *auth).ok());
    CompleteResponse response;
    const grpc::Status s = CompleteCall(channel, *auth, &response);
    EXPECT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
    EXPECT_EQ(response.complete().completion_tokens(), 3);
    std::string services;
    EXPECT_TRUE(ReflectionListServices(channel, *auth, &services).ok());
    EXPECT_THAT(services, HasSubstr("neupims.v1.LlmService"));
  }
}

TEST_F(TlsTest, TheTokenAlsoGuardsAPlaintextPort) {
  StartServer(Options(/*tls=*/false, /*mutual=*/false, /*token=*/true));
  auto channel = PlainChannel(server_->port());
  EXPECT_EQ(ServerInfoCall(channel, kNoAuth).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ServerInfoCall(channel, {"Bearer nope"}).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(ServerInfoCall(channel, kGoodToken).ok());
  std::string health;
  EXPECT_TRUE(HealthCheck(channel, &health).ok());
}

// ---- HTTP

TEST_F(TlsTest, HttpsWithTheTokenWorksAndWithoutItIs401) {
  StartServer(Options(/*tls=*/true, /*mutual=*/false, /*token=*/true));
  auto client = HttpsClient();
  const json body = {{"prompt", "Hello"}, {"max_tokens", 3}, {"ignore_eos", true}};

  httplib::Result missing = client->Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(missing) << "transport error " << static_cast<int>(missing.error());
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->get_header_value("WWW-Authenticate"), "Bearer realm=\"neupims\"");
  EXPECT_EQ(missing->get_header_value("Connection"), "close");  // its body was never read
  const json error = json::parse(missing->body);
  EXPECT_EQ(error["error"]["type"], "authentication_error");
  EXPECT_EQ(error["error"]["code"], 401);
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("missing bearer token"));

  httplib::Headers wrong = {{"Authorization", "Bearer wrong-one"}};
  httplib::Result bad = client->Get("/v1/models", wrong);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  EXPECT_THAT(bad->get_header_value("WWW-Authenticate"), HasSubstr("error=\"invalid_token\""));
  EXPECT_THAT(bad->body, AllOf(HasSubstr("invalid bearer token"), Not(HasSubstr("wrong-one"))));
  for (const char* path : {"/metrics", "/no/such/route"}) {
    httplib::Result r = client->Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 401) << path;
  }

  httplib::Result health = client->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  client->set_bearer_token_auth(kToken);
  httplib::Result ok = client->Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["usage"]["completion_tokens"], 3);
  httplib::Result metrics = client->Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  // The refusals above are counted (2 on /v1, 2 more on /metrics and the unknown route).
  EXPECT_EQ(UnauthenticatedCount(metrics->body), "4") << metrics->body;

  // Plain HTTP to the HTTPS port gets no HTTP answer.
  httplib::Client plain("127.0.0.1", *server_->http_port());
  plain.set_read_timeout(10, 0);
  httplib::Result p = plain.Get("/health");
  EXPECT_TRUE(!p || p->status == 400) << p->status;
}

// A TLS connection's socket is found through its SSL (openai_api.cc, ClientWatch): a client that
// gives up on a whole response has its request aborted, as over plain HTTP.
TEST_F(TlsTest, AnHttpsClientThatHangsUpOnAWholeResponseHasItsRequestAborted) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.runner.pacing = Pacing::kRealtime;
  o.runner.speed = 0.2;  // 2,000 tokens: minutes if it ran to its end
  StartServer(o);
  auto client = HttpsClient();
  client->set_read_timeout(1, 0);  // gives up and closes the connection after a second
  const json body = {{"prompt", "Hello"}, {"max_tokens", 2000}, {"ignore_eos", true}};
  httplib::Result r = client->Post("/v1/completions", body.dump(), "application/json");
  EXPECT_FALSE(r) << "answered " << r->status;
  // Closed by destroying the client: its stop() locks and unlocks its socket mutex inside Debian's
  // uninstrumented libcpp-httplib, which ThreadSanitizer reports as an unlock of an unlocked mutex.
  client.reset();
  ServerSnapshot s = server_->runner().Snapshot();
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10);
       (s.live != 0 || s.kv_blocks_used != 0) && absl::Now() < deadline;
       s = server_->runner().Snapshot()) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(s.live, 0) << "the request was not aborted";
  EXPECT_EQ(s.kv_blocks_used, 0);
}

TEST_F(TlsTest, HttpsWithMutualTlsNeedsTheClientCertificate) {
  StartServer(Options(/*tls=*/true, /*mutual=*/true, /*token=*/false));
  httplib::Result without = HttpsClient(/*client_cert=*/false)->Get("/v1/models");
  EXPECT_FALSE(without) << "status " << without->status;
  httplib::Result with = HttpsClient(/*client_cert=*/true)->Get("/v1/models");
  ASSERT_TRUE(with) << "transport error " << static_cast<int>(with.error());
  EXPECT_EQ(with->status, 200);
}

// A certificate signed by another CA fails the handshake: the request is never read, let alone
// served. The thread that refused it serves the next connection (one thread: the same one),
// whatever the failure left behind (OpenSSL keeps errors per thread).
TEST_F(TlsTest, HttpsWithMutualTlsRefusesAClientCertificateFromAnotherCaAndServesTheNextClient) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/true, /*token=*/false);
  o.http_threads = 1;
  StartServer(o);
  const json body = {{"prompt", "Hello"}, {"max_tokens", 3}, {"ignore_eos", true}};
  for (int round = 0; round < 3; ++round) {
    httplib::SSLClient rogue("127.0.0.1", *server_->http_port(), pki_->rogue_client_cert,
                             pki_->rogue_client_key);
    rogue.set_ca_cert_path(pki_->ca_cert.c_str());
    rogue.enable_server_certificate_verification(true);
    rogue.set_connection_timeout(10, 0);
    rogue.set_read_timeout(10, 0);
    httplib::Result refused = rogue.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_FALSE(refused) << "round " << round << ": served, status " << refused->status;
    httplib::Result good = HttpsClient(/*client_cert=*/true)->Get("/v1/models");
    ASSERT_TRUE(good) << "round " << round << ": transport error "
                      << static_cast<int>(good.error());
    EXPECT_EQ(good->status, 200);
  }
  // Not one of the completions reached the engine, nor was refused by the API (which counts).
  auto client = HttpsClient(/*client_cert=*/true);
  EXPECT_EQ(MetricSum(*client, "neupims:request_success_total"), 0);
  EXPECT_EQ(MetricSum(*client, "neupims:request_errors_total"), 0);
}

// ---- CORS (cors.h), through the real HTTP server: a browser page on kUiOrigin calling the API

constexpr char kUiOrigin[] = "http://ui.example:3000";

ServerOptions WithCors(ServerOptions o, std::vector<std::string> origins) {
  o.cors.allowed_origins = std::move(origins);
  return o;
}

// What a browser sends before a cross-origin POST with Authorization and a JSON body.
httplib::Headers PreflightFrom(const std::string& origin) {
  return {{"Origin", origin},
          {"Access-Control-Request-Method", "POST"},
          {"Access-Control-Request-Headers", "authorization,content-type"}};
}

std::string CompletionBody(bool stream) {
  return json{{"prompt", "Hello"}, {"max_tokens", 3}, {"ignore_eos", true}, {"stream", stream}}
      .dump();
}

// Preflight, then every kind of response the page can get (401, 200, an SSE stream, 404, 405):
// all carry Access-Control-Allow-Origin for the allowed origin.
void ExpectCorsForTheUi(httplib::ClientImpl& client) {
  httplib::Result pre = client.Options("/v1/completions", PreflightFrom(kUiOrigin));
  ASSERT_TRUE(pre) << "transport error " << static_cast<int>(pre.error());
  EXPECT_EQ(pre->status, 204);  // without the token
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), kUiOrigin);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Methods"), "GET, HEAD, POST");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "authorization,content-type");
  EXPECT_EQ(pre->get_header_value("Access-Control-Max-Age"), "600");
  EXPECT_EQ(pre->get_header_value("Vary"), "Origin");
  EXPECT_FALSE(pre->has_header("Access-Control-Allow-Credentials"));
  EXPECT_EQ(pre->get_header_value_count("Access-Control-Allow-Origin"), 1u);

  const httplib::Headers from_ui = {{"Origin", kUiOrigin}};
  httplib::Result refused =
      client.Post("/v1/completions", from_ui, CompletionBody(false), "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);  // the token still guards the request itself
  EXPECT_EQ(refused->get_header_value("Access-Control-Allow-Origin"), kUiOrigin);

  client.set_bearer_token_auth(kToken);
  for (bool stream : {false, true}) {
    httplib::Result r =
        client.Post("/v1/completions", from_ui, CompletionBody(stream), "application/json");
    ASSERT_TRUE(r) << stream;
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), kUiOrigin) << stream;
    EXPECT_EQ(r->get_header_value("Vary"), "Origin");
    if (stream) {
      EXPECT_THAT(r->body, HasSubstr("data: [DONE]"));
    }
  }
  httplib::Result models = client.Get("/v1/models", from_ui);
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), kUiOrigin);
  httplib::Result missing = client.Get("/v1/no-such-route", from_ui);
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->get_header_value("Access-Control-Allow-Origin"), kUiOrigin);
  httplib::Result wrong_method = client.Delete("/v1/models", from_ui);
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("Access-Control-Allow-Origin"), kUiOrigin);
  // A same-origin request (no Origin header) gets no CORS headers.
  httplib::Result same_origin = client.Get("/v1/models");
  ASSERT_TRUE(same_origin);
  EXPECT_FALSE(same_origin->has_header("Access-Control-Allow-Origin"));
  EXPECT_FALSE(same_origin->has_header("Vary"));
}

TEST_F(TlsTest, CorsPreflightNeedsNoTokenAndEveryResponseToTheOriginAllowsIt) {
  StartServer(WithCors(Options(/*tls=*/false, /*mutual=*/false, /*token=*/true), {kUiOrigin}));
  httplib::ClientImpl client("127.0.0.1", *server_->http_port());  // plain HTTP
  client.set_read_timeout(30, 0);
  ExpectCorsForTheUi(client);
}

TEST_F(TlsTest, CorsOverHttpsWithTheToken) {
  StartServer(WithCors(Options(/*tls=*/true, /*mutual=*/false, /*token=*/true),
                       {"https://other.example", kUiOrigin}));
  ExpectCorsForTheUi(*HttpsClient());
}

TEST_F(TlsTest, ADisallowedOriginGetsNoCorsHeaders) {
  StartServer(WithCors(Options(/*tls=*/false, /*mutual=*/false, /*token=*/true), {kUiOrigin}));
  httplib::Client client("127.0.0.1", *server_->http_port());
  // Neither another host nor another port nor another scheme of the allowed origin.
  for (const char* origin :
       {"http://evil.example", "http://ui.example:3001", "https://ui.example:3000", "null"}) {
    httplib::Result pre = client.Options("/v1/completions", PreflightFrom(origin));
    ASSERT_TRUE(pre) << origin;
    EXPECT_EQ(pre->status, 401) << origin;  // no preflight answer: the token check refuses it
    EXPECT_FALSE(pre->has_header("Access-Control-Allow-Origin")) << origin;
    EXPECT_FALSE(pre->has_header("Access-Control-Allow-Methods")) << origin;
    httplib::Headers headers = {{"Origin", origin},
                                {"Authorization", absl::StrCat("Bearer ", kToken)}};
    httplib::Result r = client.Get("/v1/models", headers);
    ASSERT_TRUE(r) << origin;
    EXPECT_EQ(r->status, 200) << origin;
    EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin")) << origin;
  }
}

TEST_F(TlsTest, CorsIsOffByDefault) {
  StartServer(Options(/*tls=*/false, /*mutual=*/false, /*token=*/false));
  httplib::Client client("127.0.0.1", *server_->http_port());
  httplib::Result pre = client.Options("/v1/completions", PreflightFrom(kUiOrigin));
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 405);  // as before CORS existed
  EXPECT_FALSE(pre->has_header("Access-Control-Allow-Origin"));
  httplib::Result r = client.Get("/v1/models", {{"Origin", kUiOrigin}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
}

// "*" answers "*" (browsers refuse "*" with credentials: then the origin itself), and explicit
// method and header lists are what a preflight gets, whatever it asks for.
TEST_F(TlsTest, AStarOriginIsStarUnlessCredentialsAreAllowed) {
  ServerOptions o = WithCors(Options(/*tls=*/false, /*mutual=*/false, /*token=*/false), {"*"});
  o.cors.allowed_methods = {"GET", "POST"};
  o.cors.allowed_headers = {"Content-Type"};
  StartServer(o);
  httplib::Client client("127.0.0.1", *server_->http_port());
  httplib::Result pre = client.Options("/v1/chat/completions", PreflightFrom("http://any.example"));
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Methods"), "GET, POST");
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "Content-Type");
  server_->Shutdown();

  o.cors.allow_credentials = true;
  StartServer(o);
  httplib::Client again("127.0.0.1", *server_->http_port());
  httplib::Result r = again.Get("/v1/models", {{"Origin", "http://any.example"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://any.example");
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Credentials"), "true");
  EXPECT_EQ(r->get_header_value("Vary"), "Origin");
}

// ---- Hostile HTTPS clients: the same request budget and idle-connection handling as plain HTTP
// (OpenAiApiTest's tests of each).

TEST_F(TlsTest, HttpsClientsTricklingARequestAreAnswered408AndOthersAreServed) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;  // one per trickler: without the deadline nobody else is served
  o.http_request_read_timeout = std::chrono::milliseconds(1000);
  StartServer(o);
  const int port = *server_->http_port();
  // 60 bytes, one every 250 ms, would hold each thread for 15 s.
  TlsTrickler head(port, "GET /v1/models HTTP/1.1\r\nHost: x\r\n", std::string(60, 'a'),
                   absl::Milliseconds(250));
  TlsTrickler body(port,
                   "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                   "application/json\r\nContent-Length: 100\r\n\r\n",
                   std::string(60, ' '), absl::Milliseconds(250));
  absl::SleepFor(absl::Milliseconds(500));  // both hold their threads
  httplib::Result r = HttpsClient()->Get("/v1/models");
  ASSERT_TRUE(r) << static_cast<int>(r.error());
  EXPECT_EQ(r->status, 200);
  for (const TlsTrickler* c : {&head, &body}) {
    ASSERT_TRUE(c->ClosedByServerWithin(absl::Seconds(30)));
    EXPECT_THAT(c->received(), StartsWith("HTTP/1.1 408"));
    EXPECT_THAT(c->received(), HasSubstr("not delivered within 1000 ms"));
    EXPECT_THAT(c->received(), HasSubstr("Connection: close"));
  }
}

// HTTPS clients that trickle their requests a byte to a TLS record, twice as many as the HTTP
// threads, do not hold the threads: each waits for its request's next record parked with the
// pool's watcher (its TLS session goes with it) when another connection waits for a thread. A new
// client is served at once (before, after the first two tricklers, about 5 s), and each trickled
// request is answered in full.
TEST_F(TlsTest, HttpsClientsTricklingTheirRequestsDoNotHoldThreads) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;
  o.http_request_read_timeout = std::chrono::milliseconds(30000);
  StartServer(o);
  const int port = *server_->http_port();
  const std::string request = "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::vector<std::string> answers(2 * o.http_threads);
  std::vector<std::thread> tricklers;
  for (std::string& answer : answers) {
    tricklers.emplace_back([&, port] {
      TlsClientSide tls(ConnectTcp(port), /*owns_fd=*/true);
      if (!tls.Connect()) return;
      for (size_t i = 0; i + 1 < request.size(); ++i) {
        if (SSL_write(tls.ssl(), &request[i], 1) != 1) return;
        absl::SleepFor(absl::Milliseconds(100));
      }
      answer = tls.Ask(request.substr(request.size() - 1));
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // the first two hold the threads, if they can
  std::unique_ptr<httplib::SSLClient> fresh = HttpsClient();
  fresh->set_read_timeout(2, 0);
  const absl::Time asked = absl::Now();
  httplib::Result r = fresh->Get("/v1/models");
  const absl::Duration took = absl::Now() - asked;
  for (std::thread& t : tricklers) t.join();
  ASSERT_TRUE(r) << "the new client was not served: " << static_cast<int>(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(took, absl::Seconds(2));
  for (size_t i = 0; i < answers.size(); ++i) {
    EXPECT_THAT(answers[i], StartsWith("HTTP/1.1 200")) << "trickler " << i;
    EXPECT_THAT(answers[i], HasSubstr("\"object\":\"list\"")) << "trickler " << i;
  }
}

TEST_F(TlsTest, AnHttpsHeadWithoutEndIsCutOffAtOneMebibyte) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_request_read_timeout = std::chrono::milliseconds(120000);  // only the size may end it
  StartServer(o);
  // 64 MiB of 1 KB header lines in one write: it fails when the server closes the connection
  // (before, the server took all of it, and the write succeeded).
  std::string head = "GET /v1/models HTTP/1.1\r\nHost: x\r\n";
  head.reserve(size_t{65} << 20);
  while (head.size() < (size_t{64} << 20)) {
    absl::StrAppend(&head, "X-", head.size(), ": ", std::string(1000, 'a'), "\r\n");
  }
  TlsTrickler flood(*server_->http_port(), std::move(head), "", absl::ZeroDuration());
  EXPECT_TRUE(flood.ClosedByServerWithin(absl::Seconds(60)));
  httplib::Result r = HttpsClient()->Get("/v1/models");
  ASSERT_TRUE(r) << static_cast<int>(r.error());
  EXPECT_EQ(r->status, 200);
}

TEST_F(TlsTest, IdleHttpsKeepAliveConnectionsOnEveryThreadDoNotStarveANewClient) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;
  StartServer(o);
  std::vector<std::unique_ptr<httplib::SSLClient>> idle;
  for (int i = 0; i < o.http_threads; ++i) {
    idle.push_back(HttpsClient());
    idle.back()->set_keep_alive(true);
    httplib::Result r = idle.back()->Get("/v1/models");
    ASSERT_TRUE(r) << static_cast<int>(r.error());
    ASSERT_EQ(r->status, 200);
  }
  // Both threads wait on their idle connections (for up to 5 s); the new client gives up after
  // 3 s.
  std::unique_ptr<httplib::SSLClient> fresh = HttpsClient();
  fresh->set_read_timeout(3, 0);
  httplib::Result r = fresh->Get("/v1/models");
  ASSERT_TRUE(r) << "the new client was not served: " << static_cast<int>(r.error());
  EXPECT_EQ(r->status, 200);
  for (auto& c : idle) {
    httplib::Result again = c->Get("/health");
    ASSERT_TRUE(again) << static_cast<int>(again.error());
    EXPECT_EQ(again->status, 200);
  }
}

// A client that connects and never sends its ClientHello waits up to the request read timeout;
// it gives its thread up to a client that needs one (parked with the pool's watcher), and
// stopping the server must not wait for it (as it does not for an idle keep-alive connection).
TEST_F(TlsTest, ShutdownDoesNotWaitForHttpsClientsThatNeverHandshake) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;
  o.http_request_read_timeout = std::chrono::milliseconds(120000);
  StartServer(o);
  const std::vector<int> silent =
      testing_util::SilentConnections(*server_->http_port(), o.http_threads);
  // Both threads now wait for a ClientHello. A real client is served meanwhile: before the
  // silent connections were parked, it was not (it waited for the 120 s handshake timeout).
  auto waiting = HttpsClient();
  waiting->set_connection_timeout(3, 0);
  waiting->set_read_timeout(3, 0);
  httplib::Result r = waiting->Get("/health");
  ASSERT_TRUE(r) << "not served while two silent clients hold the connections: "
                 << static_cast<int>(r.error());
  EXPECT_EQ(r->status, 200);
  const absl::Time start = absl::Now();
  server_->Shutdown();
  const absl::Duration took = absl::Now() - start;
  // Generous against the machine's load, far below the 120 s the handshakes could wait.
  EXPECT_LT(took, absl::Seconds(30));
  std::printf("shutdown with %zu silent HTTPS clients: %.2f s\n", silent.size(),
              absl::ToDoubleSeconds(took));
  for (int fd : silent) {
    EXPECT_TRUE(ClosedByPeer(fd, 10000)) << "the server kept the silent connection";
    close(fd);
  }
}

// Clients that connect and send nothing, more than there are threads, neither keep a real client
// waiting nor lose their connections: each is parked until its ClientHello arrives, then served
// (the handshake's deadline counted from when a thread first took the connection), and one that
// stays silent is closed at the request read timeout.
TEST_F(TlsTest, SilentHttpsConnectionsAreParkedServedWhenTheyHandshakeAndClosedAtTheTimeout) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;
  o.http_request_read_timeout = std::chrono::milliseconds(4000);
  StartServer(o);
  const std::vector<int> silent =
      testing_util::SilentConnections(*server_->http_port(), 2 * o.http_threads);
  ASSERT_EQ(silent.size(), 4u);
  ASSERT_NO_FATAL_FAILURE(ExpectANewClientServed("/v1/models", 2));
  // Two of the silent clients now handshake and ask: each gets its answer on its connection.
  for (int i = 0; i < 2; ++i) {
    TlsClientSide client(silent[i], /*owns_fd=*/true);
    ASSERT_TRUE(client.Connect()) << "the parked connection " << i << " lost its handshake";
    EXPECT_THAT(client.Ask(kHealthThenClose), StartsWith("HTTP/1.1 200"));
  }
  // The two that stay silent are closed once their request read timeout ends.
  for (size_t i = 2; i < silent.size(); ++i) {
    EXPECT_TRUE(ClosedByPeer(silent[i], 20000)) << "silent connection " << i << " was kept";
    close(silent[i]);
  }
}

// A parked client whose ClientHello comes at once, while the only thread is held by another
// client's stalled handshake, waits in the queue for that thread: the wait is the server's, not
// the client's, so its handshake still gets its whole timeout (before, the time queued counted
// against it, and the connection was closed with no answer once the thread was free).
TEST_F(TlsTest, AParkedConnectionsWaitForAThreadDoesNotCountAgainstItsHandshake) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 1;
  o.http_request_read_timeout = std::chrono::milliseconds(1500);
  StartServer(o);
  const int port = *server_->http_port();
  const int parked = ConnectTcp(port);
  ASSERT_GE(parked, 0);
  absl::SleepFor(absl::Milliseconds(100));  // the thread waits for its first bytes
  const int stalled = ConnectTcp(port);
  ASSERT_GE(stalled, 0);
  // One byte of a TLS record: the thread parks `parked`, takes this one and waits for the rest
  // of its handshake until its timeout (1.5 s).
  ASSERT_EQ(send(stalled, "\x16", 1, MSG_NOSIGNAL), 1);
  absl::SleepFor(absl::Milliseconds(100));
  TlsClientSide client(parked, /*owns_fd=*/true);
  // The ClientHello goes out 0.2 s after the connect; the server reads it once the stalled
  // handshake gives the thread up (about 1.6 s after the connect).
  EXPECT_TRUE(client.Connect()) << "the handshake was refused though it began at 0.2 s";
  EXPECT_THAT(client.Ask(kHealthThenClose), StartsWith("HTTP/1.1 200"));
  close(stalled);
}

// A TLS 1.3 client over memory BIOs, the bytes on the wire moved by hand, so that it can stop at
// a chosen point of its handshake (the server's certificate not checked): 20 bytes into its
// ClientHello, or with its Finished, the handshake's last message, written but not sent (the
// server then waits for it, as for a client that stalls after reading the server's flight).
class HandTlsClient {
 public:
  enum class Stop { kInClientHello, kBeforeFinished };

  HandTlsClient(int port, Stop stop) : tls_(ConnectTcp(port), /*owns_fd=*/true) {
    SSL* const ssl = tls_.ssl();
    if (tls_.fd() < 0 || SSL_set_min_proto_version(ssl, TLS1_3_VERSION) != 1) return;
    SSL_set_bio(ssl, BIO_new(BIO_s_mem()), BIO_new(BIO_s_mem()));  // the SSL owns both
    SSL_set_connect_state(ssl);
    if (SSL_do_handshake(ssl) != -1) return;  // it must wait for the server: the hello is out
    TakeWritten();
    if (stop == Stop::kInClientHello) {
      started_ = Send(20);
      return;
    }
    // The hello, then the server's flight until the handshake is done on the client's side.
    if (!Send(pending_.size())) return;
    int r = -1;
    while (r != 1 && Receive()) r = SSL_do_handshake(ssl);
    TakeWritten();  // the client's Finished
    started_ = r == 1 && !pending_.empty();
  }
  // Whether it stopped where it was asked to, with bytes left to send.
  bool started() const { return started_; }
  int fd() const { return tls_.fd(); }
  // Goes on from where it stopped, asks `request`, and returns what the server answered until
  // it closed the connection ("" if the handshake failed).
  std::string GoOnAndAsk(const std::string& request) {
    SSL* const ssl = tls_.ssl();
    if (!Send(pending_.size())) return "";
    while (SSL_is_init_finished(ssl) != 1) {
      if (!Receive()) return "";
      const int r = SSL_do_handshake(ssl);
      if (r != 1 && SSL_get_error(ssl, r) != SSL_ERROR_WANT_READ) return "";
      TakeWritten();
      if (!Send(pending_.size())) return "";
    }
    if (SSL_write(ssl, request.data(), static_cast<int>(request.size())) <= 0) return "";
    TakeWritten();
    if (!Send(pending_.size())) return "";
    std::string answer;
    char buf[1024];
    while (Receive()) {
      for (int n; (n = SSL_read(ssl, buf, sizeof buf)) > 0;) answer.append(buf, n);
    }
    return answer;
  }

 private:
  // What the client wrote to its output BIO, appended to pending_.
  void TakeWritten() {
    char buf[4096];
    for (int n; (n = BIO_read(SSL_get_wbio(tls_.ssl()), buf, sizeof buf)) > 0;) {
      pending_.append(buf, n);
    }
  }
  // Sends the first `bytes` of pending_.
  bool Send(size_t bytes) {
    bytes = std::min(bytes, pending_.size());
    if (send(tls_.fd(), pending_.data(), bytes, MSG_NOSIGNAL) != static_cast<ssize_t>(bytes)) {
      return false;
    }
    pending_.erase(0, bytes);
    return true;
  }
  // One read from the socket (waiting up to 30 s) into the input BIO; false at the end of the
  // stream, on an error or at the timeout.
  bool Receive() {
    pollfd p{tls_.fd(), POLLIN, 0};
    char buf[16384];
    const ssize_t n = poll(&p, 1, 30000) > 0 ? recv(tls_.fd(), buf, sizeof buf, 0) : -1;
    return n > 0 && BIO_write(SSL_get_rbio(tls_.ssl()), buf, static_cast<int>(n)) == n;
  }

  TlsClientSide tls_;
  std::string pending_;  // written by the client, not yet sent
  bool started_ = false;
};

// The fixture's check for a client whose handshake stalls at `stop`: on the server's only
// thread (120 s handshake timeout), a new client is served meanwhile, and the stalled one is
// answered 200 when it goes on.
class TlsStallTest : public TlsTest {
 protected:
  void ExpectAStalledHandshakeParkedAndServed(HandTlsClient::Stop stop) {
    ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
    o.http_threads = 1;
    o.http_request_read_timeout = std::chrono::milliseconds(120000);
    StartServer(o);
    HandTlsClient stalled(*server_->http_port(), stop);
    ASSERT_TRUE(stalled.started());
    absl::SleepFor(absl::Milliseconds(200));  // the only thread waits for the client
    ASSERT_NO_FATAL_FAILURE(ExpectANewClientServed("/v1/models", 3));
    EXPECT_THAT(stalled.GoOnAndAsk(kHealthThenClose), StartsWith("HTTP/1.1 200"));
  }
};

// A client that stops in the middle of its ClientHello gives its thread up to a client that
// needs one (parked with the pool's watcher, as a connection that sends nothing is), and its
// handshake goes on when the rest comes. Before, it held its thread until the request read
// timeout, and the client waiting for that thread was not served.
TEST_F(TlsStallTest, AHandshakeThatStallsIsParkedAndGoesOnWhenTheRestComes) {
  ExpectAStalledHandshakeParkedAndServed(HandTlsClient::Stop::kInClientHello);
}

// The same for a client that stops with its Finished unsent, after reading the server's flight
// (where a TLS server most often waits for its client): parked, and served when it goes on.
TEST_F(TlsStallTest, AHandshakeThatStallsBeforeTheClientsFinishedIsParkedAndGoesOn) {
  ExpectAStalledHandshakeParkedAndServed(HandTlsClient::Stop::kBeforeFinished);
}

// Stalled handshakes on every thread, and more: a new client is served, and each stalled one is
// closed at the request read timeout (counted from when a thread first took it).
TEST_F(TlsTest, StalledHandshakesAreClosedAtTheRequestReadTimeoutWithoutStarvingOthers) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;
  o.http_request_read_timeout = std::chrono::milliseconds(3000);
  StartServer(o);
  const absl::Time connected = absl::Now();
  std::vector<std::unique_ptr<HandTlsClient>> stalled;
  for (int i = 0; i < 4; ++i) {
    stalled.push_back(std::make_unique<HandTlsClient>(*server_->http_port(),
                                                      HandTlsClient::Stop::kInClientHello));
    ASSERT_TRUE(stalled.back()->started());
  }
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_NO_FATAL_FAILURE(ExpectANewClientServed("/health", 2));
  // The rest never comes: the server closes each connection at its deadline, 3 s after a thread
  // took it (not at once when it was parked; the upper bound is generous against the load).
  for (size_t i = 0; i < stalled.size(); ++i) {
    EXPECT_TRUE(ClosedByPeer(stalled[i]->fd(), 20000)) << "stalled client " << i << " was kept";
    const absl::Duration after = absl::Now() - connected;
    EXPECT_GE(after, absl::Milliseconds(2900)) << "stalled client " << i << " closed early";
    EXPECT_LT(after, absl::Seconds(15)) << "stalled client " << i;
  }
}

// A client that completes its handshake and then sends no request gives its thread up as well,
// and is served on its own connection when its request comes. Before, it held its thread for the
// keep-alive timeout (5 s).
TEST_F(TlsTest, HandshakenConnectionsWithoutARequestDoNotStarveANewClient) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;
  StartServer(o);
  std::vector<std::unique_ptr<RawHttpsConnection>> quiet;
  for (int i = 0; i < 4; ++i) {
    quiet.push_back(std::make_unique<RawHttpsConnection>(*server_->http_port()));
    ASSERT_TRUE(quiet.back()->connected()) << "connection " << i;
  }
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_NO_FATAL_FAILURE(ExpectANewClientServed("/v1/models", 3));
  for (size_t i = 0; i < quiet.size(); ++i) {
    EXPECT_THAT(quiet[i]->Get("/health"), StartsWith("HTTP/1.1 200")) << "connection " << i;
  }
}

// A client trickling its request (a byte every 100 ms: within every timeout for a minute) when
// the server stops is told 503 and closed: the stop does not wait for the rest of its request.
TEST_F(TlsTest, ShutdownDoesNotWaitForAnHttpsClientTricklingARequest) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_request_read_timeout = std::chrono::milliseconds(120000);
  StartServer(o);
  TlsTrickler slow(*server_->http_port(), "GET /v1/models HTTP/1.1\r\nHost: x\r\n",
                   std::string(600, 'a'), absl::Milliseconds(100));
  for (const absl::Time end = absl::Now() + absl::Seconds(10);
       !slow.handshake_done() && absl::Now() < end;) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(slow.handshake_done());
  absl::SleepFor(absl::Milliseconds(300));  // its head is being read
  const absl::Time start = absl::Now();
  server_->Shutdown();
  const absl::Duration took = absl::Now() - start;
  // Generous against the machine's load, far below the 60 s the trickle lasts.
  EXPECT_LT(took, absl::Seconds(30));
  std::printf("shutdown with a trickling HTTPS client: %.2f s\n", absl::ToDoubleSeconds(took));
  ASSERT_TRUE(slow.ClosedByServerWithin(absl::Seconds(10)));
  EXPECT_THAT(slow.received(), StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(slow.received(), HasSubstr("the server is stopping"));
  EXPECT_THAT(slow.received(), HasSubstr("Connection: close"));
}

// An idle keep-alive connection is given up only for a connection no thread is about to take:
// with a thread free, new clients one after another leave it open.
TEST_F(TlsTest, AnIdleHttpsConnectionIsKeptWhileAThreadIsFree) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.http_threads = 2;
  StartServer(o);
  RawHttpsConnection idle(*server_->http_port());
  ASSERT_TRUE(idle.connected());
  ASSERT_THAT(idle.Get("/health"), StartsWith("HTTP/1.1 200"));
  for (int i = 0; i < 40; ++i) {
    httplib::Result r = HttpsClient()->Get("/v1/models");
    ASSERT_TRUE(r) << i << ": transport error " << static_cast<int>(r.error());
    EXPECT_EQ(r->status, 200);
    // The free thread is back waiting for a connection before the next one comes.
    absl::SleepFor(absl::Milliseconds(50));
    ASSERT_FALSE(ClosedByPeer(idle.fd(), 0)) << "the idle connection was closed at client " << i;
  }
  EXPECT_THAT(idle.Get("/health"), StartsWith("HTTP/1.1 200"));
}

// ---- Start-up checks

TEST_F(TlsTest, TheSeparateMetricsPortIsRefusedWithSecurity) {
  ServerOptions o = Options(/*tls=*/true, /*mutual=*/false, /*token=*/false);
  o.metrics_port = 0;
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), AllOf(HasSubstr("--metrics-port"), HasSubstr("-1")));
}

TEST_F(TlsTest, StartRefusesBadSecurityFilesBeforeListening) {
  ServerOptions o = Options(/*tls=*/false, /*mutual=*/false, /*token=*/false);
  o.security.tls_key = pki_->server_key;
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), AllOf(HasSubstr("--tls-key"), HasSubstr("--tls-cert")));
}

}  // namespace
}  // namespace neupims::server
