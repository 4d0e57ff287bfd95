// Integration tests of the gRPC server: the real server::Server on an ephemeral loopback port,
// driven by real gRPC C++ clients (the generated LlmService stub, generic stubs for health and
// reflection) and a plain HTTP/1.0 client for /metrics.
//
// Timing: "fast" pacing wherever wall time does not matter. Tests that need a request to stay
// live (abort, cancel, deadline, queue full, drain) use realtime pacing with a long request and
// end it early, so they never wait for it to finish; those that wait for its KV blocks to be
// freed run it slower than the 15 s they are willing to poll, so it cannot end on its own. The
// only wall-clock bounds are those generous waits; the pacing test asserts a lower bound only.
// The metrics endpoint is off except where a test reads it (stopping it takes ~2 s).
#include "server/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "server/tokenizer.h"
#include "tests/server/grpc_bytes.h"
#include "tests/server/server_test_util.h"

namespace neupims::server {
namespace {

using neupims::v1::AbortRequest;
using neupims::v1::AbortResponse;
using neupims::v1::CompleteResponse;
using neupims::v1::GenerateComplete;
using neupims::v1::GenerateRequest;
using neupims::v1::GenerateResponse;
using neupims::v1::GetModelInfoRequest;
using neupims::v1::GetServerInfoRequest;
using neupims::v1::LlmService;
using neupims::v1::ModelInfo;
using neupims::v1::ServerInfo;
using neupims::v1::Token;
using ::testing::Contains;

constexpr char kModel[] = "gpt3-7b";
// A request that outlives every realtime test (it is always ended early): about 9 simulated
// seconds for GPT3-7B on NeuPIMs, so ~9 s of wall time at speed 1 and ~45 s at kSlowSpeed.
constexpr int64_t kLongPrompt = 16;
constexpr int64_t kLongTokens = 2000;
// Tests that wait for a request's KV blocks to be freed run a long request at this speed, so that
// it cannot simply finish on its own within PollInfo's bound.
constexpr double kSlowSpeed = 0.2;

// No metrics endpoint unless a test reads it: stopping the exposer (civetweb) takes ~2 s.
ServerOptions FastOptions(bool metrics = false) {
  ServerOptions o;
  o.port = 0;
  o.metrics_port = metrics ? 0 : -1;
  o.http_port = std::nullopt;  // the OpenAI API has its own tests (openai_api_test.cc)
  o.runner.pacing = Pacing::kFast;
  o.drain_timeout = std::chrono::milliseconds(5000);
  return o;
}

ServerOptions RealtimeOptions(double speed) {
  ServerOptions o = FastOptions();
  o.runner.pacing = Pacing::kRealtime;
  o.runner.speed = speed;
  return o;
}

GenerateRequest LengthRequest(int64_t prompt_length, int64_t max_new_tokens, uint64_t seed = 1,
                              bool ignore_eos = true) {
  GenerateRequest r;
  r.set_prompt_length(prompt_length);
  r.set_max_new_tokens(max_new_tokens);
  r.set_seed(seed);
  r.set_ignore_eos(ignore_eos);
  return r;
}

// Everything one Generate stream delivered.
struct StreamResult {
  grpc::Status status;
  std::vector<Token> tokens;
  std::optional<GenerateComplete> complete;
  int messages_after_complete = 0;
  int empty_messages = 0;
};

void Collect(const GenerateResponse& resp, StreamResult* out) {
  if (out->complete.has_value()) ++out->messages_after_complete;
  if (resp.has_tokens()) {
    if (resp.tokens().tokens_size() == 0) ++out->empty_messages;
    for (const Token& t : resp.tokens().tokens()) out->tokens.push_back(t);
  } else if (resp.has_complete()) {
    out->complete = resp.complete();
  } else {
    ++out->empty_messages;
  }
}

// Checks the shape every successful stream must have: tokens 0..n-1 in order with
// non-decreasing simulated times and their byte-level text, then exactly one final message.
void ExpectWellFormed(const StreamResult& r) {
  ASSERT_TRUE(r.status.ok()) << r.status.error_code() << ": " << r.status.error_message();
  ASSERT_TRUE(r.complete.has_value()) << "the stream ended without a final message";
  EXPECT_EQ(r.messages_after_complete, 0);
  EXPECT_EQ(r.empty_messages, 0);
  ByteTokenizer tok;
  double last_time = 0;
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    const Token& t = r.tokens[i];
    EXPECT_EQ(t.index(), static_cast<int64_t>(i));
    EXPECT_GE(t.sim_time_s(), last_time) << "token " << i;
    EXPECT_EQ(t.text(), tok.Decode(t.id())) << "token " << i;
    last_time = t.sim_time_s();
  }
  EXPECT_EQ(r.complete->completion_tokens(), static_cast<int64_t>(r.tokens.size()));
}

// A Generate stream on the callback API: no thread per stream, so hundreds can run at once.
// The collected result may be read once Wait() returned true. The test's own synchronization uses
// std::mutex (seen by ThreadSanitizer; Debian's Abseil is not instrumented).
class AsyncStream : public grpc::ClientReadReactor<GenerateResponse> {
 public:
  AsyncStream(LlmService::Stub* stub, GenerateRequest request)
      : request_(std::move(request)), started_at_(std::chrono::steady_clock::now()) {
    stub->async()->Generate(&ctx_, &request_, this);
    StartRead(&response_);
    StartCall();
  }
  ~AsyncStream() override {
    // Never leave gRPC holding a dangling reactor, even when a test failed early.
    ctx_.TryCancel();
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return done_; });
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    {
      std::lock_guard<std::mutex> l(mu_);
      Collect(response_, &result_);
      if (response_.has_tokens()) tokens_seen_ += response_.tokens().tokens_size();
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> l(mu_);
    result_.status = s;
    done_at_ = std::chrono::steady_clock::now();
    done_ = true;
    cv_.notify_all();
  }

