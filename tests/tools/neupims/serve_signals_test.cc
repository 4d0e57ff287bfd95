// The real `neupims serve` process under signals: SIGTERM while streams are in flight drains them
// (every stream gets its final message) and the process exits 0; SIGKILL leaves nothing behind
// that blocks a restart on the same ports (the listeners use SO_REUSEADDR, so connections the
// killed process left in TIME_WAIT do not hold the ports; the server writes no pid or socket
// files).
//
// Timing: realtime pacing. The only wall-clock bounds are generous hang guards (a start-up, an
// exit); what is asserted is what the clients received.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace neupims::cli {
namespace {

using neupims::v1::FINISH_REASON_ABORTED;
using neupims::v1::FINISH_REASON_LENGTH;
using neupims::v1::GenerateRequest;
using neupims::v1::GenerateResponse;
using neupims::v1::GetServerInfoRequest;
using neupims::v1::LlmService;
using neupims::v1::ServerInfo;
using ::testing::HasSubstr;
using ::testing::Not;

class ServeSignals : public ::testing::Test {};

// `neupims serve ARGS` as a child process, its stderr collected by a thread.
class ServeProcess {
 public:
  // `address_space_bytes` > 0: the child's RLIMIT_AS (`ulimit -v`), set before exec.
  explicit ServeProcess(const std::vector<std::string>& args, rlim_t address_space_bytes = 0) {
    // Everything the child needs is made before fork: it only calls async-signal-safe functions.
    std::vector<std::string> argv_s = {NEUPIMS_CLI_PATH, "serve"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      if (address_space_bytes > 0) {
        const rlimit limit = {address_space_bytes, address_space_bytes};
        // glibc sizes a thread's stack from RLIMIT_STACK at exec: pinned to Linux's default
        // 8 MiB, so that what fits under the limit does not depend on the caller's `ulimit -s`.
        rlimit stack{};
        getrlimit(RLIMIT_STACK, &stack);
        stack.rlim_cur = std::min<rlim_t>(rlim_t{8} << 20, stack.rlim_max);
        if (setrlimit(RLIMIT_AS, &limit) != 0 || setrlimit(RLIMIT_STACK, &stack) != 0) _exit(126);
      }
      dup2(fds[1], STDERR_FILENO);
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      execv(NEUPIMS_CLI_PATH, argv.data());
      _exit(127);
    }
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] { Read(fd); });
  }

  ~ServeProcess() {
    if (pid_ > 0 && !exit_status_.has_value()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
  }

  // Waits for the start-up banner's lines (the HTTP and metrics ones when asked for) and reads
  // the ports from them; false if the process exited instead (see output()).
  bool WaitForBanner(bool http, bool metrics) {
    std::unique_lock<std::mutex> lock(mu_);
    const bool seen = cv_.wait_for(lock, std::chrono::seconds(60), [&] {
      auto has_line = [&](const char* s) {
        const size_t at = output_.find(s);
        return at != std::string::npos && output_.find('\n', at) != std::string::npos;
      };
      return eof_ || (has_line("reflection") && (!http || has_line("(OpenAI-compatible")) &&
                      (!metrics || has_line("/metrics")));
    });
    if (!seen || eof_) return false;
    grpc_port_ = Port(R"(gRPC +127\.0\.0\.1:(\d+))");
    http_port_ = Port(R"(HTTP +http://127\.0\.0\.1:(\d+))");
    metrics_port_ = Port(R"(metrics http://127\.0\.0\.1:(\d+))");
    return grpc_port_ > 0;
  }

  void Signal(int sig) const { kill(pid_, sig); }

  // The exit status (waitpid's), or nullopt if the process is still running after `timeout`.
  std::optional<int> WaitExit(std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!exit_status_.has_value() && std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = status;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (exit_status_.has_value() && reader_.joinable()) reader_.join();
    return exit_status_;
  }

  std::string output() {
    std::lock_guard<std::mutex> lock(mu_);
    return output_;
  }
  int grpc_port() const { return grpc_port_; }
  pid_t pid() const { return pid_; }
  int http_port() const { return http_port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  void Read(int fd) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      output_.append(buf, static_cast<size_t>(n));
      cv_.notify_all();
    }
    close(fd);
    std::lock_guard<std::mutex> lock(mu_);
    eof_ = true;
    cv_.notify_all();
  }

  int Port(const char* pattern) const {  // mu_ held
    std::smatch m;
    return std::regex_search(output_, m, std::regex(pattern)) ? std::stoi(m[1]) : -1;
  }

  pid_t pid_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string output_;
  bool eof_ = false;
  std::optional<int> exit_status_;
  int grpc_port_ = -1, http_port_ = -1, metrics_port_ = -1;
};

