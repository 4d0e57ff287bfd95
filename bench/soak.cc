// soak: a bounded soak of the server (issue 18), over gRPC or the HTTP API. Drives `--requests`
// Generate calls from `--clients` threads with random client cancels, Abort RPCs, short
// deadlines, duplicate request ids and invalid requests (all drawn from `--seed`), then checks
// that every request is accounted for and that nothing leaked:
//
//   1. per the client: completed + aborted + rejected + refused + cancelled + deadline = sent;
//      every stream that ended OK carried exactly one final message whose completion_tokens is the
//      number of tokens received, indices 0..n-1 in order;
//   2. per /metrics (what the counters added since a scrape before the first call, so a server
//      soaked before can be soaked again): every request the server saw is counted once, either
//      as a refusal (neupims:request_errors_total, by code, equal to the client's refusals by
//      code) or as an engine outcome (neupims:request_success_total); their sum is `sent`, less
//      at most the calls whose deadline expired before any message (those may never reach the
//      server);
//   3. the engine is idle and holds no KV block (GetServerInfo), and, in process, the engine's
//      invariants hold (EngineRunner::CheckInvariants: the KV cache's own, every KV holder live);
//   4. RSS (VmRSS) after the warm-up (the first 10% of requests) and at the end: growth within
//      `--max-rss-growth-mb`.
// The exit code is 1 if any check fails, 2 for bad flags.
//
// The server runs in process (fast pacing, GPT3-7B on NeuPIMs) unless `--target host:port` names
// one (then `--metrics` names its metrics: the metrics port's host:port, or the HTTP API's base
// URL, whose /metrics a secured server serves; the in-process invariant check is skipped). A
// target started with --tls-cert / --auth-token-file is soaked with `--tls-ca` (and `--tls-cert`
// / `--tls-key` for mutual TLS) and `--auth-token-file`, on both front ends, as
// `neupims-bench` takes them.
//
// `--front-end http` drives the OpenAI-compatible HTTP API instead (bench/soak_http.cc):
// streamed and whole completions and chat completions, clients that hang up mid-stream,
// streams aborted over gRPC by their id, invalid requests; the same checks, with every
// response's shape checked and the server's counts exact (every HTTP request reaches the
// server). `--target` then names the HTTP API, and `--grpc host:port` the gRPC service for the
// Abort calls and the idle check (in process both are known).
//
// Usage: soak [--front-end grpc|http] [--requests 100000] [--clients 16] [--seed 1]
//             [--target H:P --metrics H:P|URL [--grpc H:P]] [--max-rss-growth-mb 64]
//             [--tls-ca F [--tls-cert F --tls-key F]] [--auth-token-file F]
#include "bench/soak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "server/server.h"
#include "tools/loadgen/loadgen.h"
#include "tools/loadgen/metrics_scrape.h"
#include "tools/loadgen/security_flags.h"

