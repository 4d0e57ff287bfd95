#include "tools/loadgen/loadgen.h"

#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "common/option_ranges.h"
#include "common/stats.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "tools/loadgen/metrics_scrape.h"
#include "tools/loadgen/openai_client.h"

namespace neupims::loadgen {
namespace {

constexpr EnumName<Backend> kBackends[] = {
    {"grpc", Backend::kGrpc},
    {"openai", Backend::kOpenAi},
};

using Clock = std::chrono::steady_clock;
using neupims::v1::GenerateRequest;
using neupims::v1::GenerateResponse;
using neupims::v1::LlmService;

std::string CodeName(grpc::StatusCode code) {
  // gRPC and absl share the canonical code numbering.
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

const char* ChannelStateName(grpc_connectivity_state s) {
  switch (s) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    case GRPC_CHANNEL_SHUTDOWN:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

const char* FinishName(neupims::v1::FinishReason r) {
  switch (r) {
    case neupims::v1::FINISH_REASON_LENGTH:
      return "length";
    case neupims::v1::FINISH_REASON_STOP:
      return "stop";
    case neupims::v1::FINISH_REASON_ABORTED:
      return "abort";
    case neupims::v1::FINISH_REASON_REJECTED:
      return "rejected";
    default:
      return "unspecified";
  }
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::chrono::system_clock::time_point DeadlineIn(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

size_t TerminalColumns() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 80;
}

// Shared by the sender, the monitor and every stream of one run.
struct RunState {
  Clock::time_point t0;
  int64_t total = 0;
  std::mutex mu;
  std::condition_variable cv;
  int64_t in_flight = 0;   // guarded by mu
  int64_t done = 0;        // guarded by mu
  double last_done_s = 0;  // guarded by mu
  std::atomic<int64_t> sent{0}, failed{0}, tokens{0};

  double Now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  void Finished(double t, bool ok) {
    if (!ok) failed.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> l(mu);
    --in_flight;
    ++done;
    last_done_s = std::max(last_done_s, t);
    cv.notify_all();
  }
};

// One Generate stream on the gRPC callback API. Owns itself: deleted in OnDone. Its callbacks
// are serialised by gRPC (OnReadDone never runs concurrently with itself or after OnDone), so
// the RequestResult it fills needs no lock; the sender only touches it before StartCall.
class StreamCall final : public grpc::ClientReadReactor<GenerateResponse> {
 public:
  StreamCall(RunState* run, RequestResult* out, GenerateRequest request)
      : run_(run), out_(out), request_(std::move(request)) {}

  void Start(LlmService::Stub* stub, double timeout_s, const std::string& token) {
    if (timeout_s > 0) context_.set_deadline(DeadlineIn(timeout_s));
    Authorize(token, &context_);
    stub->async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // end of stream: OnDone follows
    const double now = run_->Now();
    if (response_.has_tokens()) {
      const int k = response_.tokens().tokens_size();
      if (k > 0) {
        RequestResult& r = *out_;
        // A message carrying k tokens: the first token gets the gap since the previous message
        // (or is the TTFT), the other k - 1 arrived with it (zero gaps), as vLLM records chunks.
        if (r.output_tokens == 0) {
          r.ttft_s = now - r.sent_s;
        } else {
          r.itl_s.push_back(now - last_token_s_);
        }
        r.itl_s.insert(r.itl_s.end(), k - 1, 0.0);
        r.token_recv_s.insert(r.token_recv_s.end(), k, now);
        r.output_tokens += k;
        last_token_s_ = now;
        run_->tokens.fetch_add(k, std::memory_order_relaxed);
      }
    } else if (response_.has_complete()) {
      complete_ = response_.complete();
      has_complete_ = true;
      complete_s_ = now;
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    const double now = run_->Now();
    RequestResult& r = *out_;
    if (!status.ok()) {
      r.ok = false;
      r.error_code = CodeName(status.error_code());
      r.error_message = status.error_message();
      r.e2el_s = now - r.sent_s;
    } else if (!has_complete_) {
      r.ok = false;
      r.error_code = "INCOMPLETE_STREAM";
      r.error_message = "the stream ended without a final message";
      r.e2el_s = now - r.sent_s;
    } else {
      const neupims::v1::GenerateComplete& c = complete_;
      r.finish_reason = FinishName(c.finish_reason());
      if (c.prompt_tokens() > 0) r.prompt_tokens = c.prompt_tokens();
      r.sim_queue_s = c.queue_time_s();
      r.sim_ttft_s = c.ttft_s();
      r.sim_tpot_s = c.tpot_s();
      r.sim_e2el_s = c.e2e_latency_s();
      r.pim_channel = c.pim_channel();
      r.preemptions = c.preemptions();
      r.e2el_s = complete_s_ - r.sent_s;
      if (c.finish_reason() == neupims::v1::FINISH_REASON_REJECTED ||
          c.finish_reason() == neupims::v1::FINISH_REASON_ABORTED) {
        r.ok = false;
        r.error_code =
            c.finish_reason() == neupims::v1::FINISH_REASON_REJECTED ? "REJECTED" : "ABORTED";
        r.error_message = c.error();
      } else if (r.output_tokens == 0) {
        r.ok = false;
        r.error_code = "NO_TOKENS";
        r.error_message = "the stream finished without any token";
      } else {
        r.ok = true;
        r.tpot_s = r.output_tokens > 1
                       ? (r.e2el_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1)
                       : 0.0;
      }
    }
    RunState* run = run_;
    const bool ok = r.ok;
    delete this;
    run->Finished(now, ok);
  }

 private:
  RunState* run_;
  RequestResult* out_;
  GenerateRequest request_;
  GenerateResponse response_;
  grpc::ClientContext context_;
  neupims::v1::GenerateComplete complete_;
  bool has_complete_ = false;
  double complete_s_ = 0;
  double last_token_s_ = 0;
};

// Samples the server (GetServerInfo over gRPC, /metrics over HTTP) and draws progress until
// stopped. Exactly one of `stub` and `url` is set.
class Monitor {
 public:
  Monitor(LlmService::Stub* stub, const BaseUrl* url, RunState* run, const LoadOptions& o,
          std::string label)
      : stub_(stub), url_(url), run_(run), options_(o), label_(std::move(label)) {
    tty_ = !o.quiet && o.progress && isatty(STDERR_FILENO);
    lines_ = !o.quiet && o.progress && !tty_;
    thread_ = std::thread([this] { Loop(); });
  }

  // Stops and joins; returns the samples.
  std::vector<ServerSample> Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    if (drew_) std::fprintf(stderr, "\r%*s\r", static_cast<int>(line_width_), "");
    return std::move(samples_);
  }

 private:
  void Loop() {
    const auto interval = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::max(0.01, options_.sample_interval_s)));
    auto next = Clock::now();
    double last_line = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> l(mu_);
        if (cv_.wait_until(l, next, [this] { return stop_; })) return;
      }
      next += interval;
      Sample();
      const double now = run_->Now();
      window_.push_back({now, run_->tokens.load(std::memory_order_relaxed), Done()});
      while (window_.size() > 2 && window_.front().t < now - 2.0) window_.pop_front();
      if (tty_) {
        Draw(now, false);
      } else if (lines_ && now - last_line >= 2.0) {
        last_line = now;
        Draw(now, true);
      }
    }
  }

