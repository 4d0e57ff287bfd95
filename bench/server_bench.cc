// server_bench: end-to-end speed of the gRPC server (a plain program, not Google Benchmark: it
// measures a whole server and its clients, not a function).
//
// 1. Fast pacing: an in-process server, `--streams` concurrent Generate streams of a fixed size
//    (prompt_length, max_new_tokens, ignore_eos) from `--client` API clients on `--channels`
//    channels (default 1). Streamed tokens/s and requests/s over the wall time from the first call
//    to the last stream's end; `--reps` repetitions (a fresh server each), all printed, and their
//    median. The same load over the OpenAI-compatible HTTP API on the same server, alternating with
//    the gRPC repetitions: `--streams` concurrent SSE streams (POST /v1/completions, stream,
//    token-id prompt, ignore_eos, include_usage) from blocking cpp-httplib clients, one thread and
//    one keep-alive connection each, connected before the clock starts. Printed side by side with
//    the HTTP/gRPC cost ratio per token: by wall time (gRPC tokens/s over HTTP tokens/s) and by
//    the process's CPU time per token (server and clients share the process and the 2 cores).
// 2. Realtime pacing at `--speed`: the same load; for every received token, the lag between its
//    wall-clock receipt and its scheduled wall time, engine clock origin + sim_time_s / speed.
//    The lag therefore includes the engine thread's wake-up, the server's write path, the
//    loopback transport and the client's own callback scheduling (all on the same machine).
//    The engine clock origin is not exported, so it is calibrated in process before the load:
//    a runner call wakes the idle engine thread, which then advances the engine to the current
//    wall-mapped simulated time and publishes it in Snapshot(); that time was read between the
//    call and the first snapshot showing it, so origin = that window's midpoint - sim / speed,
//    within half the window (printed; usually microseconds).
//
// Usage: server_bench [--streams=256] [--prompt=128] [--tokens=128] [--reps=3]
//                     [--speed=1] [--realtime_streams=256,1000] [--channels=1]
//                     [--client=callback|cq] [--cq_threads=2]
// --reps=0 skips part 1; --realtime_streams=0 skips part 2. --channels: the gRPC clients' channels,
// each its own TCP connection (streams assigned round-robin). --client:
// the gRPC clients' API: "callback" (reactors; gRPC runs their reads on its callback threads, the
// ones that also run the in-process server's write-done callbacks) or "cq" (the completion-queue
// API: --cq_threads threads, each polling its own queue; streams assigned round-robin). Both
// record the same receipts and make the same checks.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/stats.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "server/server.h"

namespace neupims::server {
namespace {

using Clock = std::chrono::steady_clock;
using neupims::v1::GenerateRequest;
using neupims::v1::GenerateResponse;

struct BenchFlags {
  int streams = 256;
  int64_t prompt = 128;
  int64_t tokens = 128;
  int reps = 3;
  double speed = 1;
  std::vector<int> realtime_streams = {256, 1000};  // one realtime run per count
  int channels = 1;        // client channels, each its own TCP connection; streams round-robin
  bool cq_client = false;  // --client=cq: the completion-queue client instead of callbacks
  int cq_threads = 2;      // --client=cq: polling threads, one completion queue each
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// What one client stream saw, whichever client API drove it. Read only after the stream ended.
struct StreamRecord {
  struct Receipt {
    Clock::time_point wall;
    double sim_time_s;
    int64_t index;  // the token's position in its stream
  };

  // A message arrived at `now`.
  void OnMessage(const GenerateResponse& m, Clock::time_point now, bool record) {
    if (m.has_tokens()) {
      ++messages_;
      tokens_ += m.tokens().tokens_size();
      if (record) {
        for (const neupims::v1::Token& t : m.tokens().tokens()) {
          receipts_.push_back({now, t.sim_time_s(), t.index()});
        }
      }
    } else if (m.has_complete()) {
      finish_reason_ = m.complete().finish_reason();
      e2e_s_ = m.complete().e2e_latency_s();
    }
  }