  void Cancel() { ctx_.TryCancel(); }
  bool Wait(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [this] { return done_; });
  }
  bool done() {
    std::lock_guard<std::mutex> l(mu_);
    return done_;
  }
  int64_t tokens_seen() {
    std::lock_guard<std::mutex> l(mu_);
    return tokens_seen_;
  }
  StreamResult result() {
    std::lock_guard<std::mutex> l(mu_);
    return result_;
  }
  // When the stream ended (valid once done()), and when the call was started.
  std::chrono::steady_clock::time_point done_at() {
    std::lock_guard<std::mutex> l(mu_);
    return done_at_;
  }
  std::chrono::steady_clock::time_point started_at() const { return started_at_; }

 private:
  grpc::ClientContext ctx_;
  GenerateRequest request_;
  const std::chrono::steady_clock::time_point started_at_;
  GenerateResponse response_;
  std::mutex mu_;
  std::condition_variable cv_;
  StreamResult result_;  // guarded by mu_, as are the next two
  int64_t tokens_seen_ = 0;
  std::chrono::steady_clock::time_point done_at_;
  bool done_ = false;
};

using testing_util::Field;
using testing_util::HealthCheck;
using testing_util::HttpGet;
using testing_util::Metric;
using testing_util::ParsePrometheus;
using testing_util::ReflectionFilesContaining;
using testing_util::ReflectionListServices;
using testing_util::Sample;

// The scrape of the metrics endpoint, parsed.
std::vector<Sample> ScrapeMetrics(int port) {
  const std::string http = HttpGet(port, "/metrics");
  const size_t body_at = http.find("\r\n\r\n");
  if (body_at == std::string::npos) return {};
  return ParsePrometheus(http.substr(body_at + 4));
}

class ServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  void StartServer(const ServerOptions& options) {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = LlmService::NewStub(channel_);
  }

  // A blocking Generate read to its end; `deadline` bounds it when given.
  StreamResult Generate(const GenerateRequest& request,
                        std::optional<std::chrono::milliseconds> deadline = std::nullopt) {
    grpc::ClientContext ctx;
    if (deadline.has_value()) ctx.set_deadline(std::chrono::system_clock::now() + *deadline);
    StreamResult out;
    std::unique_ptr<grpc::ClientReader<GenerateResponse>> reader = stub_->Generate(&ctx, request);
    GenerateResponse resp;
    while (reader->Read(&resp)) Collect(resp, &out);
    out.status = reader->Finish();
    return out;
  }

  grpc::Status Complete(const GenerateRequest& request, CompleteResponse* response) {
    grpc::ClientContext ctx;
    return stub_->Complete(&ctx, request, response);
  }

  grpc::Status Abort(const std::string& id) {
    grpc::ClientContext ctx;
    AbortRequest req;
    req.set_request_id(id);
    AbortResponse resp;
    return stub_->Abort(&ctx, req, &resp);
  }

  ServerInfo Info() {
    grpc::ClientContext ctx;
    ServerInfo info;
    const grpc::Status s = stub_->GetServerInfo(&ctx, GetServerInfoRequest(), &info);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info;
  }

  // Polls GetServerInfo until `pred` holds, for up to 15 s (generous, for sanitizers on a loaded
  // machine). Returns whether `pred` held; `last` gets the last snapshot seen.
  template <typename Pred>
  bool PollInfo(Pred pred, ServerInfo* last = nullptr) {
    ServerInfo info;
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (absl::Now() < deadline) {
      info = Info();
      if (pred(info)) {
        if (last != nullptr) *last = info;
        return true;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (last != nullptr) *last = info;
    return false;
  }

  // Nothing running, waiting or prefilling, and no KV block held.
  void ExpectEngineBecomesIdle() {
    ServerInfo last;
    EXPECT_TRUE(PollInfo(
        [](const ServerInfo& i) {
          return i.kv_blocks_used() == 0 && i.running() == 0 && i.waiting() == 0 &&
                 i.prefilling() == 0;
        },
        &last))
        << "the engine never freed the request: kv_blocks_used " << last.kv_blocks_used()
        << ", running " << last.running() << ", waiting " << last.waiting() << ", prefilling "
        << last.prefilling();
  }

  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<LlmService::Stub> stub_;
};

// ---- Start.

TEST_F(ServerTest, StartRefusesAnUnknownModel) {
  ServerOptions options = FastOptions();
  options.runner.engine.model = "gpt5-1t";
  const absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound) << s.status();
}

TEST_F(ServerTest, StartRefusesPortsInUse) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions(/*metrics=*/true)));
  ServerOptions same_grpc_port = FastOptions();
  same_grpc_port.port = server_->port();
  const absl::StatusOr<std::unique_ptr<Server>> a = Server::Start(same_grpc_port);
  ASSERT_FALSE(a.ok()) << "a second server bound gRPC port " << server_->port();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable) << a.status();
  ServerOptions same_metrics_port = FastOptions();
  same_metrics_port.metrics_port = server_->metrics_port();
  const absl::StatusOr<std::unique_ptr<Server>> b = Server::Start(same_metrics_port);
  ASSERT_FALSE(b.ok()) << "a second server bound metrics port " << server_->metrics_port();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  // The first server is unaffected.
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(Generate(LengthRequest(8, 8))));
}

// ---- Generate / Complete.