  int64_t Done() {
    std::lock_guard<std::mutex> l(run_->mu);
    return run_->done;
  }

  void Sample() {
    std::optional<ServerSample> s =
        url_ != nullptr ? SampleOpenAiMetrics(*url_, run_->Now()) : SampleGrpc();
    if (!s.has_value()) return;
    if (!options_.metrics.empty()) {
      // A failed scrape leaves this sample without the hardware view; the run goes on.
      absl::StatusOr<std::string> text = FetchMetrics(options_.metrics, 1.0);
      absl::StatusOr<HardwareReading> hw =
          text.ok() ? ParseHardwareReading(*text) : absl::StatusOr<HardwareReading>(text.status());
      if (hw.ok()) SetHardware(*hw, &*s);
    }
    samples_.push_back(*std::move(s));
  }

  std::optional<ServerSample> SampleGrpc() {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(1.0));
    Authorize(options_.auth_token, &ctx);
    neupims::v1::GetServerInfoRequest req;
    neupims::v1::ServerInfo info;
    const double t = run_->Now();
    if (!stub_->GetServerInfo(&ctx, req, &info).ok()) return std::nullopt;
    ServerSample s;
    s.t_s = t;
    s.running = info.running();
    s.waiting = info.waiting();
    s.kv_cache_usage = info.kv_cache_usage();
    s.channel_kv_usage.assign(info.channel_kv_usage().begin(), info.channel_kv_usage().end());
    s.sim_time_s = info.sim_time_s();
    return s;
  }