namespace neupims::soak {

void Counts::Add(const Counts& o) {
  sent += o.sent;
  completed += o.completed;
  aborted += o.aborted;
  rejected += o.rejected;
  for (const auto& [code, n] : o.refused) refused[code] += n;
  cancelled += o.cancelled;
  deadline += o.deadline;
  deadline_without_message += o.deadline_without_message;
  malformed += o.malformed;
  abort_rpcs += o.abort_rpcs;
  if (first_malformed.empty()) first_malformed = o.first_malformed;
}

int64_t Counts::refused_total() const {
  int64_t n = 0;
  for (const auto& [code, v] : refused) n += v;
  return n;
}

void Counts::Malformed(const std::string& problem) {
  ++malformed;
  if (first_malformed.empty()) first_malformed = problem;
}

namespace {

using Clock = std::chrono::steady_clock;
using neupims::v1::GenerateRequest;
using neupims::v1::GenerateResponse;
using neupims::v1::LlmService;

enum class FrontEnd { kGrpc, kHttp };

struct Flags {
  FrontEnd front_end = FrontEnd::kGrpc;
  int64_t requests = 100000;
  int clients = 16;
  uint64_t seed = 1;
  std::string target;   // empty: an in-process server
  std::string metrics;  // the target's metrics: host:port of its metrics port, or the API's URL
  std::string grpc;     // with --front-end http: the target's gRPC service (Abort, idle check)
  double max_rss_growth_mb = 64;
  loadgen::TlsClientOptions tls;  // towards a target started with --tls-cert; empty: plaintext
  std::string auth_token_file;    // the target's --auth-token-file; empty: no token
};

// gRPC's status code names, as the server's metrics label them (server/status_map.cc).
std::string CodeName(grpc::StatusCode c) {
  static const std::map<grpc::StatusCode, std::string> kNames = {
      {grpc::StatusCode::CANCELLED, "CANCELLED"},
      {grpc::StatusCode::UNKNOWN, "UNKNOWN"},
      {grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT"},
      {grpc::StatusCode::DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
      {grpc::StatusCode::NOT_FOUND, "NOT_FOUND"},
      {grpc::StatusCode::ALREADY_EXISTS, "ALREADY_EXISTS"},
      {grpc::StatusCode::PERMISSION_DENIED, "PERMISSION_DENIED"},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
      {grpc::StatusCode::FAILED_PRECONDITION, "FAILED_PRECONDITION"},
      {grpc::StatusCode::ABORTED, "ABORTED"},
      {grpc::StatusCode::OUT_OF_RANGE, "OUT_OF_RANGE"},
      {grpc::StatusCode::UNIMPLEMENTED, "UNIMPLEMENTED"},
      {grpc::StatusCode::INTERNAL, "INTERNAL"},
      {grpc::StatusCode::UNAVAILABLE, "UNAVAILABLE"},
      {grpc::StatusCode::DATA_LOSS, "DATA_LOSS"},
      {grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED"}};
  auto it = kNames.find(c);
  return it == kNames.end() ? absl::StrCat("CODE_", static_cast<int>(c)) : it->second;
}

// One Generate call, read message by message.
class Call {
 public:
  Call(LlmService::Stub* stub, const std::string& token, const GenerateRequest& request,
       std::optional<std::chrono::milliseconds> deadline) {
    if (deadline.has_value()) ctx_.set_deadline(std::chrono::system_clock::now() + *deadline);
    loadgen::Authorize(token, &ctx_);
    reader_ = stub->Generate(&ctx_, request);
  }

  // Reads one message; false at the end of the stream.
  bool ReadOne() {
    GenerateResponse resp;
    if (!reader_->Read(&resp)) return false;
    ++messages_;
    if (complete_.has_value()) ++after_complete_;
    if (resp.has_tokens()) {
      for (const neupims::v1::Token& t : resp.tokens().tokens()) {
        if (t.index() != tokens_) out_of_order_ = true;
        ++tokens_;
      }
    } else if (resp.has_complete()) {
      complete_ = resp.complete();
    }
    return true;
  }
  void Cancel() { ctx_.TryCancel(); }
  int64_t messages() const { return messages_; }

  // Reads to the end and counts the outcome.
  void Finish(Counts* c) {
    while (ReadOne()) {
    }
    const grpc::Status s = reader_->Finish();
    if (s.ok()) {
      Classify(c);
      return;
    }
    switch (s.error_code()) {
      case grpc::StatusCode::CANCELLED:
        ++c->cancelled;
        break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        ++c->deadline;
        if (messages_ == 0) ++c->deadline_without_message;
        break;
      default:
        ++c->refused[CodeName(s.error_code())];
    }
  }

 private:
  void Classify(Counts* c) {
    std::string problem;
    if (!complete_.has_value()) {
      problem = "an OK stream without a final message";
    } else if (complete_->completion_tokens() != tokens_) {
      problem = absl::StrCat("completion_tokens ", complete_->completion_tokens(), " but ", tokens_,
                             " tokens received");
    } else if (out_of_order_ || after_complete_ > 0) {
      problem = "tokens out of order or messages after the final one";
    }
    if (!problem.empty()) {
      c->Malformed(problem);
      return;
    }
    switch (complete_->finish_reason()) {
      case neupims::v1::FINISH_REASON_LENGTH:
      case neupims::v1::FINISH_REASON_STOP:
        ++c->completed;
        break;
      case neupims::v1::FINISH_REASON_ABORTED:
        ++c->aborted;
        break;
      case neupims::v1::FINISH_REASON_REJECTED:
        ++c->rejected;
        break;
      default:
        c->Malformed("no finish reason");
    }
  }

  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<GenerateResponse>> reader_;
  std::optional<neupims::v1::GenerateComplete> complete_;
  int64_t tokens_ = 0, messages_ = 0, after_complete_ = 0;
  bool out_of_order_ = false;
};

// A gRPC client thread: Generate calls, plain, cancelled, aborted, with short deadlines, with
// duplicate ids, or invalid.
class GrpcClient : public SoakClient {
 public:
  // `token`: the server's bearer token, sent with every call ("" for none).
  GrpcClient(LlmService::Stub* stub, std::string token, int index, uint64_t seed,
             std::atomic<int64_t>* next, int64_t total, std::atomic<int64_t>* done)
      : stub_(stub),
        token_(std::move(token)),
        index_(index),
        rng_(seed * 1000003 + static_cast<uint64_t>(index)),
        next_(next),
        total_(total),
        done_(done) {}

  void Run() override {
    while (true) {
      const int64_t i = next_->fetch_add(1);
      if (i >= total_) return;
      const double u = Uniform();
      if (u < 0.60) {
        Plain();
      } else if (u < 0.72) {
        CancelAfterSomeTokens();
      } else if (u < 0.82) {
        AbortRpc(i);
      } else if (u < 0.90) {
        ShortDeadline();
      } else if (u < 0.96) {
        DuplicateIds(i);
      } else {
        Invalid();
      }
    }
  }

  const Counts& counts() const override { return counts_; }

 private:
  double Uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  int64_t Between(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  GenerateRequest Request(int64_t max_tokens) {
    GenerateRequest r;
    r.set_prompt_length(Between(1, 128));
    r.set_max_new_tokens(Between(1, max_tokens));
    r.set_ignore_eos(Uniform() < 0.5);
    r.set_seed(static_cast<uint64_t>(Between(1, 1 << 30)));
    return r;
  }
  void Sent(int64_t n = 1) {
    counts_.sent += n;
    done_->fetch_add(n);
  }

  void Plain() {
    Call call(stub_, token_, Request(48), std::nullopt);
    call.Finish(&counts_);
    Sent();
  }
  // Cancels only after a message arrived, so the server has the call (exact accounting).
  void CancelAfterSomeTokens() {
    GenerateRequest r = Request(256);
    r.set_ignore_eos(true);
    Call call(stub_, token_, r, std::nullopt);
    const int64_t wait_for = Between(1, 3);
    while (call.messages() < wait_for && call.ReadOne()) {
    }
    call.Cancel();
    call.Finish(&counts_);
    Sent();
  }
  void AbortRpc(int64_t i) {
    GenerateRequest r = Request(256);
    r.set_ignore_eos(true);
    const std::string id = absl::StrCat("soak-abort-", index_, "-", i);
    r.set_request_id(id);
    Call call(stub_, token_, r, std::nullopt);
    call.ReadOne();
    grpc::ClientContext ctx;
    loadgen::Authorize(token_, &ctx);
    neupims::v1::AbortRequest req;
    req.set_request_id(id);
    neupims::v1::AbortResponse resp;
    (void)stub_->Abort(&ctx, req, &resp);  // NOT_FOUND if it ended first: either is fine
    ++counts_.abort_rpcs;
    call.Finish(&counts_);
    Sent();
  }
  void ShortDeadline() {
    GenerateRequest r = Request(512);
    r.set_ignore_eos(true);
    Call call(stub_, token_, r, std::chrono::milliseconds(Between(1, 20)));
    call.Finish(&counts_);
    Sent();
  }
  // A second call with the id of a live one: ALREADY_EXISTS (or served, if the first ended).
  void DuplicateIds(int64_t i) {
    const int64_t j = next_->fetch_add(1);
    if (j >= total_) {
      Plain();
      return;
    }
    GenerateRequest r = Request(128);
    r.set_ignore_eos(true);
    r.set_request_id(absl::StrCat("soak-dup-", index_, "-", i));
    Call first(stub_, token_, r, std::nullopt);
    first.ReadOne();
    Call second(stub_, token_, r, std::nullopt);
    second.Finish(&counts_);
    first.Finish(&counts_);
    Sent(2);
  }
  void Invalid() {
    GenerateRequest r = Request(8);
    if (Uniform() < 0.5) {
      r.set_max_new_tokens(0);  // INVALID_ARGUMENT
    } else {
      r.set_model("no-such-model");  // NOT_FOUND
    }
    Call call(stub_, token_, r, std::nullopt);
    call.Finish(&counts_);
    Sent();
  }

  LlmService::Stub* stub_;
  const std::string token_;
  int index_;
  std::mt19937_64 rng_;
  std::atomic<int64_t>* next_;
  int64_t total_;
  std::atomic<int64_t>* done_;
  Counts counts_;
};

// VmRSS of this process, MiB; -1 if unreadable.
double RssMiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    int64_t kb = 0;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) return static_cast<double>(kb) / 1024;
  }
  return -1;
}

// The scrape's request counters: success by reason and errors by code.
struct ServerCounts {
  std::map<std::string, double> success;  // finished_reason -> requests
  std::map<std::string, double> errors;   // code -> requests
  double overflows = 0;
  double total() const {
    double n = 0;
    for (const auto& [k, v] : success) n += v;
    for (const auto& [k, v] : errors) n += v;
    return n;
  }
  // What the counters added since `before` (a scrape of the same server); labels that only
  // `before` had stay out.
  ServerCounts Since(const ServerCounts& before) const {
    ServerCounts d = *this;
    for (auto& [k, v] : d.success) {
      if (auto it = before.success.find(k); it != before.success.end()) v -= it->second;
    }
    for (auto& [k, v] : d.errors) {
      if (auto it = before.errors.find(k); it != before.errors.end()) v -= it->second;
    }
    d.overflows -= before.overflows;
    return d;
  }
};

// The value of label `key` in a `name{k="v",...} value` line, or "".
std::string Label(const std::string& line, const std::string& key) {
  const std::string needle = absl::StrCat(key, "=\"");
  const size_t at = line.find(needle);
  if (at == std::string::npos) return "";
  const size_t from = at + needle.size();
  return line.substr(from, line.find('"', from) - from);
}

ServerCounts ParseCounts(const std::string& exposition) {
  ServerCounts c;
  for (absl::string_view view : absl::StrSplit(exposition, '\n')) {
    const std::string line(view);
    if (line.empty() || line[0] == '#') continue;
    double v = 0;
    if (!absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) continue;
    if (line.rfind("neupims:request_success_total{", 0) == 0) {
      c.success[Label(line, "finished_reason")] += v;
    } else if (line.rfind("neupims:request_errors_total{", 0) == 0) {
      c.errors[Label(line, "code")] += v;
    } else if (line.rfind("neupims:stream_buffer_overflows_total", 0) == 0) {
      c.overflows += v;
    }
  }
  return c;
}

// Counts failed checks and prints each verdict.
class Checks {
 public:
  void Expect(bool ok, const std::string& what) {
    std::printf("  [%s] %s\n", ok ? "ok" : "FAIL", what.c_str());
    if (!ok) ++failed_;
  }
  int failed() const { return failed_; }

 private:
  int failed_ = 0;
};

void PrintClientCounts(const Counts& c) {
  std::printf(
      "client: sent %lld = completed %lld + aborted %lld + rejected %lld + refused %lld + "
      "cancelled %lld + deadline %lld; malformed %lld; Abort RPCs %lld\n",
      static_cast<long long>(c.sent), static_cast<long long>(c.completed),
      static_cast<long long>(c.aborted), static_cast<long long>(c.rejected),
      static_cast<long long>(c.refused_total()), static_cast<long long>(c.cancelled),
      static_cast<long long>(c.deadline), static_cast<long long>(c.malformed),
      static_cast<long long>(c.abort_rpcs));
  for (const auto& [code, n] : c.refused) {
    std::printf("  refused %s: %lld\n", code.c_str(), static_cast<long long>(n));
  }
}

void CheckServerCounts(const Counts& c, const ServerCounts& s, Checks* checks) {
  std::printf("server /metrics: success");
  for (const auto& [k, v] : s.success) std::printf(" %s=%.0f", k.c_str(), v);
  std::printf("; errors");
  for (const auto& [k, v] : s.errors) std::printf(" %s=%.0f", k.c_str(), v);
  std::printf("; stream buffer overflows %.0f\n", s.overflows);
  const double unseen = static_cast<double>(c.sent) - s.total();
  checks->Expect(unseen >= 0 && unseen <= static_cast<double>(c.deadline_without_message),
                 absl::StrCat("server counted ", s.total(), " of ", c.sent, " sent (unseen: ",
                              unseen, ", at most the ", c.deadline_without_message,
                              " calls whose deadline expired before any message)"));
  bool codes_match = true;
  for (const auto& [code, n] : c.refused) {
    auto it = s.errors.find(code);
    if (it == s.errors.end() || it->second != static_cast<double>(n)) codes_match = false;
  }
  for (const auto& [code, n] : s.errors) {
    if (!c.refused.contains(code) && n != 0) codes_match = false;
  }
  checks->Expect(codes_match, "the server's refusals by code equal the client's");
  const auto get = [&](const char* k) {
    auto it = s.success.find(k);
    return it == s.success.end() ? 0.0 : it->second;
  };
  checks->Expect(get("length") + get("stop") >= static_cast<double>(c.completed) &&
                     get("abort") >= static_cast<double>(c.aborted) &&
                     get("rejected") == static_cast<double>(c.rejected),
                 "every final message the client got is among the server's outcomes");
  checks->Expect(s.overflows == 0, "no stream ended for a full buffer (the clients all read)");
}

struct Target {
  std::string grpc;                        // empty: not known (a remote HTTP target without --grpc)
  std::string http;                        // the HTTP API, with --front-end http
  std::string metrics;                     // host:port or the API's base URL; empty: not checked
  server::EngineRunner* runner = nullptr;  // in process only
  loadgen::TlsClientOptions tls;           // empty: plaintext
  std::string token;                       // the bearer token; empty: none
};

// A scrape of the target's metrics: its metrics port (host:port), or the HTTP API's /metrics
// (an http:// or https:// base URL) over the target's TLS and with its token.
absl::StatusOr<std::string> Scrape(const Target& t) {
  if (!absl::StartsWith(t.metrics, "http://") && !absl::StartsWith(t.metrics, "https://")) {
    return loadgen::FetchMetrics(t.metrics, 10);
  }
  ASSIGN_OR_RETURN(loadgen::BaseUrl url, loadgen::ParseBaseUrl(t.metrics));
  if (!url.prefix.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", t.metrics, "': the API's base URL (scheme, host, port), without a path"));
  }
  url.tls = t.tls;
  url.auth_token = t.token;
  return loadgen::FetchApiMetrics(url, 10);
}

// Polls GetServerInfo until nothing is live and no KV block is held (30 s).
bool WaitIdle(LlmService::Stub* stub, const std::string& token, neupims::v1::ServerInfo* last) {
  const Clock::time_point until = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < until) {
    grpc::ClientContext ctx;
    loadgen::Authorize(token, &ctx);
    const grpc::Status s = stub->GetServerInfo(&ctx, neupims::v1::GetServerInfoRequest(), last);
    if (s.ok() && last->kv_blocks_used() == 0 && last->running() == 0 && last->waiting() == 0 &&
        last->prefilling() == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int RunSoak(const Flags& f, const Target& target) {
  const bool http = f.front_end == FrontEnd::kHttp;
  std::unique_ptr<LlmService::Stub> stub;
  if (!target.grpc.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
        loadgen::ChannelCredentials(target.tls);
    if (!creds.ok()) {
      std::fprintf(stderr, "soak: %s\n", std::string(creds.status().message()).c_str());
      return 2;
    }
    stub = LlmService::NewStub(grpc::CreateChannel(target.grpc, *creds));
  }
  std::string problem = http ? loadgen::HostPortProblem(target.http) : "";
  if (http && problem.empty() && target.http.find(':') == std::string::npos) problem = "no port";
  if (!problem.empty()) {
    std::fprintf(stderr, "soak: --target '%s': %s\n", target.http.c_str(), problem.c_str());
    return 2;
  }
  loadgen::BaseUrl http_url;
  http_url.scheme_host_port = absl::StrCat(target.tls.any() ? "https://" : "http://", target.http);
  http_url.tls = target.tls;
  http_url.auth_token = target.token;
  std::printf("soak: %lld requests, %d clients, seed %llu, %s %s%s%s%s\n",
              static_cast<long long>(f.requests), f.clients,
              static_cast<unsigned long long>(f.seed), http ? "HTTP API" : "gRPC server",
              http ? target.http.c_str() : target.grpc.c_str(),
              target.runner != nullptr ? " (in process, fast pacing)" : "",
              target.tls.any() ? ", TLS" : "", target.token.empty() ? "" : ", bearer token");
  // The counters before the first call: a server that served anything before (a remote
  // target, soaked again) is checked on what this soak added.
  ServerCounts before;
  if (!target.metrics.empty()) {
    absl::StatusOr<std::string> text = Scrape(target);
    if (!text.ok()) {
      std::fprintf(stderr, "soak: --metrics %s: %s\n", target.metrics.c_str(),
                   text.status().ToString().c_str());
      return 2;
    }
    before = ParseCounts(*text);
  }
  std::atomic<int64_t> next{0}, done{0};
  std::vector<std::unique_ptr<SoakClient>> clients;
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < f.clients; ++i) {
    if (http) {
      clients.push_back(
          MakeHttpClient({http_url, stub.get()}, i, f.seed, &next, f.requests, &done));
    } else {
      clients.push_back(std::make_unique<GrpcClient>(stub.get(), target.token, i, f.seed, &next,
                                                     f.requests, &done));
    }
    threads.emplace_back([c = clients.back().get()] { c->Run(); });
  }
  // Progress and the RSS after the warm-up (the first 10% of the calls).
  double warm_rss = -1, peak_rss = 0;
  int64_t next_report = f.requests / 10;
  while (done.load() < f.requests) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    peak_rss = std::max(peak_rss, RssMiB());
    if (done.load() >= next_report) {
      if (warm_rss < 0) warm_rss = RssMiB();
      std::printf("  %lld / %lld calls, %.1f s, RSS %.1f MiB\n",
                  static_cast<long long>(done.load()), static_cast<long long>(f.requests),
                  std::chrono::duration<double>(Clock::now() - start).count(), RssMiB());
      std::fflush(stdout);
      next_report += f.requests / 10;
    }
  }
  for (std::thread& t : threads) t.join();
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  Counts total;
  for (const auto& c : clients) total.Add(c->counts());
  if (warm_rss < 0) warm_rss = RssMiB();
  std::printf("wall %.1f s, %.0f calls/s\n", wall_s, static_cast<double>(total.sent) / wall_s);
  PrintClientCounts(total);

  Checks checks;
  checks.Expect(total.sent == f.requests, absl::StrCat("sent ", total.sent, " calls"));
  checks.Expect(total.completed + total.aborted + total.rejected + total.refused_total() +
                        total.cancelled + total.deadline ==
                    total.sent,
                "client: completed + aborted + rejected + refused + cancelled + deadline = sent");
  checks.Expect(total.malformed == 0,
                absl::StrCat(total.malformed, " malformed streams",
                             total.first_malformed.empty() ? "" : " (first: ",
                             total.first_malformed, total.first_malformed.empty() ? "" : ")"));
  if (stub != nullptr) {
    neupims::v1::ServerInfo info;
    const bool idle = WaitIdle(stub.get(), target.token, &info);
    checks.Expect(idle,
                  absl::StrCat("engine idle, KV blocks used ", info.kv_blocks_used(), " of ",
                               info.kv_blocks_total(), " (running ", info.running(), ", waiting ",
                               info.waiting(), ", prefilling ", info.prefilling(), ")"));
  } else {
    std::printf("  [--] engine idle: not checked (no --grpc)\n");
  }
  if (target.runner != nullptr) {
    const server::ServerSnapshot snap = target.runner->Snapshot();
    checks.Expect(snap.live == 0,
                  absl::StrCat(snap.live, " requests still live in the runner (its maps by id)"));
    const absl::Status inv = target.runner->CheckInvariants();
    checks.Expect(inv.ok(),
                  absl::StrCat("engine invariants: ", inv.ok() ? "hold" : inv.ToString()));
  } else {
    std::printf("  [--] engine invariants: not checked (remote server)\n");
  }
  if (!target.metrics.empty()) {
    // The counters are updated on the engine thread as requests end: scrape until they settle.
    ServerCounts s;
    for (int attempt = 0; attempt < 50; ++attempt) {
      absl::StatusOr<std::string> text = Scrape(target);
      if (text.ok()) s = ParseCounts(*text).Since(before);
      if (s.total() >= static_cast<double>(total.sent - total.deadline_without_message)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CheckServerCounts(total, s, &checks);
  } else {
    std::printf("  [--] /metrics: not checked (no --metrics)\n");
  }
  const double end_rss = RssMiB();
  checks.Expect(
      end_rss - warm_rss <= f.max_rss_growth_mb,
      absl::StrFormat("RSS after warm-up %.1f MiB, at the end %.1f MiB (peak %.1f): "
                      "growth %.1f MiB, limit %.0f",
                      warm_rss, end_rss, peak_rss, end_rss - warm_rss, f.max_rss_growth_mb));
  std::printf("soak: %s (%d check(s) failed)\n", checks.failed() == 0 ? "PASSED" : "FAILED",
              checks.failed());
  return checks.failed() == 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app("Soak of the server: every request accounted for, nothing leaked (issue 18)");
  std::string front_end = "grpc";
  app.add_option("--front-end", front_end,
                 "grpc: Generate calls; http: the OpenAI-compatible API (completions, chat)")
      ->check(CLI::IsMember({"grpc", "http"}))
      ->capture_default_str();
  app.add_option("--requests", f.requests, "Calls to make")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--clients", f.clients, "Concurrent client threads")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--seed", f.seed, "Seed of the scenario draw")->capture_default_str();
  app.add_option("--target", f.target,
                 "host:port of a running server's gRPC service, or with --front-end http its "
                 "HTTP API (default: a server in process, fast pacing)");
  app.add_option("--metrics", f.metrics,
                 "The target's metrics: host:port of its metrics port, or the base URL of its "
                 "HTTP API (http(s)://host:port), whose /metrics is read with the TLS options "
                 "and the token (a server with TLS or a token has no metrics port)");
  app.add_option("--grpc", f.grpc,
                 "With --front-end http and --target: host:port of the target's gRPC service "
                 "(Abort calls, idle check)");
  app.add_option("--max-rss-growth-mb", f.max_rss_growth_mb,
                 "Allowed RSS growth from the end of the warm-up to the end, MiB")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  loadgen::AddClientSecurityFlags(&app, &f.tls, &f.auth_token_file);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  f.front_end = front_end == "http" ? FrontEnd::kHttp : FrontEnd::kGrpc;
  if (!f.grpc.empty() && (f.front_end != FrontEnd::kHttp || f.target.empty())) {
    std::fprintf(stderr, "soak: --grpc needs --front-end http and --target\n");
    return 2;
  }
  if ((f.tls.any() || !f.auth_token_file.empty()) && f.target.empty()) {
    std::fprintf(stderr,
                 "soak: --tls-ca, --tls-cert, --tls-key and --auth-token-file need --target (the "
                 "in-process server is plain)\n");
    return 2;
  }
  if (f.tls.any() && f.tls.ca.empty()) {
    std::fprintf(stderr, "soak: --tls-cert and --tls-key need --tls-ca (the target's CA)\n");
    return 2;
  }
  // The PEM files read now, for both front ends (the HTTP one reads them only as it connects).
  if (absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
          loadgen::ChannelCredentials(f.tls);
      !creds.ok()) {
    std::fprintf(stderr, "soak: %s\n", std::string(creds.status().message()).c_str());
    return 2;
  }
  if (!f.target.empty()) {
    std::string token;
    if (!f.auth_token_file.empty()) {
      absl::StatusOr<std::string> t = loadgen::ReadAuthToken(f.auth_token_file);
      if (!t.ok()) {
        std::fprintf(stderr, "soak: %s\n", std::string(t.status().message()).c_str());
        return 2;
      }
      token = *std::move(t);
    }
    const bool http = f.front_end == FrontEnd::kHttp;
    return RunSoak(f, Target{.grpc = http ? f.grpc : f.target,
                             .http = http ? f.target : "",
                             .metrics = f.metrics,
                             .tls = f.tls,
                             .token = std::move(token)});
  }
  server::ServerOptions o;
  o.port = 0;
  o.metrics_port = 0;
  o.http_port = f.front_end == FrontEnd::kHttp ? std::optional<int>(0) : std::nullopt;
  o.runner.pacing = server::Pacing::kFast;
  o.runner.mean_output_tokens = 16;  // requests without ignore_eos stop early now and then
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
  if (!s.ok()) {
    std::fprintf(stderr, "soak: cannot start the server: %s\n", s.status().ToString().c_str());
    return 1;
  }
  const std::string http =
      (*s)->http_port().has_value() ? absl::StrCat("127.0.0.1:", *(*s)->http_port()) : "";
  const int rc =
      RunSoak(f, Target{absl::StrCat("127.0.0.1:", (*s)->port()), http,
                        absl::StrCat("127.0.0.1:", (*s)->metrics_port()), &(*s)->runner()});
  (*s)->Shutdown();
  return rc;
}

}  // namespace
}  // namespace neupims::soak

int main(int argc, char** argv) { return neupims::soak::Main(argc, argv); }