TEST_F(ServerTest, GenerateStreamsExactlyMaxNewTokensThenFinishesWithLength) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  GenerateRequest req;
  req.set_text("Hello, NeuPIMs!");
  req.set_max_new_tokens(24);
  req.set_ignore_eos(true);
  req.set_seed(42);
  req.set_request_id("hello");
  const StreamResult r = Generate(req);
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
  ASSERT_EQ(r.tokens.size(), 24u);
  EXPECT_EQ(r.complete->request_id(), "hello");
  EXPECT_EQ(r.complete->finish_reason(), neupims::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.complete->completion_tokens(), 24);
  EXPECT_EQ(r.complete->prompt_tokens(), static_cast<int64_t>(req.text().size()));
  EXPECT_GT(r.tokens.front().sim_time_s(), 0);
  EXPECT_GT(r.complete->ttft_s(), 0);
  EXPECT_GT(r.complete->tpot_s(), 0);
  EXPECT_GE(r.complete->e2e_latency_s(), r.complete->ttft_s());
  for (size_t i = 0; i < r.tokens.size(); ++i) {
    EXPECT_EQ(r.tokens[i].id(), SyntheticTokens::TokenId(42, static_cast<int64_t>(i)));
  }
  // The request has ended, so its id is free again.
  const StreamResult again = Generate(req);
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(again));
  EXPECT_EQ(again.tokens.size(), 24u);
}

TEST_F(ServerTest, GenerateWithoutIgnoreEosStopsEarlyAndDeterministically) {
  ServerOptions options = FastOptions();
  options.runner.mean_output_tokens = 16;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  constexpr int64_t kMaxNew = 256;
  // A seed whose synthetic end of sequence falls well inside max_new_tokens.
  uint64_t seed = 1;
  while (SyntheticTokens::StopLength(seed, 16) < 2 ||
         SyntheticTokens::StopLength(seed, 16) >= kMaxNew / 2) {
    ++seed;
  }
  const int64_t stop = SyntheticTokens::StopLength(seed, 16);
  GenerateRequest req = LengthRequest(32, kMaxNew, seed, /*ignore_eos=*/false);
  const StreamResult a = Generate(req);
  const StreamResult b = Generate(req);
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(a));
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(b));
  EXPECT_EQ(a.complete->finish_reason(), neupims::v1::FINISH_REASON_STOP);
  EXPECT_EQ(a.complete->completion_tokens(), stop);
  EXPECT_LT(a.complete->completion_tokens(), kMaxNew);
  EXPECT_EQ(b.complete->finish_reason(), neupims::v1::FINISH_REASON_STOP);
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    EXPECT_EQ(a.tokens[i].id(), b.tokens[i].id()) << "token " << i;
  }
  // Another seed gives other ids.
  GenerateRequest other = req;
  other.set_seed(seed + 1000);
  other.set_ignore_eos(true);
  other.set_max_new_tokens(stop);
  const StreamResult c = Generate(other);
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(c));
  int same = 0;
  for (size_t i = 0; i < a.tokens.size(); ++i) same += a.tokens[i].id() == c.tokens[i].id();
  EXPECT_LT(same, static_cast<int>(a.tokens.size()));
}

TEST_F(ServerTest, CompleteReturnsTheSameTokensAsGenerate) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  GenerateRequest req;
  req.mutable_token_ids()->add_ids(0);
  req.mutable_token_ids()->add_ids(50256);
  req.mutable_token_ids()->add_ids(1234);
  req.set_max_new_tokens(40);
  req.set_seed(9);
  req.set_ignore_eos(true);
  const StreamResult streamed = Generate(req);
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(streamed));
  CompleteResponse completed;
  const grpc::Status s = Complete(req, &completed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(completed.tokens_size(), static_cast<int>(streamed.tokens.size()));
  std::string text;
  for (int i = 0; i < completed.tokens_size(); ++i) {
    EXPECT_EQ(completed.tokens(i).index(), i);
    EXPECT_EQ(completed.tokens(i).id(), streamed.tokens[i].id()) << "token " << i;
    text += streamed.tokens[i].text();
  }
  EXPECT_EQ(completed.text(), text);
  EXPECT_EQ(completed.complete().finish_reason(), neupims::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(completed.complete().completion_tokens(), 40);
  EXPECT_EQ(completed.complete().prompt_tokens(), 3);
}

TEST_F(ServerTest, ModelAndServerInfoDescribeTheEngine) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  grpc::ClientContext ctx;
  ModelInfo model;
  ASSERT_TRUE(stub_->GetModelInfo(&ctx, GetModelInfoRequest(), &model).ok());
  EXPECT_EQ(model.name(), kModel);
  EXPECT_EQ(model.max_seq_len(), 2048);
  EXPECT_EQ(model.vocab(), 50257);
  EXPECT_GE(model.tensor_parallel(), 1);
  const ServerInfo info = Info();
  EXPECT_EQ(info.version(), kVersion);
  EXPECT_EQ(info.pacing(), "fast");
  EXPECT_GT(info.kv_blocks_total(), 0);
  EXPECT_EQ(info.kv_blocks_used(), 0);
  EXPECT_FALSE(info.draining());
}

TEST_F(ServerTest, RealtimePacingIsNoFasterThanTheSimulatedClock) {
  constexpr double kSpeed = 20;
  ASSERT_NO_FATAL_FAILURE(StartServer(RealtimeOptions(kSpeed)));
  const auto start = std::chrono::steady_clock::now();
  const StreamResult r = Generate(LengthRequest(64, 512));
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
  EXPECT_EQ(r.tokens.size(), 512u);
  EXPECT_GE(wall_s, r.complete->e2e_latency_s() / kSpeed * 0.5)
      << "simulated e2e " << r.complete->e2e_latency_s() << " s at speed " << kSpeed;
  EXPECT_EQ(Info().pacing(), "realtime");
}

// ---- Abort, cancel, deadline.