  void Draw(double now, bool line) {
    const WindowPoint& a = window_.front();
    const WindowPoint& b = window_.back();
    const double span = b.t - a.t;
    const double tok_s = span > 0 ? static_cast<double>(b.tokens - a.tokens) / span : 0;
    const double req_s = span > 0 ? static_cast<double>(b.done - a.done) / span : 0;
    const int64_t total = run_->total;
    const int64_t failed = run_->failed.load(std::memory_order_relaxed);
    const int64_t sent = run_->sent.load(std::memory_order_relaxed);
    const std::string server =
        samples_.empty()
            ? std::string()
            : absl::StrFormat("  server: %d running %d waiting kv %.0f%%", samples_.back().running,
                              samples_.back().waiting, samples_.back().kv_cache_usage * 100);
    if (line) {
      std::fprintf(stderr,
                   "[%s] %.1f s: %lld/%lld done (%lld failed), %lld in flight, "
                   "%.1f req/s, %.0f tok/s%s\n",
                   label_.c_str(), now, static_cast<long long>(b.done),
                   static_cast<long long>(total), static_cast<long long>(failed),
                   static_cast<long long>(sent - b.done), req_s, tok_s, server.c_str());
    } else {
      const int width = 24;
      const int filled = static_cast<int>(width * b.done / std::max<int64_t>(1, total));
      std::string text = absl::StrFormat(
          "%s [%s%s] %d/%d  %d in flight  %.1f req/s  %.0f tok/s%s%s", label_,
          std::string(filled, '='), std::string(width - filled, ' '), b.done, total, sent - b.done,
          req_s, tok_s, failed > 0 ? absl::StrFormat("  %d failed", failed) : "", server);
      // One terminal line, so that \r redraws it in place.
      const size_t columns = TerminalColumns();
      if (text.size() >= columns) text.resize(columns - 1);
      line_width_ = std::max(line_width_, text.size());
      std::fprintf(stderr, "\r%-*s", static_cast<int>(line_width_), text.c_str());
      drew_ = true;
    }
    std::fflush(stderr);
  }

  struct WindowPoint {
    double t;
    int64_t tokens, done;
  };

  LlmService::Stub* stub_;
  const BaseUrl* url_;
  RunState* run_;
  const LoadOptions& options_;
  std::string label_;
  bool tty_ = false, lines_ = false, drew_ = false;
  size_t line_width_ = 0;
  std::deque<WindowPoint> window_;
  std::vector<ServerSample> samples_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

absl::Status Unreachable(const std::string& address, absl::string_view why) {
  return absl::UnavailableError(
      absl::StrCat("cannot reach neupims server at ", address, ": ", why));
}

absl::StatusOr<ServerDescription> Describe(LlmService::Stub* stub, const std::string& address,
                                           double timeout_s, const std::string& token) {
  ServerDescription d;
  d.address = address;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(timeout_s));
    Authorize(token, &ctx);
    neupims::v1::ModelInfo m;
    grpc::Status s = stub->GetModelInfo(&ctx, neupims::v1::GetModelInfoRequest(), &m);
    if (!s.ok()) {
      return Unreachable(address, absl::StrCat("GetModelInfo: ", CodeName(s.error_code()), ": ",
                                               s.error_message()));
    }
    d.model = m.name();
    d.max_seq_len = m.max_seq_len();
    d.tokenizer = m.tokenizer();
    d.tensor_parallel = m.tensor_parallel();
    d.pipeline_parallel = m.pipeline_parallel();
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(timeout_s));
    Authorize(token, &ctx);
    neupims::v1::ServerInfo info;
    grpc::Status s = stub->GetServerInfo(&ctx, neupims::v1::GetServerInfoRequest(), &info);
    if (!s.ok()) {
      return Unreachable(address, absl::StrCat("GetServerInfo: ", CodeName(s.error_code()), ": ",
                                               s.error_message()));
    }
    d.version = info.version();
    d.device = info.device();
    d.mode = info.mode();
    d.pacing = info.pacing();
    d.speed = info.speed();
  }
  return d;
}

void PrintLoadReport(const workload::Workload& w, int64_t max_seq_len) {
  const workload::LoadReport& rep = w.report;
  std::fprintf(stderr,
               "workload: %s: kept %lld of %lld rows (dropped %lld longer than the %lld-token "
               "context, %lld with zero output, %lld with zero prompt); %zu requests, %s\n",
               rep.source.c_str(), static_cast<long long>(rep.kept),
               static_cast<long long>(rep.rows), static_cast<long long>(rep.dropped_too_long),
               static_cast<long long>(max_seq_len), static_cast<long long>(rep.dropped_zero_output),
               static_cast<long long>(rep.dropped_zero_prompt), w.requests.size(),
               w.description.c_str());
}

std::string RateText(double rate) {
  return rate > 0 ? absl::StrFormat("%g", rate) : std::string("inf");
}

// How a run reaches the server: a gRPC stub or an OpenAI-compatible base URL (exactly one).
struct Endpoint {
  LlmService::Stub* stub = nullptr;
  const BaseUrl* url = nullptr;
};