// A client thread that is joined on every path. A failed ASSERT returns from the test while
// client threads run, and destroying a joinable std::thread calls std::terminate: the binary
// died ("terminate called without an active exception") instead of reporting the failure. On
// destruction `stop` makes the thread end soon (cancels its call), then it is joined; Join()
// waits for it to end on its own.
class ClientThread {
 public:
  ClientThread() = default;
  ClientThread(std::function<void()> body, std::function<void()> stop)
      : stop_(std::move(stop)), thread_(std::move(body)) {}
  ClientThread(ClientThread&&) = default;
  // Not defaulted: std::thread's move assignment over a running thread is std::terminate, the
  // very abort this class exists to avoid. The running one is stopped and joined first.
  ClientThread& operator=(ClientThread&& other) noexcept {
    if (this != &other) {
      StopAndJoin();
      stop_ = std::move(other.stop_);
      thread_ = std::move(other.thread_);
    }
    return *this;
  }
  ~ClientThread() { StopAndJoin(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  void StopAndJoin() {
    if (!thread_.joinable()) return;
    if (stop_) stop_();
    thread_.join();
  }

  std::function<void()> stop_;
  std::thread thread_;
};

// Assigning over a running ClientThread (a defaulted move assignment would std::terminate)
// stops and joins it first.
TEST(ServeSignalsHelpers, AssigningOverARunningClientThreadStopsAndJoinsIt) {
  std::atomic<bool> stop{false};
  std::atomic<bool> ended{false};
  ClientThread t(
      [&] {
        while (!stop) std::this_thread::yield();
        ended = true;
      },
      [&] { stop = true; });
  t = ClientThread();
  EXPECT_TRUE(ended);
}

// A Generate stream read to its end on a thread of its own.
struct Stream {
  grpc::ClientContext ctx;  // outlives `thread`, which cancels it if the test ends early
  std::atomic<int64_t> tokens{0};
  std::optional<neupims::v1::GenerateComplete> complete;
  int messages_after_complete = 0;
  grpc::Status status;
  ClientThread thread;  // last: joined first
};

void RunStream(LlmService::Stub* stub, int64_t max_new_tokens, Stream* s) {
  GenerateRequest r;
  r.set_prompt_length(16);
  r.set_max_new_tokens(max_new_tokens);
  r.set_ignore_eos(true);
  grpc::ClientContext& ctx = s->ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  std::unique_ptr<grpc::ClientReader<GenerateResponse>> reader = stub->Generate(&ctx, r);
  GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (s->complete.has_value()) ++s->messages_after_complete;
    if (resp.has_tokens()) s->tokens += resp.tokens().tokens_size();
    if (resp.has_complete()) s->complete = resp.complete();
  }
  s->status = reader->Finish();
}

// Starts `n` streams and waits until each has received a token (so each is in flight).
std::vector<std::unique_ptr<Stream>> StartStreams(LlmService::Stub* stub, int n,
                                                  int64_t max_new_tokens) {
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < n; ++i) {
    streams.push_back(std::make_unique<Stream>());
    Stream* s = streams.back().get();
    s->thread = ClientThread([stub, max_new_tokens, s] { RunStream(stub, max_new_tokens, s); },
                             [s] { s->ctx.TryCancel(); });
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (const auto& s : streams) {
    while (s->tokens == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GT(s->tokens.load(), 0) << "a stream never started";
  }
  return streams;
}

std::vector<std::string> BaseArgs(const std::string& drain_timeout, const std::string& speed) {
  return {"--pacing", "realtime", "--speed", speed, "--drain-timeout", drain_timeout};
}

TEST_F(ServeSignals, SigtermLetsTwentyInFlightStreamsFinishThenExitsZero) {
  std::vector<std::string> args = BaseArgs("60", "1");
  args.insert(args.end(), {"--port", "0", "--http-port", "-1", "--metrics-port", "-1"});
  ServeProcess p(args);
  ASSERT_TRUE(p.WaitForBanner(false, false)) << p.output();
  auto stub = LlmService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", p.grpc_port()),
                                                      grpc::InsecureChannelCredentials()));
  // ~300 decode steps of GPT3-7B at speed 1: about a second and a half, well inside the drain.
  std::vector<std::unique_ptr<Stream>> streams = StartStreams(stub.get(), 20, 300);
  p.Signal(SIGTERM);
  for (const auto& s : streams) {
    s->thread.Join();
    ASSERT_TRUE(s->status.ok()) << s->status.error_code() << ": " << s->status.error_message();
    ASSERT_TRUE(s->complete.has_value()) << "a stream ended without its final message";
    EXPECT_EQ(s->complete->finish_reason(), FINISH_REASON_LENGTH);
    EXPECT_EQ(s->complete->completion_tokens(), 300);
    EXPECT_EQ(s->tokens.load(), 300);
    EXPECT_EQ(s->messages_after_complete, 0);
  }
  const std::optional<int> status = p.WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "still running 60 s after the streams ended\n" << p.output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << p.output();
  EXPECT_THAT(p.output(), HasSubstr("SIGTERM received, draining"));
  EXPECT_THAT(p.output(), HasSubstr("all requests finished"));
}