TEST_F(ServerTest, AbortEndsARunningStreamWithAborted) {
  ASSERT_NO_FATAL_FAILURE(StartServer(RealtimeOptions(1)));
  GenerateRequest req = LengthRequest(kLongPrompt, kLongTokens);
  req.set_request_id("to-abort");
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, req);
  StreamResult r;
  GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp));  // running: its first token has arrived
  Collect(resp, &r);
  const grpc::Status aborted = Abort("to-abort");
  EXPECT_TRUE(aborted.ok()) << aborted.error_code() << ": " << aborted.error_message();
  while (reader->Read(&resp)) Collect(resp, &r);
  r.status = reader->Finish();
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
  EXPECT_EQ(r.complete->finish_reason(), neupims::v1::FINISH_REASON_ABORTED);
  EXPECT_LT(r.complete->completion_tokens(), kLongTokens);
  EXPECT_EQ(r.complete->request_id(), "to-abort");
  // It is gone: aborting it again finds nothing.
  EXPECT_EQ(Abort("to-abort").error_code(), grpc::StatusCode::NOT_FOUND);
  ExpectEngineBecomesIdle();
}

TEST_F(ServerTest, AbortOfAnUnknownIdIsNotFoundAndOfAnEmptyIdInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  EXPECT_EQ(Abort("no-such-request").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Abort("").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Error messages echo what the client sent (an id, a model name, a shape). gRPC carries the
// message in a trailer, and a client drops trailers over its metadata limit (8-16 KiB), so an
// echoed 100 KB id turned NOT_FOUND into the client's own RESOURCE_EXHAUSTED ("received
// initial metadata size exceeds limit"): the code must survive, with the message cut.
TEST_F(ServerTest, AnErrorEchoingAHugeFieldKeepsItsCode) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  const grpc::Status s = Abort(std::string(100000, 'x'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message().substr(0, 200);
  EXPECT_THAT(s.error_message(), ::testing::StartsWith("no live request 'xxx"));
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("bytes in all"));
  EXPECT_LT(s.error_message().size(), 2000u);
}

TEST_F(ServerTest, ClientCancelFreesTheRequestsKvBlocks) {
  ASSERT_NO_FATAL_FAILURE(StartServer(RealtimeOptions(kSlowSpeed)));
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, LengthRequest(kLongPrompt, kLongTokens));
  StreamResult r;
  GenerateResponse resp;
  while (r.tokens.size() < 3 && reader->Read(&resp)) Collect(resp, &r);
  ASSERT_GE(r.tokens.size(), 3u);
  EXPECT_TRUE(PollInfo([](const ServerInfo& i) { return i.kv_blocks_used() > 0; }))
      << "a running request holds KV blocks";
  ctx.TryCancel();
  while (reader->Read(&resp)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectEngineBecomesIdle();
}

TEST_F(ServerTest, ClientDeadlineFreesTheRequestsKvBlocks) {
  ASSERT_NO_FATAL_FAILURE(StartServer(RealtimeOptions(kSlowSpeed)));
  const StreamResult r =
      Generate(LengthRequest(kLongPrompt, kLongTokens), std::chrono::milliseconds(300));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_FALSE(r.complete.has_value());
  ExpectEngineBecomesIdle();
}

TEST_F(ServerTest, CompleteDeadlineFreesTheRequestsKvBlocks) {
  ASSERT_NO_FATAL_FAILURE(StartServer(RealtimeOptions(kSlowSpeed)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  CompleteResponse resp;
  EXPECT_EQ(stub_->Complete(&ctx, LengthRequest(kLongPrompt, kLongTokens), &resp).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  ExpectEngineBecomesIdle();
}

// ---- Errors.

TEST_F(ServerTest, UnknownModelIsNotFound) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  GenerateRequest req = LengthRequest(8, 8);
  req.set_model("gpt5-1t");
  EXPECT_EQ(Generate(req).status.error_code(), grpc::StatusCode::NOT_FOUND);
  CompleteResponse resp;
  EXPECT_EQ(Complete(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  req.set_model(kModel);  // naming the served model is fine
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(Generate(req)));
}

TEST_F(ServerTest, InvalidRequestsAreInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  std::vector<std::pair<std::string, GenerateRequest>> cases;
  cases.emplace_back("over the context", LengthRequest(2000, 49));
  cases.emplace_back("max_new_tokens 0", LengthRequest(8, 0));
  cases.emplace_back("max_new_tokens -1", LengthRequest(8, -1));
  cases.emplace_back("negative prompt_length", LengthRequest(-5, 8));
  cases.emplace_back("zero prompt_length", LengthRequest(0, 8));
  {
    GenerateRequest r;
    r.set_max_new_tokens(8);
    cases.emplace_back("no prompt", r);
    r.set_text("");
    cases.emplace_back("empty text", r);
    r.mutable_token_ids();
    cases.emplace_back("empty token_ids", r);
    r.mutable_token_ids()->add_ids(5);
    r.mutable_token_ids()->add_ids(50257);
    cases.emplace_back("token id == vocab", r);
    r.mutable_token_ids()->set_ids(1, -1);
    cases.emplace_back("negative token id", r);
  }
  for (const auto& [what, req] : cases) {
    const StreamResult g = Generate(req);
    EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << what << ": " << g.status.error_message();
    EXPECT_TRUE(g.tokens.empty() && !g.complete.has_value()) << what;
    CompleteResponse resp;
    EXPECT_EQ(Complete(req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what;
  }
  // The largest request that fits the context is fine.
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(Generate(LengthRequest(2000, 48))));
  ExpectEngineBecomesIdle();
}

// The engine's CheckRequest is the one request check: the server returns its verdict, word for
// word, on the request as the client asked for it. Without ignore_eos the synthetic end of
// sequence would shorten the over-the-context request to fit; it is still refused.
TEST_F(ServerTest, RequestErrorsAreTheEnginesCheckOnTheRequestAsAsked) {
  const ServerOptions options = FastOptions();
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(options.runner.engine);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<std::pair<int64_t, int64_t>> cases = {{2000, 49}, {0, 8}, {-5, 8}, {8, 0}};
  for (const auto& [prompt, max_new] : cases) {
    SCOPED_TRACE(absl::StrCat("prompt ", prompt, ", max_new_tokens ", max_new));
    const absl::Status expected = (*engine)->CheckRequest({0, prompt, max_new, 0, 0});
    ASSERT_FALSE(expected.ok());
    const StreamResult g = Generate(LengthRequest(prompt, max_new, /*seed=*/1,
                                                  /*ignore_eos=*/false));
    EXPECT_EQ(g.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(g.status.error_message(), std::string(expected.message()));
    CompleteResponse resp;
    EXPECT_EQ(Complete(LengthRequest(prompt, max_new), &resp).error_message(),
              std::string(expected.message()));
  }
}

TEST_F(ServerTest, SnapshotCarriesTheServedEngineFacts) {
  ServerOptions options = FastOptions();
  options.runner.engine.max_waiting = 7;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  const ServerSnapshot s = server_->runner().Snapshot();
  ASSERT_NE(s.served, nullptr);
  EXPECT_EQ(s.served->model.name, kModel);
  EXPECT_EQ(s.served->model.max_seq_len, 2048);
  EXPECT_EQ(s.served->device.name, "neupims");
  EXPECT_EQ(s.served->mode, "neupims");
  EXPECT_EQ(s.served->max_waiting, 7);
  EXPECT_EQ(Info().max_waiting(), 7);
  EXPECT_EQ(Info().mode(), "neupims");
}

TEST_F(ServerTest, DuplicateLiveRequestIdIsAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(StartServer(RealtimeOptions(1)));
  GenerateRequest req = LengthRequest(kLongPrompt, kLongTokens);
  req.set_request_id("dup");
  AsyncStream first(stub_.get(), req);
  ASSERT_TRUE(PollInfo([&](const ServerInfo&) { return first.tokens_seen() > 0 || first.done(); }));
  ASSERT_FALSE(first.done());
  GenerateRequest second = LengthRequest(8, 8);
  second.set_request_id("dup");
  EXPECT_EQ(Generate(second).status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  CompleteResponse resp;
  EXPECT_EQ(Complete(second, &resp).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(Abort("dup").ok());
  ASSERT_TRUE(first.Wait(std::chrono::seconds(30)));
  const StreamResult r = first.result();
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
  EXPECT_EQ(r.complete->finish_reason(), neupims::v1::FINISH_REASON_ABORTED);
}

TEST_F(ServerTest, FullWaitingQueueIsResourceExhausted) {
  ServerOptions options = RealtimeOptions(1);
  options.runner.engine.max_batch = 1;
  options.runner.engine.max_waiting = 2;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  // One stream at a time, each accepted one seen by the engine before the next, until one is
  // refused: which one is refused is then deterministic.
  std::vector<std::unique_ptr<AsyncStream>> streams;
  int exhausted = 0;
  for (int i = 0; i < 8 && exhausted == 0; ++i) {
    streams.push_back(std::make_unique<AsyncStream>(
        stub_.get(), LengthRequest(kLongPrompt, kLongTokens, static_cast<uint64_t>(i))));
    AsyncStream& s = *streams.back();
    const int64_t accepted = static_cast<int64_t>(streams.size());
    ASSERT_TRUE(PollInfo([&](const ServerInfo& info) {
      return s.done() || info.running() + info.waiting() + info.prefilling() == accepted;
    })) << "stream "
        << i << " neither refused nor seen by the engine";
    if (s.done()) {
      const grpc::Status st = s.result().status;
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
      exhausted += st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
    }
  }
  EXPECT_EQ(exhausted, 1);
  // At most max_batch running plus max_waiting queued were accepted.
  EXPECT_LE(streams.size(), 1u + 1u + 2u);
  EXPECT_EQ(Info().waiting(), 2);
  for (auto& s : streams) s->Cancel();
  for (auto& s : streams) ASSERT_TRUE(s->Wait(std::chrono::seconds(30)));
  ExpectEngineBecomesIdle();
}

TEST_F(ServerTest, ConcurrentBurstOverflowsTheWaitingQueue) {
  ServerOptions options = RealtimeOptions(1);
  options.runner.engine.max_batch = 1;
  options.runner.engine.max_waiting = 2;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  // All at once: the engine also counts arrivals it has not processed yet against max_waiting.
  constexpr int kStreams = 8;
  std::vector<std::unique_ptr<AsyncStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<AsyncStream>(
        stub_.get(), LengthRequest(kLongPrompt, kLongTokens, static_cast<uint64_t>(i))));
  }
  auto refused = [&] {
    int n = 0;
    for (auto& s : streams) n += s->done();
    return n;
  };
  ServerInfo last;
  ASSERT_TRUE(PollInfo(
      [&](const ServerInfo& info) {
        return refused() + info.running() + info.waiting() + info.prefilling() == kStreams;
      },
      &last))
      << "refused " << refused() << ", running " << last.running() << ", waiting " << last.waiting()
      << ", prefilling " << last.prefilling();
  int exhausted = 0;
  for (auto& s : streams) {
    if (!s->done()) continue;
    const grpc::Status st = s->result().status;
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    exhausted += st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  EXPECT_GE(exhausted, 1);
  EXPECT_LE(last.waiting(), 2);
  EXPECT_GE(exhausted, kStreams - (1 + 1 + 2));  // at most batch + prefill + max_waiting live
  for (auto& s : streams) s->Cancel();
  for (auto& s : streams) ASSERT_TRUE(s->Wait(std::chrono::seconds(30)));
  ExpectEngineBecomesIdle();
}

// Flood: 1,000 streams at once in realtime pacing against a batch of 8 and a waiting queue of 8.
// The excess is refused with RESOURCE_EXHAUSTED at submission (no token, never in the engine),
// every stream ends, and the client's and the server's counts agree.
TEST_F(ServerTest, FloodOfAThousandRealtimeStreamsIsRefusedPromptlyAndNothingIsLost) {
  constexpr int kStreams = 1000;
  constexpr int64_t kMaxWaiting = 8;
  constexpr int64_t kTokens = 16;
  ServerOptions options = RealtimeOptions(1);
  options.metrics_port = 0;
  options.runner.engine.max_batch = 8;
  options.runner.engine.max_waiting = kMaxWaiting;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<AsyncStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_unique<AsyncStream>(
        stub_.get(), LengthRequest(16, kTokens, static_cast<uint64_t>(i + 1))));
  }
  // The waiting queue never grows past its bound while the flood lasts.
  int64_t most_waiting = 0;
  ASSERT_TRUE(PollInfo([&](const ServerInfo& info) {
    most_waiting = std::max(most_waiting, info.waiting());
    for (auto& s : streams) {
      if (!s->done()) return false;
    }
    return true;
  })) << "a stream never ended";
  EXPECT_LE(most_waiting, kMaxWaiting);
  int served = 0, refused = 0;
  std::vector<double> refusal_ms;
  for (auto& s : streams) {
    const StreamResult r = s->result();
    if (r.status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_TRUE(r.tokens.empty() && !r.complete.has_value()) << "a refusal after output";
      EXPECT_THAT(r.status.error_message(), ::testing::HasSubstr("waiting queue is full"));
      refusal_ms.push_back(
          std::chrono::duration<double, std::milli>(s->done_at() - s->started_at()).count());
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
    EXPECT_EQ(r.complete->finish_reason(), neupims::v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), kTokens);
    ++served;
  }
  EXPECT_EQ(served + refused, kStreams);
  EXPECT_GT(refused, 0);
  ExpectEngineBecomesIdle();
  // Refusals never reached the engine: it counts only the served requests.
  const std::vector<Sample> m = ScrapeMetrics(server_->metrics_port());
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "length"}}), served);
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "abort"}}), 0);
  EXPECT_EQ(Metric(m, "neupims:request_errors_total", {{"code", "RESOURCE_EXHAUSTED"}}), refused);
  std::sort(refusal_ms.begin(), refusal_ms.end());
  if (!refusal_ms.empty()) {
    // A figure for docs/reliability.md, not a bound.
    std::printf(
        "flood: %d served, %d refused; a refusal %.1f ms (median) / %.1f ms (max) after its "
        "call started; the last stream ended %.1f ms after the first call\n",
        served, refused, refusal_ms[refusal_ms.size() / 2], refusal_ms.back(),
        std::chrono::duration<double, std::milli>(
            std::max_element(streams.begin(), streams.end(),
                             [](auto& a, auto& b) { return a->done_at() < b->done_at(); })
                ->get()
                ->done_at() -
            start)
            .count());
  }
}