// Starts request `i` (its result in `r`), which calls state->Finished when it ends.
void Send(const Endpoint& ep, OpenAiClientPool* pool, const LoadOptions& o,
          const workload::RequestSpec& spec, size_t i, RunState* state, RequestResult* r) {
  r->sent_s = state->Now();
  state->sent.fetch_add(1, std::memory_order_relaxed);
  if (ep.stub != nullptr) {
    GenerateRequest req;
    req.set_request_id(r->request_id);
    if (!o.model.empty()) req.set_model(o.model);
    req.set_prompt_length(spec.prompt_tokens);
    req.set_max_new_tokens(spec.output_tokens);
    req.set_ignore_eos(o.ignore_eos);
    req.set_seed(static_cast<uint64_t>(i));
    auto* call = new StreamCall(state, r, std::move(req));
    call->Start(ep.stub, o.timeout_s, o.auth_token);
    return;
  }
  OpenAiRequest req;
  req.model = o.model;
  req.prompt_tokens = spec.prompt_tokens;
  req.max_tokens = spec.output_tokens;
  req.ignore_eos = o.ignore_eos;
  req.seed = static_cast<uint64_t>(i);
  req.timeout_s = o.timeout_s;
  pool->Run([url = ep.url, req, state, r](httplib::Client& client) {
    RunOpenAiRequest(
        client, *url, req, [state] { return state->Now(); }, &state->tokens, r);
    state->Finished(state->Now(), r->ok);
  });
}

// Runs one workload against the server and fills a RunResult.
RunResult RunOnce(const Endpoint& ep, const LoadOptions& o, const workload::Workload& w,
                  ClientStats* client) {
  RunResult run;
  const bool closed = w.arrivals.kind == workload::ArrivalKind::kClosedLoop;
  run.request_rate = closed ? 0 : w.arrivals.rate_per_s;
  run.max_concurrency = closed ? w.arrivals.concurrency : 0;
  run.label =
      closed ? absl::StrCat("concurrency ", run.max_concurrency)
             : absl::StrCat("rate ", RateText(run.request_rate), run.request_rate > 0 ? "/s" : "");
  const size_t n = w.requests.size();
  run.requests.resize(n);
  // Unique among live requests on the server, also across runs of one process.
  static std::atomic<int> runs_in_process{0};
  const std::string prefix = absl::StrFormat("bench-%d-%d-", getpid(), runs_in_process++);
  for (size_t i = 0; i < n; ++i) {
    RequestResult& r = run.requests[i];
    const workload::RequestSpec& spec = w.requests[i];
    r.index = static_cast<int64_t>(i);
    r.request_id = absl::StrCat(prefix, i);
    r.scheduled_s = spec.arrival_s;
    r.prompt_tokens = spec.prompt_tokens;
    r.itl_s.reserve(spec.output_tokens > 0 ? spec.output_tokens - 1 : 0);
    r.token_recv_s.reserve(spec.output_tokens);
  }

  RunState state;
  state.total = static_cast<int64_t>(n);
  const double cpu0 = CpuSeconds();
  run.wall_start_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  state.t0 = Clock::now();
  Monitor monitor(ep.stub, ep.url, &state, o, run.label);
  std::optional<OpenAiClientPool> pool;
  if (ep.url != nullptr) pool.emplace(*ep.url);

  for (size_t i = 0; i < n; ++i) {
    const workload::RequestSpec& spec = w.requests[i];
    RequestResult& r = run.requests[i];
    if (closed) {
      std::unique_lock<std::mutex> l(state.mu);
      state.cv.wait(l, [&] { return state.in_flight < w.arrivals.concurrency; });
      ++state.in_flight;
      r.scheduled_s = state.Now();
    } else {
      const auto due = state.t0 + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(spec.arrival_s));
      if (Clock::now() < due) std::this_thread::sleep_until(due);
      std::lock_guard<std::mutex> l(state.mu);
      ++state.in_flight;
    }
    Send(ep, pool.has_value() ? &*pool : nullptr, o, spec, i, &state, &r);
  }
  {
    std::unique_lock<std::mutex> l(state.mu);
    state.cv.wait(l, [&] { return state.done == state.total; });
    run.duration_s = state.last_done_s - (n > 0 ? run.requests[0].sent_s : 0.0);
  }
  run.samples = monitor.Stop();
  pool.reset();  // joins the HTTP client threads
  // Streams release the lock in Finished() before returning; take it once more so none is
  // still inside it when `state` goes away.
  { std::lock_guard<std::mutex> l(state.mu); }

  client->cpu_s = CpuSeconds() - cpu0;
  if (!closed && n > 0) {
    std::vector<double> lag;
    lag.reserve(n);
    for (const RequestResult& r : run.requests) lag.push_back(r.sent_s - r.scheduled_s);
    const neupims::Summary s = ::neupims::Summarize(std::move(lag));
    client->send_lag_p99_s = s.p99;
    client->send_lag_max_s = s.max;
  }
  if (n > 1) {
    const double span = run.requests.back().sent_s - run.requests.front().sent_s;
    if (span > 0) client->achieved_send_rate = static_cast<double>(n - 1) / span;
  }
  Summarize(run, o.slo);
  return run;
}