TEST_F(ServeSignals, SigtermPastTheDrainTimeoutAbortsTheRestWithAFinalMessage) {
  std::vector<std::string> args = BaseArgs("1", "0.2");
  args.insert(args.end(), {"--port", "0", "--http-port", "-1", "--metrics-port", "-1"});
  ServeProcess p(args);
  ASSERT_TRUE(p.WaitForBanner(false, false)) << p.output();
  auto stub = LlmService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", p.grpc_port()),
                                                      grpc::InsecureChannelCredentials()));
  // 2,000 tokens at speed 0.2: ~45 s of wall time, far past the 1 s drain.
  std::vector<std::unique_ptr<Stream>> streams = StartStreams(stub.get(), 20, 2000);
  p.Signal(SIGTERM);
  for (const auto& s : streams) {
    s->thread.Join();
    ASSERT_TRUE(s->status.ok()) << s->status.error_code() << ": " << s->status.error_message();
    ASSERT_TRUE(s->complete.has_value()) << "a stream ended without its final message";
    EXPECT_EQ(s->complete->finish_reason(), FINISH_REASON_ABORTED);
    EXPECT_EQ(s->complete->completion_tokens(), s->tokens.load());
    EXPECT_LT(s->tokens.load(), 2000);
    EXPECT_EQ(s->messages_after_complete, 0);
  }
  const std::optional<int> status = p.WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << p.output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << p.output();
  EXPECT_THAT(p.output(), HasSubstr("drain timeout: remaining requests aborted"));
}

// An HTTP request (an SSE stream with usage, or a whole response) on a thread of its own.
struct HttpCall {
  std::string raw;  // the body as received
  int status = 0;
  bool transport_ok = false;
  std::atomic<bool> started{false};  // something was received
  ClientThread thread;               // last: joined first
};

// The SSE events of `raw` (the text after "data: ").
std::vector<std::string> SseEvents(const std::string& raw) {
  std::vector<std::string> events;
  size_t at = 0;
  for (size_t end; (end = raw.find("\n\n", at)) != std::string::npos; at = end + 2) {
    if (raw.compare(at, 6, "data: ") == 0) events.push_back(raw.substr(at + 6, end - at - 6));
  }
  return events;
}