TEST_F(ServerTest, DrainingServerRefusesNewRequestsWithUnavailable) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  server_->runner().BeginDrain();
  EXPECT_EQ(Generate(LengthRequest(8, 8)).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  CompleteResponse resp;
  EXPECT_EQ(Complete(LengthRequest(8, 8), &resp).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(Info().draining());
}

// ---- Load.

TEST_F(ServerTest, TwoHundredConcurrentStreamsAllComplete) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  constexpr int kStreams = 200;
  std::vector<std::unique_ptr<AsyncStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    // 8..39 new tokens, so requests finish at different iterations.
    streams.push_back(std::make_unique<AsyncStream>(
        stub_.get(), LengthRequest(16 + i % 50, 8 + i % 32, static_cast<uint64_t>(i))));
  }
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(streams[i]->Wait(std::chrono::seconds(120))) << "stream " << i;
    const StreamResult r = streams[i]->result();
    ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r)) << "stream " << i;
    EXPECT_EQ(r.complete->finish_reason(), neupims::v1::FINISH_REASON_LENGTH) << "stream " << i;
    EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), 8 + i % 32) << "stream " << i;
    EXPECT_EQ(r.complete->prompt_tokens(), 16 + i % 50) << "stream " << i;
    if (!r.tokens.empty()) {
      EXPECT_EQ(r.tokens.back().id(),
                SyntheticTokens::TokenId(static_cast<uint64_t>(i), r.tokens.back().index()));
    }
  }
  ExpectEngineBecomesIdle();
}