absl::StatusOr<std::unique_ptr<LlmService::Stub>> ConnectGrpc(const LoadOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  // Per-request balancing over every address the name resolves to: with a headless Service
  // (`dns:///neupims.<ns>.svc.cluster.local:50051`) the streams spread over all replicas; with
  // one address it changes nothing (docs/deploy.md).
  args.SetLoadBalancingPolicyName("round_robin");
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds, ChannelCredentials(o.tls));
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(o.server, creds, args);
  if (!channel->WaitForConnected(DeadlineIn(o.connect_timeout_s))) {
    return Unreachable(
        o.server, absl::StrFormat("no connection within %g s (channel %s); is `neupims serve` "
                                  "running there? (--server)%s",
                                  o.connect_timeout_s, ChannelStateName(channel->GetState(false)),
                                  TlsHint(o.tls)));
  }
  return LlmService::NewStub(channel);
}

std::string Centered(absl::string_view title, char fill) {
  const int width = 50;
  const int len = static_cast<int>(title.size());
  if (len >= width) return std::string(title);
  const int left = (width - len) / 2;
  return absl::StrCat(std::string(left, fill), title, std::string(width - len - left, fill));
}

void Row(FILE* out, absl::string_view key, const std::string& value) {
  absl::FPrintF(out, "%-40s %s\n", key, value);
}

std::string F2(double v) { return absl::StrFormat("%.2f", v); }

void PrintPercentiles(FILE* out, absl::string_view title, absl::string_view metric,
                      const Percentiles& p) {
  absl::FPrintF(out, "%s\n", Centered(title, '-'));
  Row(out, absl::StrCat("Mean ", metric, " (ms):"), F2(p.mean));
  Row(out, absl::StrCat("Median ", metric, " (ms):"), F2(p.median));
  Row(out, absl::StrCat("P90 ", metric, " (ms):"), F2(p.p90));
  Row(out, absl::StrCat("P99 ", metric, " (ms):"), F2(p.p99));
}

bool AnySlo(const SloTargets& slo) { return slo.ttft_ms > 0 || slo.tpot_ms > 0 || slo.e2el_ms > 0; }

}  // namespace

const EnumNames<Backend>& BackendNames() {
  static constexpr EnumNames<Backend> kNames("backend", kBackends);
  return kNames;
}

absl::StatusOr<std::vector<std::string>> ParseSweepRates(absl::string_view text) {
  std::vector<std::string> rates;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sweep-rates '", text, "': empty rate (expected e.g. 1,2,4,8)"));
    }
    if (part != "inf" && part != "all") {
      double r = 0;
      if (!absl::SimpleAtod(part, &r) || !std::isfinite(r) || r <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("--sweep-rates '", text, "': '", part,
                                                       "' is not a positive rate (or inf)"));
      }
    }
    rates.emplace_back(part);
  }
  return rates;
}

