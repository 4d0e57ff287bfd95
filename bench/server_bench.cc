// server_bench: end-to-end speed of the gRPC server (a plain program, not Google Benchmark: it
// measures a whole server and its clients, not a function).
//
// 1. Fast pacing: an in-process server, `--streams` concurrent Generate streams of a fixed size
//    (prompt_length, max_new_tokens, ignore_eos) from callback-API clients on one channel.
//    Streamed tokens/s and requests/s over the wall time from the first call to the last stream's
//    end; `--reps` repetitions (a fresh server each), all printed, and their median.
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
//                     [--speed=1] [--realtime_streams=256]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/stats.h"
#include "grpcpp/grpcpp.h"
#include "neupims/v1/llm_service.grpc.pb.h"
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
  int realtime_streams = 256;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One Generate stream on the callback API. Records every token's sim time and the wall time
// its message arrived. Read the fields only after Wait() returned.
class Stream : public grpc::ClientReadReactor<GenerateResponse> {
 public:
  Stream(neupims::v1::LlmService::Stub* stub, GenerateRequest request, bool record)
      : request_(std::move(request)), record_(record) {
    stub->async()->Generate(&ctx_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const Clock::time_point now = Clock::now();
    if (response_.has_tokens()) {
      ++messages_;
      tokens_ += response_.tokens().tokens_size();
      if (record_) {
        for (const neupims::v1::Token& t : response_.tokens().tokens()) {
          receipts_.push_back({now, t.sim_time_s()});
        }
      }
    } else if (response_.has_complete()) {
      finish_reason_ = response_.complete().finish_reason();
      e2e_s_ = response_.complete().e2e_latency_s();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& s) override {
    absl::MutexLock l(&mu_);
    status_ = s;
    end_ = Clock::now();
    done_ = true;
  }

  void Wait() {
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  struct Receipt {
    Clock::time_point wall;
    double sim_time_s;
  };
  // Valid after Wait(): OnDone happens after the last OnReadDone and Wait synchronizes on mu_.
  grpc::Status status_;
  Clock::time_point end_;
  int64_t tokens_ = 0, messages_ = 0;
  int finish_reason_ = 0;
  double e2e_s_ = 0;
  std::vector<Receipt> receipts_;

 private:
  grpc::ClientContext ctx_;
  GenerateRequest request_;
  GenerateResponse response_;
  bool record_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

struct RunResult {
  double wall_s = 0;
  int64_t tokens = 0, messages = 0, requests = 0, failed = 0;
  double max_e2e_s = 0;
  double sim_s = 0;
  std::vector<double> lags_ms;       // client receipt - scheduled time, per token
  std::vector<double> send_lags_ms;  // server hand-off to gRPC - scheduled time, per message
  double origin_error_ms = 0;        // half the calibration window
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
  o.metrics_port = -1;  // no HTTP endpoint (the metrics themselves are still updated)
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
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", (*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = neupims::v1::LlmService::NewStub(channel);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    std::fprintf(stderr, "error: cannot connect to the server\n");
    return false;
  }

  std::vector<std::unique_ptr<Stream>> all;
  all.reserve(static_cast<size_t>(streams));
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < streams; ++i) {
    GenerateRequest req;
    req.set_prompt_length(f.prompt);
    req.set_max_new_tokens(f.tokens);
    req.set_ignore_eos(true);
    req.set_seed(static_cast<uint64_t>(i));
    all.push_back(std::make_unique<Stream>(stub.get(), req, record));
  }
  Clock::time_point end = start;
  for (auto& s : all) {
    s->Wait();
    end = std::max(end, s->end_);
    ++out->requests;
    out->tokens += s->tokens_;
    out->messages += s->messages_;
    out->max_e2e_s = std::max(out->max_e2e_s, s->e2e_s_);
    const bool ok = s->status_.ok() && s->tokens_ == f.tokens &&
                    s->finish_reason_ == neupims::v1::FINISH_REASON_LENGTH;
    if (!ok) ++out->failed;
    for (const Stream::Receipt& r : s->receipts_) {
      const double scheduled_s = r.sim_time_s / options.runner.speed;
      out->lags_ms.push_back((Seconds(r.wall - origin) - scheduled_s) * 1e3);
    }
  }
  out->wall_s = Seconds(end - start);
  out->sim_s = (*server)->runner().Snapshot().sim_time_s;
  for (double lag_s : (*server)->runner().TakeSendLags()) out->send_lags_ms.push_back(lag_s * 1e3);
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
      ok = ok && absl::SimpleAtoi(value, &f->reps) && f->reps > 0;
    } else if (name == "--speed") {
      ok = ok && absl::SimpleAtod(value, &f->speed) && f->speed > 0;
    } else if (name == "--realtime_streams") {
      ok = ok && absl::SimpleAtoi(value, &f->realtime_streams) && f->realtime_streams >= 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: server_bench [--streams=256] [--prompt=128] [--tokens=128] "
                   "[--reps=3] [--speed=1] [--realtime_streams=256] (bad: %s)\n",
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
      "server:  in-process, %s, mode %s, max_batch %d, prefill %s; client: one channel, "
      "callback-API Generate streams, prompt_length %lld, max_new_tokens %lld, ignore_eos\n",
      e.model.c_str(), engine::ToString(e.mode), e.max_batch, engine::ToString(e.prefill),
      static_cast<long long>(f.prompt), static_cast<long long>(f.tokens));
  std::fflush(stdout);

  // 1. Fast pacing.
  std::printf("\n[1] fast pacing, %d concurrent streams, %d repetitions\n", f.streams, f.reps);
  std::printf("%-6s %9s %9s %9s %12s %11s %10s %7s\n", "rep", "wall_s", "tokens", "messages",
              "tokens/s", "requests/s", "sim_s", "failed");
  std::vector<double> tps, rps, walls;
  int failed = 0;
  for (int rep = 1; rep <= f.reps; ++rep) {
    RunResult r;
    if (!Run(fast, f.streams, f, /*record=*/false, &r)) return 1;
    failed += static_cast<int>(r.failed);
    tps.push_back(static_cast<double>(r.tokens) / r.wall_s);
    rps.push_back(static_cast<double>(r.requests) / r.wall_s);
    walls.push_back(r.wall_s);
    std::printf("%-6d %9.3f %9lld %9lld %12.0f %11.1f %10.3f %7lld\n", rep, r.wall_s,
                static_cast<long long>(r.tokens), static_cast<long long>(r.messages), tps.back(),
                rps.back(), r.sim_s, static_cast<long long>(r.failed));
    std::fflush(stdout);
  }
  std::printf("%-6s %9.3f %9s %9s %12.0f %11.1f\n", "median", Median(walls), "", "", Median(tps),
              Median(rps));

  // 2. Realtime pacing: token delivery lag.
  if (f.realtime_streams > 0) {
    std::printf("\n[2] realtime pacing, speed %g, %d concurrent streams\n", f.speed,
                f.realtime_streams);
    RunResult r;
    if (!Run(BenchOptions(Pacing::kRealtime, f.speed), f.realtime_streams, f, /*record=*/true,
             &r)) {
      return 1;
    }
    failed += static_cast<int>(r.failed);
    const Summary lags = Summarize(r.lags_ms);
    std::printf("%9s %11s %9s %9s %11s %11s %11s %11s\n", "wall_s", "sim_e2e_s", "tokens",
                "messages", "lag_p50_ms", "lag_p99_ms", "lag_min_ms", "lag_max_ms");
    std::printf("%9.3f %11.3f %9lld %9lld %11.2f %11.2f %11.2f %11.2f\n", r.wall_s, r.max_e2e_s,
                static_cast<long long>(r.tokens), static_cast<long long>(r.messages), lags.median,
                lags.p99, lags.min, lags.max);
    std::printf(
        "lag = client receipt - (engine clock origin + sim_time_s / speed), one sample per token.\n"
        "It includes the engine thread's wake-up, the server's write path, loopback transport and\n"
        "the client's own callback scheduling. Origin calibrated to +-%.3f ms.\n",
        r.origin_error_ms);
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