void StartHttpCall(int port, int64_t max_tokens, bool stream, HttpCall* call) {
  auto stop = std::make_shared<std::atomic<bool>>(false);
  call->thread = ClientThread(
      [port, max_tokens, stream, call, stop] {
        httplib::Client c("127.0.0.1", port);
        c.set_read_timeout(120, 0);
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body =
            absl::StrCat(R"({"prompt": "hi", "ignore_eos": true, "max_tokens": )", max_tokens,
                         stream ? R"(, "stream": true,
                                         "stream_options": {"include_usage": true}})"
                                : "}");
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [call, stop](const char* data, size_t n, uint64_t, uint64_t) {
          call->raw.append(data, n);
          call->started = true;
          return !*stop;
        };
        httplib::Result r = c.send(req);
        call->transport_ok = static_cast<bool>(r);
        if (r) call->status = r->status;
      },
      [stop] { *stop = true; });
}

// Requests in the engine (waiting, on the standalone prefill NPUs, or running), per the HTTP
// API's /metrics. (Without the prefilling ones, a request admitted between two scrapes went
// uncounted: under TSan the second scrape read 3 of 8 after the first had read 8.)
int LiveRequests(httplib::Client* http) {
  httplib::Result r = http->Get("/metrics");
  if (!r || r->status != 200) return -1;
  double live = 0;
  for (const char* name : {"neupims:num_requests_running", "neupims:num_requests_waiting",
                           "neupims:num_requests_prefilling"}) {
    std::smatch m;
    if (std::regex_search(r->body, m,
                          std::regex(absl::StrCat("\n", name, R"((\{[^}]*\})? (\S+))")))) {
      live += std::stod(m[2]);
    }
  }
  return static_cast<int>(live);
}

struct SseEnd {
  int64_t token_events = 0;
  std::string finish_reason;
  int64_t usage_tokens = -1;
  bool done_last = false;
};

SseEnd ReadSseEnd(const std::string& raw) {
  SseEnd e;
  const std::vector<std::string> events = SseEvents(raw);
  e.done_last = !events.empty() && events.back() == "[DONE]";
  for (const std::string& ev : events) {
    if (ev == "[DONE]") continue;
    const nlohmann::json j = nlohmann::json::parse(ev, nullptr, false);
    if (!j.is_object()) continue;
    if (j.contains("usage") && j["usage"].is_object()) {
      e.usage_tokens = j["usage"]["completion_tokens"].get<int64_t>();
    }
    for (const nlohmann::json& c : j.value("choices", nlohmann::json::array())) {
      if (!c["finish_reason"].is_null()) e.finish_reason = c["finish_reason"].get<std::string>();
      if (!c.value("text", std::string()).empty()) ++e.token_events;
    }
  }
  return e;
}