  grpc::Status status_;
  Clock::time_point end_;
  int64_t tokens_ = 0, messages_ = 0;
  int finish_reason_ = 0;
  double e2e_s_ = 0;
  std::vector<Receipt> receipts_;
};

// One Generate stream on the callback API (--client=callback): gRPC runs its reads on its own
// callback threads. Records every token's sim time and the wall time its message arrived. Read
// the fields only after Wait() returned.
class Stream : public grpc::ClientReadReactor<GenerateResponse>, public StreamRecord {
 public:
  Stream(neupims::v1::LlmService::Stub* stub, GenerateRequest request, bool record)
      : request_(std::move(request)), record_(record) {
    stub->async()->Generate(&ctx_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    OnMessage(response_, Clock::now(), record_);
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& s) override {
    absl::MutexLock l(&mu_);
    status_ = s;
    end_ = Clock::now();
    done_ = true;
  }

  // After it returns, the StreamRecord fields are final: OnDone happens after the last
  // OnReadDone and Wait synchronizes on mu_.
  void Wait() {
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

 private:
  grpc::ClientContext ctx_;
  GenerateRequest request_;
  GenerateResponse response_;
  bool record_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// One Generate stream on the completion-queue API (--client=cq), driven by one CqClient thread:
// the stream itself is the tag of its one outstanding operation (the start, a read, the finish).
class CqStream : public StreamRecord {
 public:
  CqStream(GenerateRequest request, bool record) : request_(std::move(request)), record_(record) {}

  void Start(neupims::v1::LlmService::Stub* stub, grpc::CompletionQueue* cq) {
    reader_ = stub->PrepareAsyncGenerate(&ctx_, request_, cq);
    reader_->StartCall(this);
  }

  // The outstanding operation completed; true once the stream has ended (status received).
  bool Proceed(bool ok) {
    const Clock::time_point now = Clock::now();
    if (state_ == State::kFinishing) {
      end_ = now;
      return true;
    }
    if (state_ == State::kReading && ok) OnMessage(response_, now, record_);
    if (ok) {
      state_ = State::kReading;
      reader_->Read(&response_, this);
    } else {  // no more messages (or the call failed to start): collect the status
      state_ = State::kFinishing;
      reader_->Finish(&status_, this);
    }
    return false;
  }

 private:
  enum class State { kStarting, kReading, kFinishing };
  grpc::ClientContext ctx_;
  GenerateRequest request_;
  GenerateResponse response_;
  bool record_;
  State state_ = State::kStarting;
  std::unique_ptr<grpc::ClientAsyncReader<GenerateResponse>> reader_;
};

// Polls the CqStreams of one run: `threads` threads, each with its own completion queue; stream
// i belongs to queue i % threads. A thread ends when all its streams have ended.
class CqClient {
 public:
  CqClient(int threads, int streams) : queues_(static_cast<size_t>(threads)) {
    for (int q = 0; q < threads; ++q) {
      const int mine = streams / threads + (q < streams % threads ? 1 : 0);
      threads_.emplace_back([this, q, mine] { Poll(&queues_[static_cast<size_t>(q)], mine); });
    }
  }

  void Start(CqStream* s, neupims::v1::LlmService::Stub* stub, int i) {
    s->Start(stub, &queues_[static_cast<size_t>(i) % queues_.size()]);
  }

  // Returns once every stream has ended.
  void Join() {
    for (std::thread& t : threads_) t.join();
  }

 private:
  static void Poll(grpc::CompletionQueue* cq, int streams) {
    void* tag = nullptr;
    bool ok = false;
    int ended = 0;
    while (ended < streams && cq->Next(&tag, &ok)) {
      if (static_cast<CqStream*>(tag)->Proceed(ok)) ++ended;
    }
    cq->Shutdown();
    while (cq->Next(&tag, &ok)) {
    }
  }

  std::deque<grpc::CompletionQueue> queues_;
  std::vector<std::thread> threads_;
};

struct RunResult {
  double wall_s = 0;
  int64_t tokens = 0, messages = 0, requests = 0, failed = 0;
  double max_e2e_s = 0;
  double sim_s = 0;
  std::vector<double> lags_ms;  // client receipt - scheduled time, per token
  // The same samples by the token's position: a stream's first token, its last, the others.
  std::array<std::vector<double>, 3> lags_by_position_ms;
  std::vector<double> send_lags_ms;  // server hand-off to gRPC - scheduled time, per message
  double origin_error_ms = 0;        // half the calibration window
  double cpu_s = 0;                  // process CPU (server + clients) from start to end
};

// The wall time at which the realtime engine clock read 0 (see the file comment), and half the
// width of the window it was bracketed in.
Clock::time_point CalibrateOrigin(EngineRunner& runner, double speed, double* error_ms) {
  Clock::time_point best{};
  double best_window_s = 1e9;
  for (int i = 0; i < 5; ++i) {
    const double before = runner.Snapshot().sim_time_s;
    const Clock::time_point t1 = Clock::now();
    (void)runner.Abort("server-bench-calibration");  // NOT_FOUND; wakes the engine thread
    double sim = before;
    Clock::time_point t3 = t1;
    while (sim == before && Seconds(t3 - t1) < 1.0) {
      sim = runner.Snapshot().sim_time_s;
      t3 = Clock::now();
    }
    const double window_s = Seconds(t3 - t1);
    if (sim != before && window_s < best_window_s) {
      best_window_s = window_s;
      best =
          t1 + (t3 - t1) / 2 -
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(sim / speed));
    }
  }
  *error_ms = best_window_s / 2 * 1e3;
  return best;
}

ServerOptions BenchOptions(Pacing pacing, double speed) {
  ServerOptions o;
  o.port = 0;
  o.metrics_port = -1;  // no metrics endpoint (the metrics themselves are still updated)
  o.http_port = 0;
  o.runner.pacing = pacing;
  o.runner.speed = speed;
  o.runner.record_send_lag = pacing == Pacing::kRealtime;
  o.drain_timeout = std::chrono::milliseconds(0);
  return o;
}

double Median(std::vector<double> v) { return Summarize(std::move(v)).median; }

bool Run(const ServerOptions& options, int streams, const BenchFlags& f, bool record,
         RunResult* out) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(server.status().message()).c_str());
    return false;
  }
  Clock::time_point origin{};
  if (record) {
    origin = CalibrateOrigin((*server)->runner(), options.runner.speed, &out->origin_error_ms);
  }
  std::vector<std::unique_ptr<neupims::v1::LlmService::Stub>> stubs;
  for (int c = 0; c < f.channels; ++c) {
    // Channels with equal arguments share one subchannel (one TCP connection); a distinct
    // argument gives each its own.
    grpc::ChannelArguments args;
    args.SetInt("neupims.server_bench.channel", c);
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                             grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "error: cannot connect to the server\n");
      return false;
    }
    stubs.push_back(neupims::v1::LlmService::NewStub(channel));
  }