// ---- Health, reflection, metrics.

TEST_F(ServerTest, HealthIsServingUntilDrain) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  grpc::Status st;
  EXPECT_EQ(HealthCheck(channel_, "", &st), 1) << st.error_message();
  EXPECT_EQ(HealthCheck(channel_, "neupims.v1.LlmService", &st), 1) << st.error_message();
  EXPECT_EQ(HealthCheck(channel_, "no.such.Service", &st), -1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(server_->Drain());  // nothing in flight
  EXPECT_EQ(HealthCheck(channel_, "", &st), 2) << st.error_message();
  EXPECT_EQ(HealthCheck(channel_, "neupims.v1.LlmService", &st), 2) << st.error_message();
}

TEST_F(ServerTest, ReflectionListsTheServices) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  const std::vector<std::string> services = ReflectionListServices(channel_);
  EXPECT_THAT(services, Contains("neupims.v1.LlmService"));
  EXPECT_THAT(services, Contains("grpc.health.v1.Health"));
}

// grpcurl resolves every method through reflection before calling it, health included
// (`grpcurl -plaintext host:port grpc.health.v1.Health/Check`): the symbol must resolve to a
// file that describes the service, not only be listed.
TEST_F(ServerTest, ReflectionDescribesEveryListedService) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions()));
  for (const char* service : {"grpc.health.v1.Health", "neupims.v1.LlmService"}) {
    std::vector<std::string> methods;
    for (const std::string& bytes : ReflectionFilesContaining(channel_, service)) {
      google::protobuf::FileDescriptorProto file;
      ASSERT_TRUE(file.ParseFromString(bytes));
      for (const auto& s : file.service()) {
        if (absl::StrCat(file.package(), ".", s.name()) != service) continue;
        for (const auto& m : s.method()) methods.push_back(m.name());
      }
    }
    if (std::string(service) == "grpc.health.v1.Health") {
      EXPECT_THAT(methods, ::testing::UnorderedElementsAre("Check", "Watch"));
    } else {
      EXPECT_THAT(methods, Contains("Generate"));
    }
  }
}