// SIGTERM with HTTP requests in flight: the streams that end within the drain end as usual; the
// rest are aborted at the drain timeout and still get their final chunk (finish_reason "abort"),
// a usage count equal to the tokens they received, and [DONE]; a whole response in flight is
// answered with what was generated and "abort"; the process exits 0.
TEST_F(ServeSignals, SigtermEndsEveryHttpStreamWithItsFinalChunkAndDoneThenExitsZero) {
  std::vector<std::string> args = BaseArgs("2", "0.2");
  args.insert(args.end(), {"--port", "0", "--http-port", "0", "--metrics-port", "-1"});
  ServeProcess p(args);
  ASSERT_TRUE(p.WaitForBanner(true, false)) << p.output();
  ASSERT_GT(p.http_port(), 0) << p.output();
  constexpr int kEach = 4;
  constexpr int64_t kShort = 8, kLong = 2000;  // 2,000 tokens at speed 0.2: far past the drain
  std::vector<std::unique_ptr<HttpCall>> short_streams, long_streams, whole;
  for (auto* group : {&long_streams, &whole}) {
    for (int i = 0; i < kEach; ++i) {
      group->push_back(std::make_unique<HttpCall>());
      StartHttpCall(p.http_port(), kLong, group != &whole, group->back().get());
    }
  }
  // All eight long requests are in the engine (a whole response shows nothing before its end).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  httplib::Client scrape("127.0.0.1", p.http_port());
  while (LiveRequests(&scrape) < 2 * kEach && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(LiveRequests(&scrape), 2 * kEach);
  for (int i = 0; i < kEach; ++i) {
    short_streams.push_back(std::make_unique<HttpCall>());
    StartHttpCall(p.http_port(), kShort, true, short_streams.back().get());
  }
  for (const auto& c : short_streams) {
    while (!c->started && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  p.Signal(SIGTERM);
  for (auto* group : {&short_streams, &long_streams, &whole}) {
    for (const auto& c : *group) c->thread.Join();
  }
  for (const auto& c : short_streams) {
    ASSERT_TRUE(c->transport_ok);
    const SseEnd e = ReadSseEnd(c->raw);
    EXPECT_EQ(e.finish_reason, "length") << c->raw;
    EXPECT_EQ(e.token_events, kShort);
    EXPECT_EQ(e.usage_tokens, kShort);
    EXPECT_TRUE(e.done_last) << c->raw;
  }
  for (const auto& c : long_streams) {
    ASSERT_TRUE(c->transport_ok) << "a stream ended without its final chunk";
    const SseEnd e = ReadSseEnd(c->raw);
    EXPECT_EQ(e.finish_reason, "abort") << c->raw.substr(c->raw.size() - 500);
    EXPECT_LT(e.token_events, kLong);
    EXPECT_EQ(e.usage_tokens, e.token_events);
    EXPECT_TRUE(e.done_last) << c->raw.substr(c->raw.size() - 500);
  }
  for (const auto& c : whole) {
    ASSERT_TRUE(c->transport_ok) << "a whole response was never answered";
    EXPECT_EQ(c->status, 200) << c->raw;
    const nlohmann::json j = nlohmann::json::parse(c->raw, nullptr, false);
    ASSERT_TRUE(j.is_object()) << c->raw;
    EXPECT_EQ(j["choices"][0]["finish_reason"], "abort");
    EXPECT_EQ(j["usage"]["completion_tokens"].get<int64_t>(),
              static_cast<int64_t>(j["choices"][0]["text"].get<std::string>().size()));
  }
  const std::optional<int> status = p.WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "still running 60 s after the requests ended\n" << p.output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << p.output();
  EXPECT_THAT(p.output(), HasSubstr("drain timeout: remaining requests aborted"));
}

// Threads of a live process.
int ThreadCount(pid_t pid) {
  int n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"))) {
    ++n;
  }
  return n;
}

// The HTTP API's thread pool (one thread per open connection; 512 by default) is most of the
// server's threads: ~530 in all, so the image's recommended `--ulimit nproc=1024` (per user,
// host-wide for rootful podman) left room for one container, and a second one aborted on
// std::system_error. `--http-threads` sizes it.
TEST_F(ServeSignals, HttpThreadsSizesTheHttpThreadPool) {
  ServeProcess p({"--port", "0", "--metrics-port", "-1", "--http-port", "0", "--http-threads", "8",
                  "--drain-timeout", "5"});
  ASSERT_TRUE(p.WaitForBanner(true, false)) << p.output();
  httplib::Client http("127.0.0.1", p.http_port());
  const httplib::Result health = http.Get("/health");  // a pool thread answers: the pool exists
  ASSERT_TRUE(health) << p.output();
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(ThreadCount(p.pid()), 100) << "512 HTTP threads would be more";
  p.Signal(SIGTERM);
  EXPECT_EQ(p.WaitExit(std::chrono::seconds(60)), std::optional<int>(0)) << p.output();
}

// A start that cannot get its threads is an error (exit 1, naming the flag), never an abort.
// Thread creation is made to fail with an address-space limit (`ulimit -v` 4,000,000 KiB) and
// --http-threads 4096, whose 8 MiB stacks need 32 GiB: RLIMIT_NPROC (`ulimit -u`) would do as
// well, but root, under which the tests may run, ignores it. Before the fix std::thread threw on
// httplib's listener thread and the process ended in std::terminate (SIGABRT, exit 134).
TEST(ServeThreads, AnHttpPoolThatCannotGetItsThreadsFailsTheStartWithExitOne) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitized binary cannot run under ulimit -v (it reserves terabytes of shadow)";
#endif
  ServeProcess p(
      {"--port", "0", "--metrics-port", "-1", "--http-port", "0", "--http-threads", "4096"},
      /*address_space_bytes=*/rlim_t{4'000'000} * 1024);
  const std::optional<int> status = p.WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << "still running under the limit\n" << p.output();
  EXPECT_TRUE(WIFEXITED(*status)) << "ended by signal " << WTERMSIG(*status) << "\n" << p.output();
  EXPECT_EQ(WEXITSTATUS(*status), 1) << p.output();
  EXPECT_THAT(p.output(), HasSubstr("--http-threads (config \"http_threads\") 4096: cannot start "
                                    "HTTP thread"));
  EXPECT_THAT(p.output(), Not(HasSubstr("terminate")));
}

TEST_F(ServeSignals, AfterSigkillARestartOnTheSamePortsServes) {
  std::vector<std::string> args = BaseArgs("30", "0.2");
  args.insert(args.end(), {"--port", "0", "--http-port", "0", "--metrics-port", "0"});
  ServeProcess first(args);
  ASSERT_TRUE(first.WaitForBanner(true, true)) << first.output();
  ASSERT_GT(first.http_port(), 0) << first.output();
  ASSERT_GT(first.metrics_port(), 0) << first.output();
  // Connections on every port when the process dies: streams on gRPC and HTTP, a scrape.
  auto stub = LlmService::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", first.grpc_port()),
                                                      grpc::InsecureChannelCredentials()));
  std::vector<std::unique_ptr<Stream>> streams = StartStreams(stub.get(), 5, 2000);
  std::atomic<bool> http_started{false};
  std::atomic<bool> http_stop{false};
  ClientThread http_stream(
      [&] {
        httplib::Client c("127.0.0.1", first.http_port());
        c.set_read_timeout(120, 0);
        httplib::Request req;
        req.method = "POST";
        req.path = "/v1/completions";
        req.body = R"({"prompt": "hi", "max_tokens": 2000, "ignore_eos": true, "stream": true})";
        req.set_header("Content-Type", "application/json");
        req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
          http_started = true;
          return !http_stop;  // false ends the request
        };
        c.send(req);  // ends with a transport error when the server dies
      },
      [&] { http_stop = true; });
  httplib::Client scrape("127.0.0.1", first.metrics_port());
  httplib::Result metrics = scrape.Get("/metrics");
  ASSERT_TRUE(metrics) << "no answer from the metrics port";
  while (!http_started) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  first.Signal(SIGKILL);
  ASSERT_TRUE(first.WaitExit(std::chrono::seconds(30)).has_value());
  for (const auto& s : streams) {
    s->thread.Join();
    EXPECT_FALSE(s->status.ok());  // the server died: no final message, an error status
  }
  http_stream.Join();

  std::vector<std::string> again = BaseArgs("30", "1");
  again.insert(again.end(), {"--port", std::to_string(first.grpc_port()), "--http-port",
                             std::to_string(first.http_port()), "--metrics-port",
                             std::to_string(first.metrics_port())});
  ServeProcess second(again);
  ASSERT_TRUE(second.WaitForBanner(true, true)) << second.output();
  EXPECT_EQ(second.grpc_port(), first.grpc_port());
  auto stub2 = LlmService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", second.grpc_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  ServerInfo info;
  const grpc::Status s = stub2->GetServerInfo(&ctx, GetServerInfoRequest(), &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.running(), 0);  // a fresh engine
  httplib::Client http("127.0.0.1", second.http_port());
  httplib::Result health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  httplib::Client scrape2("127.0.0.1", second.metrics_port());
  httplib::Result metrics2 = scrape2.Get("/metrics");
  ASSERT_TRUE(metrics2);
  EXPECT_EQ(metrics2->status, 200);
  second.Signal(SIGTERM);
  const std::optional<int> status = second.WaitExit(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << second.output();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << second.output();
}

}  // namespace
}  // namespace neupims::cli