  std::vector<std::unique_ptr<Stream>> callback_streams;
  std::vector<std::unique_ptr<CqStream>> cq_streams;
  std::vector<StreamRecord*> all;
  all.reserve(static_cast<size_t>(streams));
  const double cpu0 = CpuSeconds();
  const Clock::time_point start = Clock::now();
  std::unique_ptr<CqClient> cq_client;
  if (f.cq_client) cq_client = std::make_unique<CqClient>(f.cq_threads, streams);
  for (int i = 0; i < streams; ++i) {
    GenerateRequest req;
    req.set_prompt_length(f.prompt);
    req.set_max_new_tokens(f.tokens);
    req.set_ignore_eos(true);
    req.set_seed(static_cast<uint64_t>(i));
    neupims::v1::LlmService::Stub* stub = stubs[static_cast<size_t>(i % f.channels)].get();
    if (cq_client != nullptr) {
      cq_streams.push_back(std::make_unique<CqStream>(req, record));
      cq_client->Start(cq_streams.back().get(), stub, i);
      all.push_back(cq_streams.back().get());
    } else {
      callback_streams.push_back(std::make_unique<Stream>(stub, req, record));
      all.push_back(callback_streams.back().get());
    }
  }
  if (cq_client != nullptr) cq_client->Join();
  for (auto& s : callback_streams) s->Wait();
  Clock::time_point end = start;
  for (const StreamRecord* s : all) {
    end = std::max(end, s->end_);
    ++out->requests;
    out->tokens += s->tokens_;
    out->messages += s->messages_;
    out->max_e2e_s = std::max(out->max_e2e_s, s->e2e_s_);
    const bool ok = s->status_.ok() && s->tokens_ == f.tokens &&
                    s->finish_reason_ == neupims::v1::FINISH_REASON_LENGTH;
    if (!ok) ++out->failed;
    for (const StreamRecord::Receipt& r : s->receipts_) {
      const double scheduled_s = r.sim_time_s / options.runner.speed;
      const double lag_ms = (Seconds(r.wall - origin) - scheduled_s) * 1e3;
      out->lags_ms.push_back(lag_ms);
      if (!ok) continue;  // the last position only where the stream has all its tokens
      const size_t position = r.index == 0 ? 0 : r.index == f.tokens - 1 ? 2 : 1;
      out->lags_by_position_ms[position].push_back(lag_ms);
    }
  }
  out->cpu_s = CpuSeconds() - cpu0;
  out->wall_s = Seconds(end - start);
  out->sim_s = (*server)->runner().Snapshot().sim_time_s;
  for (double lag_s : (*server)->runner().TakeSendLags()) out->send_lags_ms.push_back(lag_s * 1e3);
  (*server)->Shutdown();
  return true;
}