absl::Status CheckTimeouts(double timeout_s, double connect_timeout_s) {
  for (const auto& [flag, value, range] :
       {std::tuple{"--timeout-s", timeout_s, option_ranges::kRequestTimeoutS},
        std::tuple{"--connect-timeout-s", connect_timeout_s, option_ranges::kConnectTimeoutS}}) {
    if (const std::string problem = DoubleRangeProblem(value, range); !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": value ", value, " ", problem));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const LoadOptions& o) {
  if (o.backend == Backend::kGrpc && o.server.empty()) {
    return absl::InvalidArgumentError("--server is empty (host:port)");
  }
  if (o.backend == Backend::kOpenAi) RETURN_IF_ERROR(ParseBaseUrl(o.base_url).status());
  if (o.tls.cert.empty() != o.tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together (mutual TLS)");
  }
  if (!o.metrics.empty() &&
      (o.metrics.rfind(':') == std::string::npos || o.metrics.rfind(':') + 1 == o.metrics.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics '", o.metrics, "': expected HOST:PORT of the metrics endpoint"));
  }
  if (const std::string problem = HostPortProblem(o.metrics); !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics '", o.metrics, "': ", problem));
  }
  RETURN_IF_ERROR(CheckTimeouts(o.timeout_s, o.connect_timeout_s));
  if (o.slo.ttft_ms < 0 || o.slo.tpot_ms < 0 || o.slo.e2el_ms < 0) {
    return absl::InvalidArgumentError("--slo-*-ms must be positive");
  }
  if (o.workload.num_requests < 1) {
    return absl::InvalidArgumentError("-n/--num-requests must be at least 1");
  }
  std::vector<std::string> rates = {o.workload.request_rate};
  if (!o.sweep_rates.empty()) {
    if (!o.workload.trace.empty()) {
      return absl::InvalidArgumentError(
          "--sweep-rates cannot be used with --trace (a trace has its own arrival times)");
    }
    ASSIGN_OR_RETURN(rates, ParseSweepRates(o.sweep_rates));
  }
  if (o.workload.trace.empty()) {
    for (const std::string& rate : rates) {
      absl::StatusOr<workload::ArrivalOptions> a =
          workload::ParseArrival(rate, o.workload.burstiness, o.workload.max_concurrency);
      if (!a.ok() && !o.sweep_rates.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--sweep-rates ", rate, ": ", a.status().message()));
      }
      if (!a.ok()) return a.status();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAuthToken(const std::string& path) {
  constexpr int64_t kMaxTokenFileBytes = 64 << 10;
  absl::StatusOr<std::string> data = ReadInputFile(path, kMaxTokenFileBytes);
  if (!data.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--auth-token-file: ", data.status().message()));
  }
  absl::StatusOr<std::string> token = TokenFromFileContents(*data);
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-token-file: ", path, ": ", token.status().message()));
  }
  return token;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsClientOptions& tls) {
  if (!tls.any()) return grpc::InsecureChannelCredentials();
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together (mutual TLS)");
  }
  grpc::SslCredentialsOptions ssl;  // pem_root_certs empty: gRPC's default roots
  for (auto [flag, path, pem] : {std::make_tuple("--tls-ca", &tls.ca, &ssl.pem_root_certs),
                                 std::make_tuple("--tls-cert", &tls.cert, &ssl.pem_cert_chain),
                                 std::make_tuple("--tls-key", &tls.key, &ssl.pem_private_key)}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> data = ReadInputFile(*path, kMaxConfigFileBytes);
    if (!data.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": ", data.status().message()));
    }
    *pem = *std::move(data);
  }
  return grpc::SslCredentials(ssl);
}

std::string TlsHint(const TlsClientOptions& tls) {
  return tls.any() ? " (over TLS: does the server have --tls-cert, and did --tls-ca sign it?)"
                   : " (a server with --tls-cert needs --tls-ca)";
}