TEST_F(ServerTest, MetricsEndpointCountsWhatWasServed) {
  ASSERT_NO_FATAL_FAILURE(StartServer(FastOptions(/*metrics=*/true)));
  ASSERT_GT(server_->metrics_port(), 0);
  int64_t tokens = 0, prompt_tokens = 0, finished = 0;
  for (int n : {3, 7, 12}) {
    const StreamResult r = Generate(LengthRequest(10 * n, n, static_cast<uint64_t>(n)));
    ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
    tokens += static_cast<int64_t>(r.tokens.size());
    prompt_tokens += r.complete->prompt_tokens();
    ++finished;
  }
  CompleteResponse completed;
  ASSERT_TRUE(Complete(LengthRequest(5, 5), &completed).ok());
  tokens += completed.tokens_size();
  prompt_tokens += 5;
  ++finished;
  EXPECT_EQ(Generate(LengthRequest(8, 0)).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // The load gauges are sampled (under fast pacing every 64 event batches and when the engine
  // goes idle, docs/metrics.md): wait for the idle engine's sample. Counters are exact at once.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Metric(ScrapeMetrics(server_->metrics_port()), "neupims:num_requests_running") != 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const std::string http = HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_EQ(http.rfind("HTTP/1.", 0), 0u) << http;
  EXPECT_NE(http.find(" 200 "), std::string::npos) << http.substr(0, http.find('\n'));
  const size_t body_at = http.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  const std::vector<Sample> m = ParsePrometheus(http.substr(body_at + 4));
  ASSERT_FALSE(m.empty());
  for (const Sample& s : m) {
    if (s.name.rfind("neupims:", 0) != 0) {
      // prometheus-cpp's own scrape statistics, documented as the only unlabelled series.
      EXPECT_EQ(s.name.rfind("exposer_", 0), 0u) << s.name;
      continue;
    }
    EXPECT_EQ(s.labels.count("model_name") ? s.labels.at("model_name") : "", kModel) << s.name;
  }
  const double f = static_cast<double>(finished);
  EXPECT_EQ(Metric(m, "neupims:generation_tokens_total"), static_cast<double>(tokens));
  EXPECT_EQ(Metric(m, "neupims:prompt_tokens_total"), static_cast<double>(prompt_tokens));
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "length"}}), f);
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "stop"}}), 0);
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "abort"}}), 0);
  EXPECT_EQ(Metric(m, "neupims:request_errors_total", {{"code", "INVALID_ARGUMENT"}}), 1);
  EXPECT_EQ(Metric(m, "neupims:time_to_first_token_seconds_count"), f);
  EXPECT_EQ(Metric(m, "neupims:e2e_request_latency_seconds_count"), f);
  EXPECT_EQ(Metric(m, "neupims:time_to_first_token_seconds_bucket", {{"le", "+Inf"}}), f);
  EXPECT_GT(Metric(m, "neupims:time_to_first_token_seconds_sum"), 0);
  EXPECT_GT(Metric(m, "neupims:iterations_total"), 0);
  EXPECT_GT(Metric(m, "neupims:sim_time_seconds"), 0);
  EXPECT_EQ(Metric(m, "neupims:num_requests_running"), 0);
}

// ---- Limits.

TEST_F(ServerTest, PromptsAndMessagesOverTheConfiguredLimitsAreRefused) {
  ServerOptions o = FastOptions();
  o.max_message_bytes = 4096;
  o.runner.engine.max_prompt_tokens = 100;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(Generate(LengthRequest(100, 2))));
  const StreamResult long_prompt = Generate(LengthRequest(101, 2));
  EXPECT_EQ(long_prompt.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(long_prompt.status.error_message().find("max_prompt_tokens"), std::string::npos)
      << long_prompt.status.error_message();
  GenerateRequest big = LengthRequest(1, 2);
  big.set_text(std::string(8192, 'a'));
  EXPECT_EQ(Generate(big).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// ---- Faults.

TEST_F(ServerTest, AnEngineFaultEndsLiveStreamsWithInternalAndStopsServing) {
  ServerOptions o = RealtimeOptions(1);
  o.metrics_port = 0;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  AsyncStream running(stub_.get(), LengthRequest(kLongPrompt, kLongTokens));
  const absl::Time until = absl::Now() + absl::Seconds(15);
  while (running.tokens_seen() < 1 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_GE(running.tokens_seen(), 1);
  // The next Free fails: the short request's end breaks the KV cache's invariant.
  server_->runner().InjectKvFaultForTesting();
  const StreamResult shorter = Generate(LengthRequest(8, 2), std::chrono::milliseconds(15000));
  EXPECT_EQ(shorter.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(shorter.status.error_message().find("broken invariant"), std::string::npos)
      << shorter.status.error_message();
  ASSERT_TRUE(running.Wait(std::chrono::seconds(15)));
  const StreamResult r = running.result();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INTERNAL) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("injected fault"), std::string::npos)
      << r.status.error_message();
  EXPECT_FALSE(r.complete.has_value());
  // No new request is admitted, health is NOT_SERVING and the metrics count the fault.
  EXPECT_EQ(Generate(LengthRequest(8, 2)).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::Status st;
  EXPECT_EQ(HealthCheck(channel_, "", &st), 2) << st.error_message();
  EXPECT_EQ(HealthCheck(channel_, "neupims.v1.LlmService", &st), 2) << st.error_message();
  const std::string http = HttpGet(server_->metrics_port(), "/metrics");
  const size_t body_at = http.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos);
  const std::vector<Sample> m = ParsePrometheus(http.substr(body_at + 4));
  EXPECT_EQ(Metric(m, "neupims:engine_faults_total"), 1);
  EXPECT_EQ(Metric(m, "neupims:request_errors_total", {{"code", "INTERNAL"}}), 2);
}

TEST_F(ServerTest, AClientThatStopsReadingStallsNeitherTheEngineNorOtherStreams) {
  ServerOptions options = FastOptions();
  options.max_stream_buffer = 0;  // unbounded: the stalled request runs to its end
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  grpc::ClientContext ctx;
  // Never read: its tokens wait in its stream's buffer (bounded by the request's max_new_tokens,
  // itself bounded by the model's context), the engine thread never waits for it.
  auto stalled = stub_->Generate(&ctx, LengthRequest(kLongPrompt, kLongTokens));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(Generate(LengthRequest(16, 64, seed))));
  }
  ExpectEngineBecomesIdle();  // the stalled request ran to its end as well
  ctx.TryCancel();
  GenerateResponse resp;
  while (stalled->Read(&resp)) {
  }
  (void)stalled->Finish();
}