// Counts one SSE stream's events as they arrive: token chunks (finish_reason null), the finish
// reason, the usage chunk's completion_tokens and [DONE]. Finds markers; parses only the usage.
class SseCounter {
 public:
  void Feed(const char* data, size_t n) {
    buf_.append(data, n);
    size_t start = 0, end;
    while ((end = buf_.find("\n\n", start)) != std::string::npos) {
      Event(std::string_view(buf_).substr(start, end - start));
      start = end + 2;
    }
    buf_.erase(0, start);
  }
  int64_t tokens = 0, usage_tokens = -1;
  bool length = false, done = false;

 private:
  void Event(std::string_view e) {
    if (e == "data: [DONE]") {
      done = true;
    } else if (e.find("\"finish_reason\":null") != std::string_view::npos) {
      ++tokens;
    } else if (e.find("\"finish_reason\":\"length\"") != std::string_view::npos) {
      length = true;
    } else if (e.find("\"usage\":{") != std::string_view::npos) {
      usage_tokens = nlohmann::json::parse(e.substr(6))["usage"]["completion_tokens"];
    }
  }
  std::string buf_;
};

// The fast-pacing load over HTTP: one thread and one keep-alive connection per stream. Every
// client connects (GET /health) before the clock starts, then all start together.
bool RunHttp(const ServerOptions& options, int streams, const BenchFlags& f, RunResult* out) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(server.status().message()).c_str());
    return false;
  }
  const int port = *(*server)->http_port();
  nlohmann::json body = {{"prompt", std::vector<int64_t>(static_cast<size_t>(f.prompt), 1)},
                         {"max_tokens", f.tokens},
                         {"ignore_eos", true},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  struct Result {
    SseCounter sse;
    int status = 0;
    Clock::time_point end;
  };
  std::vector<Result> results(static_cast<size_t>(streams));
  std::atomic<int> connected{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      Result& r = results[static_cast<size_t>(i)];
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_tcp_nodelay(true);  // headers and body are separate writes (no Nagle wait)
      c.set_read_timeout(120, 0);
      const bool up = static_cast<bool>(c.Get("/health"));
      connected.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      if (!up) return;
      nlohmann::json mine = body;
      mine["seed"] = i;
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = mine.dump();
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&r](const char* data, size_t n, uint64_t, uint64_t) {
        r.sse.Feed(data, n);
        return true;
      };
      httplib::Result res = c.send(req);
      r.status = res ? res->status : -1;
      r.end = Clock::now();
    });
  }
  while (connected.load() < streams) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double cpu0 = CpuSeconds();
  const Clock::time_point start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& t : threads) t.join();
  out->cpu_s = CpuSeconds() - cpu0;
  Clock::time_point end = start;
  for (const Result& r : results) {
    end = std::max(end, r.end);
    ++out->requests;
    out->tokens += r.sse.tokens;
    ++out->messages;
    const bool ok = r.status == 200 && r.sse.done && r.sse.length && r.sse.tokens == f.tokens &&
                    r.sse.usage_tokens == r.sse.tokens;
    if (!ok) ++out->failed;
  }
  out->wall_s = Seconds(end - start);
  out->sim_s = (*server)->runner().Snapshot().sim_time_s;
  (*server)->Shutdown();
  return true;
}