void Authorize(const std::string& token, grpc::ClientContext* ctx) {
  if (!token.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

absl::StatusOr<std::vector<RunResult>> RunLoad(const LoadOptions& o, LoadInfo* info) {
  RETURN_IF_ERROR(ValidateOptions(o));
  LoadInfo local;
  if (info == nullptr) info = &local;

  // The backend's connection, and what the server says about itself.
  std::unique_ptr<LlmService::Stub> stub;
  std::optional<BaseUrl> url;
  Endpoint ep;
  if (o.backend == Backend::kOpenAi) {
    ASSIGN_OR_RETURN(url, ParseBaseUrl(o.base_url));
    url->auth_token = o.auth_token;
    url->tls = o.tls;
    ASSIGN_OR_RETURN(info->server, DescribeOpenAiServer(*url, o.connect_timeout_s));
    ep.url = &*url;
  } else {
    ASSIGN_OR_RETURN(stub, ConnectGrpc(o));
    ASSIGN_OR_RETURN(info->server,
                     Describe(stub.get(), o.server, o.connect_timeout_s, o.auth_token));
    ep.stub = stub.get();
  }
  const std::string& where = info->server.address;
  if (!o.model.empty() && o.model != info->server.model) {
    return absl::FailedPreconditionError(absl::StrCat("--model '", o.model, "': the server at ",
                                                      where, " serves '", info->server.model, "'"));
  }

  std::vector<std::string> rates = {o.workload.request_rate};
  if (!o.sweep_rates.empty()) {
    ASSIGN_OR_RETURN(rates, ParseSweepRates(o.sweep_rates));
  }

  std::vector<RunResult> runs;
  for (size_t k = 0; k < rates.size(); ++k) {
    workload::WorkloadFlags wf = o.workload;
    wf.request_rate = rates[k];
    absl::StatusOr<workload::Workload> built =
        workload::BuildWorkload(wf, info->server.max_seq_len);
    if (!built.ok() && wf.trace.empty() && !wf.synthetic.empty() &&
        !absl::StrContains(built.status().message(), "--synthetic")) {
      return absl::Status(built.status().code(), absl::StrCat("--synthetic ", wf.synthetic, ": ",
                                                              built.status().message()));
    }
    if (!built.ok()) return built.status();
    workload::Workload& w = *built;
    if (w.requests.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(wf.trace.empty() ? "--dataset " + wf.dataset : "--trace " + wf.trace,
                       ": no requests left after filtering"));
    }
    if (k == 0) {
      info->workload_description = w.description;
      info->workload = workload::WorkloadJson(wf, w);
      if (!o.quiet) PrintLoadReport(w, info->server.max_seq_len);
    }
    if (!o.quiet) {
      std::fprintf(stderr, "run %zu/%zu: %zu requests, %s -> %s (%s, %s, %s pacing)\n", k + 1,
                   rates.size(), w.requests.size(), w.description.c_str(), where.c_str(),
                   info->server.model.c_str(), info->server.mode.c_str(),
                   info->server.pacing.c_str());
    }
    ClientStats client;
    runs.push_back(RunOnce(ep, o, w, &client));
    if (!wf.trace.empty()) runs.back().label = "trace";
    info->client.push_back(client);
  }
  return runs;
}

void PrintSummary(const RunResult& run, const SloTargets& slo, const ClientStats* client,
                  FILE* out) {
  const RunSummary& s = run.summary;
  absl::FPrintF(out, "%s\n", Centered(" Serving Benchmark Result ", '='));
  Row(out, "Run:", run.label);
  Row(out, "Successful requests:", absl::StrCat(s.completed));
  Row(out, "Failed requests:", absl::StrCat(s.failed));
  for (const auto& [code, count] : s.failures_by_code) {
    Row(out, absl::StrCat("  ", code, ":"), absl::StrCat(count));
  }
  if (run.max_concurrency > 0)
    Row(out, "Maximum request concurrency:", absl::StrCat(run.max_concurrency));
  Row(out, "Benchmark duration (s):", F2(s.duration_s));
  Row(out, "Total input tokens:", absl::StrCat(s.total_input_tokens));
  Row(out, "Total generated tokens:", absl::StrCat(s.total_output_tokens));
  Row(out, "Request throughput (req/s):", F2(s.request_throughput));
  if (AnySlo(slo)) {
    std::vector<std::string> targets;
    if (slo.ttft_ms > 0) targets.push_back(absl::StrFormat("TTFT <= %g ms", slo.ttft_ms));
    if (slo.tpot_ms > 0) targets.push_back(absl::StrFormat("TPOT <= %g ms", slo.tpot_ms));
    if (slo.e2el_ms > 0) targets.push_back(absl::StrFormat("E2EL <= %g ms", slo.e2el_ms));
    Row(out, "Request goodput (req/s):", F2(s.goodput));
    Row(out, "Good requests:",
        absl::StrCat(s.good, " of ", s.completed, " (", absl::StrJoin(targets, ", "), ")"));
  }
  Row(out, "Output token throughput (tok/s):", F2(s.output_throughput));
  Row(out, "Total Token throughput (tok/s):", F2(s.total_token_throughput));
  if (client != nullptr) {
    const int64_t n = static_cast<int64_t>(run.requests.size());
    if (client->achieved_send_rate > 0) {
      Row(out, "Achieved send rate (req/s):", F2(client->achieved_send_rate));
    }
    if (run.max_concurrency == 0) {
      Row(out, "Send lag p99 / max (ms):",
          absl::StrFormat("%.2f / %.2f", client->send_lag_p99_s * 1e3,
                          client->send_lag_max_s * 1e3));
    }
    Row(out, "Client CPU per request (ms):",
        F2(n > 0 ? client->cpu_s * 1e3 / static_cast<double>(n) : 0.0));
  }
  absl::FPrintF(out, "%s\n", Centered(" client (wall clock) ", '='));
  PrintPercentiles(out, "Time to First Token", "TTFT", s.ttft_ms);
  PrintPercentiles(out, "Time per Output Token (excl. 1st token)", "TPOT", s.tpot_ms);
  PrintPercentiles(out, "Inter-token Latency", "ITL", s.itl_ms);
  PrintPercentiles(out, "End-to-end Latency", "E2EL", s.e2el_ms);
  absl::FPrintF(out, "%s\n", Centered(" hardware (simulated) ", '='));
  PrintPercentiles(out, "Queueing Time", "queue", s.sim_queue_ms);
  PrintPercentiles(out, "Time to First Token", "TTFT", s.sim_ttft_ms);
  PrintPercentiles(out, "Time per Output Token (excl. 1st token)", "TPOT", s.sim_tpot_ms);
  PrintPercentiles(out, "End-to-end Latency", "E2EL", s.sim_e2el_ms);
  absl::FPrintF(out, "%s\n", std::string(50, '='));
}

void PrintSweepTable(const std::vector<RunResult>& runs, FILE* out) {
  absl::FPrintF(out, "%s\n", Centered(" Sweep ", '='));
  absl::FPrintF(out, "%-10s %8s %10s %7s %12s %12s %12s %12s\n", "rate", "req/s", "out tok/s",
                "failed", "med TTFT ms", "p99 TTFT ms", "med TPOT ms", "sim TTFT ms");
  for (const RunResult& r : runs) {
    const RunSummary& s = r.summary;
    absl::FPrintF(out, "%-10s %8.2f %10.1f %7d %12.2f %12.2f %12.2f %12.2f\n",
                  r.request_rate > 0 ? absl::StrFormat("%g/s", r.request_rate) : r.label,
                  s.request_throughput, s.output_throughput, s.failed, s.ttft_ms.median,
                  s.ttft_ms.p99, s.tpot_ms.median, s.sim_ttft_ms.median);
  }
  absl::FPrintF(out, "%s\n", std::string(50, '='));
}

nlohmann::json ResultJson(const std::vector<RunResult>& runs, const LoadOptions& o,
                          const LoadInfo& info) {
  nlohmann::json settings;
  settings["backend"] = BackendNames().ToString(o.backend);
  settings["server"] = o.backend == Backend::kOpenAi ? o.base_url : o.server;
  settings["server_version"] = info.server.version;
  settings["model"] = info.server.model;
  settings["max_seq_len"] = info.server.max_seq_len;
  settings["tensor_parallel"] = info.server.tensor_parallel;
  settings["pipeline_parallel"] = info.server.pipeline_parallel;
  settings["device"] = info.server.device;
  settings["mode"] = info.server.mode;
  settings["pacing"] = info.server.pacing;
  settings["speed"] = info.server.speed;
  settings["ignore_eos"] = o.ignore_eos;
  settings["timeout_s"] = o.timeout_s;
  settings["slo"] = {
      {"ttft_ms", o.slo.ttft_ms}, {"tpot_ms", o.slo.tpot_ms}, {"e2el_ms", o.slo.e2el_ms}};
  settings["sweep_rates"] = o.sweep_rates;
  settings["workload"] = info.workload;

  char date[32] = {0};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(date, sizeof(date), "%Y%m%d-%H%M%S", &tm);

  auto with_client = [&](size_t i) {
    nlohmann::json j = RunJson(runs[i]);
    if (i < info.client.size()) {
      const ClientStats& c = info.client[i];
      j["client"] = {{"cpu_s", c.cpu_s},
                     {"send_lag_p99_s", c.send_lag_p99_s},
                     {"send_lag_max_s", c.send_lag_max_s},
                     {"achieved_send_rate", c.achieved_send_rate}};
    }
    return j;
  };
  nlohmann::json j;
  if (runs.size() == 1) {
    j = with_client(0);
  } else {
    j["runs"] = nlohmann::json::array();
    for (size_t i = 0; i < runs.size(); ++i) j["runs"].push_back(with_client(i));
  }
  j["date"] = date;
  j["backend"] = o.backend == Backend::kOpenAi ? "openai" : "neupims";
  j["model_id"] = info.server.model;
  j["tokenizer_id"] = info.server.tokenizer;
  j["burstiness"] = o.workload.burstiness;
  j["settings"] = std::move(settings);
  return j;
}

namespace {

std::string RunTag(const RunResult& run) {
  return run.max_concurrency > 0
             ? absl::StrCat("conc", run.max_concurrency)
             : absl::StrCat("rate", run.request_rate > 0 ? absl::StrFormat("%g", run.request_rate)
                                                         : std::string("inf"));
}

// `path` with `.tag` before its extension (or at its end).
std::string WithTag(const std::string& path, const std::string& tag) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1)) {
    return absl::StrCat(path, ".", tag);
  }
  return absl::StrCat(path.substr(0, dot), ".", tag, path.substr(dot));
}

}  // namespace

std::string SuffixedPath(const std::string& path, const RunResult& run) {
  return WithTag(path, RunTag(run));
}

std::vector<std::string> SweepPaths(const std::string& path, const std::vector<RunResult>& runs) {
  std::map<std::string, int> uses, seen;
  for (const RunResult& run : runs) ++uses[RunTag(run)];
  std::vector<std::string> out;
  for (const RunResult& run : runs) {
    const std::string tag = RunTag(run);
    out.push_back(WithTag(path, uses[tag] > 1 ? absl::StrCat(tag, ".run", ++seen[tag]) : tag));
  }
  return out;
}

}  // namespace neupims::loadgen