TEST_F(ServerTest, AStreamWhoseClientStopsReadingEndsResourceExhaustedAndFreesItsKv) {
  // Realtime at kSlowSpeed: the long request cannot end on its own while the test waits, so only
  // the overflow can free its KV blocks.
  ServerOptions options = RealtimeOptions(kSlowSpeed);
  options.metrics_port = 0;
  options.max_stream_buffer = 16;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  // A client whose HTTP/2 window is tiny (no BDP probing to grow it): once it stops reading,
  // flow control holds the server's writes back after a few hundred bytes.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 256);
  auto stalled_channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                   grpc::InsecureChannelCredentials(), args);
  std::unique_ptr<LlmService::Stub> stalled_stub = LlmService::NewStub(stalled_channel);
  grpc::ClientContext ctx;
  auto stalled = stalled_stub->Generate(&ctx, LengthRequest(kLongPrompt, kLongTokens));
  {
    // Other streams run to their end meanwhile.
    std::vector<std::unique_ptr<AsyncStream>> others;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      others.push_back(std::make_unique<AsyncStream>(stub_.get(), LengthRequest(16, 16, seed)));
    }
    for (auto& o : others) {
      ASSERT_TRUE(o->Wait(std::chrono::seconds(60)));
      ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(o->result()));
    }
  }
  // The stalled request was aborted in the engine: its KV blocks are free.
  ExpectEngineBecomesIdle();
  const std::vector<Sample> m = ScrapeMetrics(server_->metrics_port());
  EXPECT_EQ(Metric(m, "neupims:stream_buffer_overflows_total", {{"front_end", "grpc"}}), 1);
  EXPECT_EQ(Metric(m, "neupims:stream_buffer_overflows_total", {{"front_end", "http"}}), 0);
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "abort"}}), 1);
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "length"}}), 3);
  // Reading again, the client gets what gRPC held, then the status (no final message).
  StreamResult r;
  GenerateResponse resp;
  while (stalled->Read(&resp)) Collect(resp, &r);
  r.status = stalled->Finish();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(), ::testing::HasSubstr("the client is not reading"));
  EXPECT_THAT(r.status.error_message(), ::testing::HasSubstr("over the stream buffer of 16"));
  EXPECT_FALSE(r.complete.has_value());
  EXPECT_LT(r.tokens.size(), static_cast<size_t>(kLongTokens));
  for (size_t i = 0; i < r.tokens.size(); ++i)
    EXPECT_EQ(r.tokens[i].index(), static_cast<int64_t>(i));
}

// ---- Shutdown.

TEST_F(ServerTest, DrainThenShutdownEndsInFlightStreamsWithAFinalMessage) {
  ServerOptions options = RealtimeOptions(1);
  options.drain_timeout = std::chrono::milliseconds(200);
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  grpc::ClientContext ctx;
  auto reader = stub_->Generate(&ctx, LengthRequest(kLongPrompt, kLongTokens));
  StreamResult r;
  GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  Collect(resp, &r);
  std::optional<bool> drained;  // written by `stopper`, read after join
  std::thread stopper([&] {
    drained = server_->Drain();
    server_->Shutdown();
  });
  while (reader->Read(&resp)) Collect(resp, &r);
  r.status = reader->Finish();
  stopper.join();
  ASSERT_TRUE(drained.has_value());
  EXPECT_FALSE(*drained) << "a 2000-token request cannot finish within 200 ms at speed 1";
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
  EXPECT_THAT(r.complete->finish_reason(), ::testing::AnyOf(neupims::v1::FINISH_REASON_ABORTED,
                                                            neupims::v1::FINISH_REASON_LENGTH));
  server_->Shutdown();  // idempotent
}

TEST_F(ServerTest, DrainWaitsForInFlightRequestsToFinish) {
  ServerOptions options = RealtimeOptions(20);
  options.drain_timeout = std::chrono::seconds(60);
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  AsyncStream stream(stub_.get(), LengthRequest(32, 32));
  ASSERT_TRUE(PollInfo([&](const ServerInfo& i) {
    return stream.done() || i.running() + i.waiting() + i.prefilling() > 0;
  }));
  EXPECT_TRUE(server_->Drain());
  ASSERT_TRUE(stream.Wait(std::chrono::seconds(30)));
  const StreamResult r = stream.result();
  ASSERT_NO_FATAL_FAILURE(ExpectWellFormed(r));
  EXPECT_EQ(r.complete->finish_reason(), neupims::v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.tokens.size(), 32u);
}

}  // namespace
}  // namespace neupims::server