bool ParseFlags(int argc, char** argv, BenchFlags* f) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = eq != std::string::npos;
    if (name == "--streams") {
      ok = ok && absl::SimpleAtoi(value, &f->streams) && f->streams > 0;
    } else if (name == "--prompt") {
      ok = ok && absl::SimpleAtoi(value, &f->prompt) && f->prompt > 0;
    } else if (name == "--tokens") {
      ok = ok && absl::SimpleAtoi(value, &f->tokens) && f->tokens > 0;
    } else if (name == "--reps") {
      ok = ok && absl::SimpleAtoi(value, &f->reps) && f->reps >= 0;
    } else if (name == "--channels") {
      ok = ok && absl::SimpleAtoi(value, &f->channels) && f->channels > 0;
    } else if (name == "--client") {
      ok = ok && (value == "callback" || value == "cq");
      f->cq_client = value == "cq";
    } else if (name == "--cq_threads") {
      ok =
          ok && absl::SimpleAtoi(value, &f->cq_threads) && f->cq_threads > 0 && f->cq_threads <= 64;
    } else if (name == "--speed") {
      ok = ok && absl::SimpleAtod(value, &f->speed) && f->speed > 0;
    } else if (name == "--realtime_streams") {
      f->realtime_streams.clear();
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        int n = 0;
        ok = ok && absl::SimpleAtoi(part, &n) && n >= 0;
        if (n > 0) f->realtime_streams.push_back(n);
      }
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: server_bench [--streams=256] [--prompt=128] [--tokens=128] "
                   "[--reps=3] [--speed=1] [--realtime_streams=256,1000] [--channels=1] "
                   "[--client=callback|cq] [--cq_threads=2] (bad: %s)\n",
                   arg.c_str());
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  BenchFlags f;
  if (!ParseFlags(argc, argv, &f)) return 2;
  std::vector<std::string> args(argv, argv + argc);
  std::printf("command: %s\n", absl::StrJoin(args, " ").c_str());
  const ServerOptions fast = BenchOptions(Pacing::kFast, 1);
  const engine::EngineOptions& e = fast.runner.engine;
  std::printf(
      "server:  in-process, %s, mode %s, max_batch %d, prefill %s; clients: "
      "gRPC on %d channel(s) (%s Generate streams), HTTP one connection per stream; prompt %lld "
      "tokens, max %lld new tokens, ignore_eos\n",
      e.model.c_str(), engine::ToString(e.mode), e.max_batch, engine::ToString(e.prefill),
      f.channels,
      f.cq_client ? absl::StrCat("completion-queue API, ", f.cq_threads, " thread(s)").c_str()
                  : "callback-API",
      static_cast<long long>(f.prompt), static_cast<long long>(f.tokens));
  std::fflush(stdout);

  // 1. Fast pacing, gRPC and HTTP alternating (the order swaps every repetition).
  int failed = 0;
  if (f.reps > 0) {
    std::printf("\n[1] fast pacing, %d concurrent streams, %d repetitions of gRPC and HTTP each\n",
                f.streams, f.reps);
    std::printf("%-6s %-5s %9s %9s %9s %12s %11s %10s %10s %7s\n", "rep", "api", "wall_s", "tokens",
                "messages", "tokens/s", "requests/s", "sim_s", "cpu_us/tok", "failed");
    struct Series {
      std::vector<double> tps, rps, walls, cpu_us;
    };
    Series grpc_series, http_series;
    for (int rep = 1; rep <= f.reps; ++rep) {
      for (int k = 0; k < 2; ++k) {
        const bool http = (k == 0) == (rep % 2 == 0);
        RunResult r;
        if (!(http ? RunHttp(fast, f.streams, f, &r)
                   : Run(fast, f.streams, f, /*record=*/false, &r))) {
          return 1;
        }
        Series& series = http ? http_series : grpc_series;
        failed += static_cast<int>(r.failed);
        series.tps.push_back(static_cast<double>(r.tokens) / r.wall_s);
        series.rps.push_back(static_cast<double>(r.requests) / r.wall_s);
        series.walls.push_back(r.wall_s);
        series.cpu_us.push_back(r.cpu_s * 1e6 /
                                static_cast<double>(std::max<int64_t>(1, r.tokens)));
        std::printf("%-6d %-5s %9.3f %9lld %9lld %12.0f %11.1f %10.3f %10.2f %7lld\n", rep,
                    http ? "http" : "grpc", r.wall_s, static_cast<long long>(r.tokens),
                    static_cast<long long>(r.messages), series.tps.back(), series.rps.back(),
                    r.sim_s, series.cpu_us.back(), static_cast<long long>(r.failed));
        std::fflush(stdout);
      }
    }
    for (const auto& [name, series] : {std::pair{"grpc", &grpc_series}, {"http", &http_series}}) {
      std::printf("%-6s %-5s %9.3f %9s %9s %12.0f %11.1f %10s %10.2f\n", "median", name,
                  Median(series->walls), "", "", Median(series->tps), Median(series->rps), "",
                  Median(series->cpu_us));
    }
    std::printf(
        "HTTP/gRPC cost per token: %.2fx by wall time (median tokens/s), %.2fx by CPU time "
        "(median cpu_us/tok)\n",
        Median(grpc_series.tps) / Median(http_series.tps),
        Median(http_series.cpu_us) / Median(grpc_series.cpu_us));
    std::printf(
        "messages: gRPC stream messages (tokens coalesce while a write is in flight); HTTP: one "
        "response per stream\n(SSE: one event per token). cpu_us/tok: the process's CPU time "
        "(server and clients) per streamed token.\n");
  }

  // 2. Realtime pacing: token delivery lag, one run per stream count.
  for (const int streams : f.realtime_streams) {
    std::printf("\n[2] realtime pacing, speed %g, %d concurrent streams\n", f.speed, streams);
    RunResult r;
    if (!Run(BenchOptions(Pacing::kRealtime, f.speed), streams, f, /*record=*/true, &r)) {
      return 1;
    }
    failed += static_cast<int>(r.failed);
    const Summary lags = Summarize(r.lags_ms);
    std::printf("%9s %11s %9s %9s %11s %11s %11s %11s %11s\n", "wall_s", "sim_e2e_s", "tokens",
                "messages", "lag_p50_ms", "lag_p99_ms", "lag_min_ms", "lag_max_ms", "cpu_us/tok");
    std::printf("%9.3f %11.3f %9lld %9lld %11.2f %11.2f %11.2f %11.2f %11.2f\n", r.wall_s,
                r.max_e2e_s, static_cast<long long>(r.tokens), static_cast<long long>(r.messages),
                lags.median, lags.p99, lags.min, lags.max,
                r.cpu_s * 1e6 / static_cast<double>(std::max<int64_t>(1, r.tokens)));
    std::printf(
        "lag = client receipt - (engine clock origin + sim_time_s / speed), one sample per token.\n"
        "It includes the engine thread's wake-up, the server's write path, loopback transport and\n"
        "the client's own callback scheduling. Origin calibrated to +-%.3f ms.\n"
        "cpu_us/tok: the process's CPU (server and client) from the first call to the last\n"
        "stream's end, per token (server start-up and the clock calibration excluded).\n",
        r.origin_error_ms);
    const Summary first = Summarize(r.lags_by_position_ms[0]);
    const Summary middle = Summarize(r.lags_by_position_ms[1]);
    const Summary last = Summarize(r.lags_by_position_ms[2]);
    std::printf(
        "lag by position in the stream (complete streams), p50 / p99 (samples): first token "
        "%.2f / %.2f ms (%zu), tokens between %.2f / %.2f ms (%zu), last token %.2f / %.2f ms "
        "(%zu)\n",
        first.median, first.p99, first.count, middle.median, middle.p99, middle.count, last.median,
        last.p99, last.count);
    const Summary send = Summarize(r.send_lags_ms);
    std::printf("\nsend lag (server side): %zu messages, p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
                send.count, send.median, send.p99, send.max);
    std::printf(
        "send lag = the moment the server hands a token message to gRPC (StartWrite) - the\n"
        "token's scheduled wall time (server clock; neupims:token_send_lag_seconds).\n");
  }
  if (failed > 0) {
    std::printf("\nFAILED: %d streams did not end with exactly %lld tokens and LENGTH\n", failed,
                static_cast<long long>(f.tokens));
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace neupims::server

int main(int argc, char** argv) { return neupims::server::Main(argc, argv); }
