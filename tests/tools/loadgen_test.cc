#include "tools/loadgen/loadgen.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/device.h"
#include "nlohmann/json.hpp"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/metrics.h"
#include "server/server.h"
#include "tests/server/test_pki.h"
#include "tools/loadgen/cnn_load.h"
#include "tools/loadgen/metrics_scrape.h"
#include "tools/loadgen/openai_client.h"
#include "tools/loadgen/results.h"
#include "tools/workload/workload_flags.h"

namespace neupims::loadgen {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// --- Summarize / RunJson / RequestsCsv on hand-made results -----------------------------------

RequestResult Ok(int64_t index, double ttft_s, double tpot_s, int64_t tokens) {
  RequestResult r;
  r.index = index;
  r.request_id = "r" + std::to_string(index);
  r.ok = true;
  r.finish_reason = "length";
  r.prompt_tokens = 100;
  r.output_tokens = tokens;
  r.sent_s = 0.1 * static_cast<double>(index);
  r.ttft_s = ttft_s;
  r.tpot_s = tpot_s;
  r.e2el_s = ttft_s + tpot_s * static_cast<double>(tokens - 1);
  for (int64_t i = 1; i < tokens; ++i) r.itl_s.push_back(tpot_s);
  r.sim_ttft_s = ttft_s / 2;
  r.sim_tpot_s = tpot_s / 2;
  r.sim_e2el_s = r.e2el_s / 2;
  r.sim_queue_s = 0.001 * static_cast<double>(index);
  return r;
}

RequestResult Failed(int64_t index, std::string code, std::string message) {
  RequestResult r;
  r.index = index;
  r.request_id = "r" + std::to_string(index);
  r.ok = false;
  r.error_code = std::move(code);
  r.error_message = std::move(message);
  r.prompt_tokens = 100;
  return r;
}

// 4 completed requests (TTFT 50, 150, 80, 200 ms; TPOT 10, 10, 30, 10 ms; 10 tokens each) and
// 3 failures, over 2 s.
RunResult HandMadeRun() {
  RunResult run;
  run.label = "rate 3.5/s";
  run.request_rate = 3.5;
  run.duration_s = 2.0;
  run.requests = {Ok(0, 0.050, 0.010, 10),
                  Ok(1, 0.150, 0.010, 10),
                  Failed(2, "RESOURCE_EXHAUSTED", "waiting queue is full"),
                  Ok(3, 0.080, 0.030, 10),
                  Failed(4, "UNAVAILABLE", "draining, \"later\""),
                  Ok(5, 0.200, 0.010, 10),
                  Failed(6, "RESOURCE_EXHAUSTED", "waiting queue is full")};
  return run;
}

TEST(LoadgenSummarizeTest, ThroughputsAndFailuresByCode) {
  RunResult run = HandMadeRun();
  Summarize(run, SloTargets{});
  const RunSummary& s = run.summary;
  EXPECT_EQ(s.completed, 4);
  EXPECT_EQ(s.failed, 3);
  EXPECT_THAT(s.failures_by_code,
              ElementsAre(Pair("RESOURCE_EXHAUSTED", 2), Pair("UNAVAILABLE", 1)));
  EXPECT_DOUBLE_EQ(s.duration_s, 2.0);
  EXPECT_EQ(s.total_input_tokens, 400);  // completed requests only (vLLM)
  EXPECT_EQ(s.total_output_tokens, 40);
  EXPECT_DOUBLE_EQ(s.request_throughput, 2.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 20.0);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 220.0);
  // No SLO set: every completed request meets "every set target".
  EXPECT_EQ(s.good, 4);
}

TEST(LoadgenSummarizeTest, PercentilesInterpolateLikeNumpy) {
  RunResult run = HandMadeRun();
  Summarize(run, SloTargets{});
  const RunSummary& s = run.summary;
  // TTFT sorted: 50, 80, 150, 200 ms.
  EXPECT_NEAR(s.ttft_ms.mean, 120.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms.median, 115.0, 1e-9);
  EXPECT_NEAR(s.ttft_ms.p90, 185.0, 1e-9);  // 150 + 0.7 * 50
  EXPECT_NEAR(s.ttft_ms.p99, 198.5, 1e-9);  // 150 + 0.97 * 50
  EXPECT_NEAR(s.tpot_ms.mean, 15.0, 1e-9);  // 10, 10, 30, 10
  EXPECT_NEAR(s.tpot_ms.median, 10.0, 1e-9);
  EXPECT_NEAR(s.itl_ms.mean, 15.0, 1e-9);                    // 9 gaps each, same values
  EXPECT_NEAR(s.e2el_ms.median, (240.0 + 290.0) / 2, 1e-9);  // 140, 240, 350, 290
  // Simulated view: half of each.
  EXPECT_NEAR(s.sim_ttft_ms.mean, 60.0, 1e-9);
  EXPECT_NEAR(s.sim_tpot_ms.median, 5.0, 1e-9);
  EXPECT_NEAR(s.sim_queue_ms.mean, (0 + 1 + 3 + 5) / 4.0, 1e-9);
}

TEST(LoadgenSummarizeTest, GoodputCountsRequestsMeetingEverySlo) {
  RunResult run = HandMadeRun();
  Summarize(run, SloTargets{.ttft_ms = 100});
  EXPECT_EQ(run.summary.good, 2);  // TTFT 50 and 80 ms
  EXPECT_DOUBLE_EQ(run.summary.goodput, 1.0);
  Summarize(run, SloTargets{.ttft_ms = 100, .tpot_ms = 20});
  EXPECT_EQ(run.summary.good, 1);  // the 80 ms one has a 30 ms TPOT
  EXPECT_DOUBLE_EQ(run.summary.goodput, 0.5);
  Summarize(run, SloTargets{.e2el_ms = 300});
  EXPECT_EQ(run.summary.good, 3);  // 140, 240, 290 ms; not 350
}

TEST(LoadgenSummarizeTest, DurationFromRequestsWhenUnset) {
  RunResult run = HandMadeRun();
  run.duration_s = 0;
  Summarize(run, SloTargets{});
  // First send at 0, last completion: request 5 sent at 0.5 s + 290 ms.
  EXPECT_NEAR(run.summary.duration_s, 0.79, 1e-9);
}

TEST(LoadgenSummarizeTest, EmptyRunIsAllZero) {
  RunResult run;
  Summarize(run, SloTargets{.ttft_ms = 1});
  EXPECT_EQ(run.summary.completed, 0);
  EXPECT_EQ(run.summary.failed, 0);
  EXPECT_EQ(run.summary.request_throughput, 0);
  EXPECT_EQ(run.summary.ttft_ms.p99, 0);
}

TEST(LoadgenResultsTest, RunJsonHasDocumentedKeys) {
  RunResult run = HandMadeRun();
  run.samples = {{0.25, 3, 1, 0.5, 0.3}};
  Summarize(run, SloTargets{.ttft_ms = 100});
  const nlohmann::json j = RunJson(run);
  for (const char* key : {"completed",
                          "failed",
                          "failures_by_code",
                          "duration",
                          "total_input_tokens",
                          "total_output_tokens",
                          "request_throughput",
                          "output_throughput",
                          "total_token_throughput",
                          "goodput",
                          "request_goodput",
                          "label",
                          "request_rate",
                          "max_concurrency",
                          "num_prompts",
                          "input_lens",
                          "output_lens",
                          "ttfts",
                          "itls",
                          "errors",
                          "server_samples"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* stat : {"mean", "median", "p90", "p99"}) {
    for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
      const std::string key = std::string(stat) + "_" + metric + "_ms";
      EXPECT_TRUE(j.contains(key)) << key;
    }
    for (const char* metric : {"ttft", "tpot", "e2el", "queue"}) {
      const std::string key = std::string("sim_") + stat + "_" + metric + "_ms";
      EXPECT_TRUE(j.contains(key)) << key;
    }
  }
  EXPECT_EQ(j["completed"], 4);
  EXPECT_EQ(j["failed"], 3);
  EXPECT_EQ(j["failures_by_code"]["RESOURCE_EXHAUSTED"], 2);
  EXPECT_EQ(j["goodput"], 1.0);
  EXPECT_NEAR(j["median_ttft_ms"].get<double>(), 115.0, 1e-9);
  EXPECT_EQ(j["input_lens"].size(), 7u);
  EXPECT_EQ(j["errors"][2], "RESOURCE_EXHAUSTED: waiting queue is full");
  EXPECT_EQ(j["server_samples"][0]["running"], 3);
  run.request_rate = 0;
  EXPECT_EQ(RunJson(run)["request_rate"], "inf");
}

TEST(LoadgenResultsTest, RequestsCsvHasHeaderAndOneLinePerRequest) {
  RunResult run = HandMadeRun();
  Summarize(run, SloTargets{});
  const std::string csv = RequestsCsv(run);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), run.requests.size() + 1);
  EXPECT_EQ(lines[0],
            "index,request_id,scheduled_s,sent_s,ok,error_code,finish_reason,prompt_tokens,"
            "output_tokens,ttft_ms,tpot_ms,e2el_ms,mean_itl_ms,max_itl_ms,sim_queue_ms,sim_ttft_ms,"
            "sim_tpot_ms,sim_e2el_ms,pim_channel,preemptions,error_message");
  EXPECT_THAT(lines[1], HasSubstr("0,r0,"));
  EXPECT_THAT(lines[1], HasSubstr(",50.000,10.000,"));
  // An error message with a comma and quotes is quoted (RFC 4180).
  EXPECT_THAT(lines[5], HasSubstr(",UNAVAILABLE,"));
  EXPECT_THAT(lines[5], HasSubstr("\"draining, \"\"later\"\"\""));
}

TEST(LoadgenResultsTest, SuffixedPathTagsTheRate) {
  RunResult run;
  run.request_rate = 4;
  EXPECT_EQ(SuffixedPath("out/r.csv", run), "out/r.rate4.csv");
  EXPECT_EQ(SuffixedPath("a.b/r", run), "a.b/r.rate4");
  run.request_rate = 0.5;
  EXPECT_EQ(SuffixedPath("r.csv", run), "r.rate0.5.csv");
  run.request_rate = 0;
  EXPECT_EQ(SuffixedPath("r.csv", run), "r.rateinf.csv");
}

TEST(LoadgenResultsTest, SweepPathsNumberRunsWhoseTagsRepeat) {
  // A closed-loop sweep (--max-concurrency 4 --sweep-rates inf,inf): both runs tag conc4.
  RunResult closed;
  closed.max_concurrency = 4;
  EXPECT_EQ(SweepPaths("out/r.csv", {closed, closed}),
            (std::vector<std::string>{"out/r.conc4.run1.csv", "out/r.conc4.run2.csv"}));
  RunResult a, b;
  a.request_rate = 2;
  b.request_rate = 0;
  EXPECT_EQ(SweepPaths("r.csv", {a, b}),
            (std::vector<std::string>{"r.rate2.csv", "r.rateinf.csv"}));
}

TEST(LoadgenOptionsTest, MetricsMustBeHostAndPort) {
  LoadOptions o;
  for (const char* bad : {"localhost", "127.0.0.1:"}) {
    o.metrics = bad;
    const absl::Status s = ValidateOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--metrics")) << bad;
  }
  o.metrics = "127.0.0.1:9400";
  EXPECT_TRUE(ValidateOptions(o).ok());
}

// A port outside [1, 65535] or an unclosed IPv6 bracket was taken and then "cannot reach" the
// server (exit 1, a setup error) instead of being refused as a bad flag.
TEST(LoadgenOptionsTest, UrlAndMetricsPortsAreCheckedNamingTheFlag) {
  for (const char* bad :
       {"http://127.0.0.1:99999", "http://127.0.0.1:0", "http://h:x", "http://[::1", "http://h:"}) {
    const absl::StatusOr<BaseUrl> u = ParseBaseUrl(bad);
    EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(u.status().message()), HasSubstr(absl::StrCat("--base-url '", bad)))
        << bad;
  }
  for (const char* good : {"http://127.0.0.1:8000", "http://[::1]:8000/p/v1", "http://host"}) {
    EXPECT_TRUE(ParseBaseUrl(good).ok()) << good;
  }
  LoadOptions o;
  o.metrics = "127.0.0.1:99999";
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("--metrics '127.0.0.1:99999'"));
}

// As the flags: a deadline past 1e6 s would overflow its int64 nanoseconds.
TEST(LoadgenOptionsTest, TimeoutsAreBoundedForLibraryCallersToo) {
  LoadOptions o;
  o.timeout_s = 1e308;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("--timeout-s: value 1e+308 must be in"));
  o.timeout_s = 0;
  o.connect_timeout_s = 0;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("--connect-timeout-s: value 0 must be in"));
  o.connect_timeout_s = 1e6;
  EXPECT_TRUE(ValidateOptions(o).ok());
}

TEST(LoadgenOptionsTest, BadFlagsAreInvalidArgumentNamingTheFlag) {
  LoadOptions o;
  o.sweep_rates = "1,x";
  absl::Status s = ValidateOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--sweep-rates"));
  o.sweep_rates = "1,,2";
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.sweep_rates = "";
  o.workload.request_rate = "-3";
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("--request-rate"));
  o.workload.request_rate = "10";
  o.workload.max_concurrency = 4;  // a closed loop needs --request-rate inf
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.workload.request_rate = "inf";
  EXPECT_TRUE(ValidateOptions(o).ok());
  EXPECT_THAT(*ParseSweepRates("1, 2.5,inf"), ElementsAre("1", "2.5", "inf"));
}

// --- Against a real server ------------------------------------------------------------------

std::unique_ptr<server::Server> StartServer(server::Pacing pacing, int max_batch,
                                            int64_t max_waiting) {
  server::ServerOptions o;
  o.port = 0;
  o.metrics_port = -1;
  o.http_port = 0;
  o.http_threads = 64;
  o.runner.pacing = pacing;
  o.runner.engine.model = "gpt3-7b";
  o.runner.engine.max_batch = max_batch;
  o.runner.engine.max_waiting = max_waiting;
  o.drain_timeout = std::chrono::milliseconds(100);
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

LoadOptions Synthetic(const std::string& address, int64_t n, const std::string& rate) {
  LoadOptions o;
  o.server = address;
  o.workload.synthetic = "16-64:4-24";
  o.workload.num_requests = n;
  o.workload.seed = 7;
  o.workload.request_rate = rate;
  o.quiet = true;
  o.timeout_s = 60;
  o.sample_interval_s = 0.05;
  return o;
}

class LoadgenServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(server::Pacing::kFast, 256, 4096);
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }
  std::unique_ptr<server::Server> server_;
};

TEST(LoadgenHardwareTest, ReadsTheServersMetricsWithEverySample) {
  server::ServerOptions so;
  so.port = 0;
  so.metrics_port = 0;
  so.http_port = std::nullopt;  // not used; the default 8000 may be taken
  so.runner.pacing = server::Pacing::kRealtime;
  so.runner.speed = 4;
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(so);
  ASSERT_TRUE(s.ok()) << s.status();
  LoadOptions o = Synthetic((*s)->address(), 24, "40");
  o.metrics = absl::StrCat("127.0.0.1:", (*s)->metrics_port());
  o.sample_interval_s = 0.05;
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  ASSERT_TRUE(runs.ok()) << runs.status();
  const RunResult& run = (*runs)[0];
  ASSERT_GE(run.samples.size(), 3u);
  int with_hardware = 0;
  double max_power = 0, last_tokens = 0;
  for (const ServerSample& x : run.samples) {
    EXPECT_EQ(x.channel_kv_usage.size(), 32u);
    if (!x.has_hardware) continue;
    ++with_hardware;
    max_power = std::max(max_power, x.power_w);
    EXPECT_GE(x.generation_tokens, last_tokens);  // a counter
    last_tokens = x.generation_tokens;
  }
  EXPECT_EQ(with_hardware, static_cast<int>(run.samples.size()));
  EXPECT_GT(max_power, 0);
  EXPECT_GT(last_tokens, 0);
  (*s)->Shutdown();
}

// A server on free gRPC and HTTP ports (no separate metrics port), paced in realtime at 4x so
// that a run lasts long enough for the monitor's samples (every 50 ms).
server::ServerOptions RealtimeGrpcAndHttpServer() {
  server::ServerOptions so;
  so.port = 0;
  so.metrics_port = -1;
  so.http_port = 0;
  so.runner.pacing = server::Pacing::kRealtime;
  so.runner.speed = 4;
  return so;
}

// The same load for both backends against `s`: `grpc` as given, and a copy on the OpenAI backend
// at `scheme_host` (e.g. "https://localhost") and the server's HTTP port.
std::vector<LoadOptions> BothBackends(const LoadOptions& grpc, server::Server& s,
                                      absl::string_view scheme_host) {
  LoadOptions http = grpc;
  http.backend = Backend::kOpenAi;
  http.base_url = absl::StrCat(scheme_host, ":", *s.http_port());
  return {grpc, http};
}

// Runs `o` and expects every one of its `n` requests to complete.
void ExpectEveryRequestCompletes(const LoadOptions& o, int64_t n) {
  SCOPED_TRACE(BackendNames().ToString(o.backend));
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ((*runs)[0].summary.completed, n);
}

// Over the OpenAI backend the samples come from the HTTP port's /metrics, which is the same
// registry: every sample carries the per-channel KV usage and the hardware view, as over gRPC
// with --metrics (the report's heat map and hardware charts were empty over HTTP).
TEST(LoadgenHardwareTest, OpenAiBackendSamplesCarryChannelsAndTheHardwareView) {
  server::ServerOptions so = RealtimeGrpcAndHttpServer();
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(so);
  ASSERT_TRUE(s.ok()) << s.status();
  LoadOptions o = Synthetic("", 24, "40");
  o.workload.synthetic = "64:200";  // ~0.2 s each at speed 4: always some KV in use
  o.backend = Backend::kOpenAi;
  o.base_url = absl::StrCat("http://127.0.0.1:", *(*s)->http_port());
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  (*s)->Shutdown();
  ASSERT_TRUE(runs.ok()) << runs.status();
  const RunResult& run = (*runs)[0];
  ASSERT_GE(run.samples.size(), 3u);
  double max_kv = 0, max_power = 0;
  for (const ServerSample& x : run.samples) {
    ASSERT_EQ(x.channel_kv_usage.size(), 32u);
    for (double u : x.channel_kv_usage) max_kv = std::max(max_kv, u);
    EXPECT_TRUE(x.has_hardware);
    max_power = std::max(max_power, x.power_w);
  }
  EXPECT_GT(max_kv, 0);
  EXPECT_GT(max_power, 0);
  EXPECT_GT(run.samples.back().generation_tokens, 0);
}

TEST(LoadgenHardwareTest, ParsesAServersScrapeAndRefusesOtherText) {
  auto registry = std::make_shared<prometheus::Registry>();
  absl::StatusOr<hw::DeviceConfig> device = hw::LoadDeviceConfig("neupims");
  ASSERT_TRUE(device.ok());
  server::ServerMetrics metrics(registry, "gpt3-7b", *device, 4);
  metrics.OnGenerationTokens(12);
  engine::IterationRecord it;
  it.start = 0;
  it.end = 1'000'000;
  it.decode = 1;
  engine::EngineStats stats;
  stats.first_event = 0;
  stats.iterations = 1;
  stats.busy_ns = 1e6;
  stats.systolic_busy_ns = 0.5e6;
  stats.npu_static_j = 1.5;
  stats.prefill_j = 0.5;
  metrics.OnIteration(it, stats);
  const std::string text = prometheus::TextSerializer().Serialize(registry->Collect());
  absl::StatusOr<HardwareReading> r = ParseHardwareReading(text);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->npu_systolic, 0.5);
  EXPECT_DOUBLE_EQ(r->energy_j, 2.0);  // summed over components
  EXPECT_DOUBLE_EQ(r->generation_tokens, 12);
  EXPECT_NEAR(r->power_w, 2.0 / 0.001, 1e-6);
  EXPECT_FALSE(ParseHardwareReading("up 1\n").ok());
  EXPECT_FALSE(FetchMetrics("127.0.0.1:1", 0.5).ok());
}

TEST_F(LoadgenServerTest, EveryRequestIsAccountedFor) {
  const LoadOptions o = Synthetic(server_->address(), 30, "300");
  LoadInfo info;
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o, &info);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 1u);
  const RunResult& run = (*runs)[0];
  EXPECT_EQ(info.server.model, "gpt3-7b");
  EXPECT_EQ(info.server.max_seq_len, 2048);
  EXPECT_EQ(info.server.pacing, "fast");
  ASSERT_EQ(info.client.size(), 1u);

  // The requested lengths, from the same workload flags.
  absl::StatusOr<workload::Workload> w = workload::BuildWorkload(o.workload, 2048);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(run.requests.size(), 30u);
  EXPECT_EQ(run.summary.completed + run.summary.failed, 30);
  EXPECT_EQ(run.summary.completed, 30);
  int64_t requested_output = 0;
  for (size_t i = 0; i < run.requests.size(); ++i) {
    const RequestResult& r = run.requests[i];
    SCOPED_TRACE(r.request_id);
    EXPECT_TRUE(r.ok) << r.error_code << " " << r.error_message;
    EXPECT_EQ(r.index, static_cast<int64_t>(i));
    EXPECT_EQ(r.prompt_tokens, w->requests[i].prompt_tokens);
    EXPECT_EQ(r.output_tokens, w->requests[i].output_tokens);  // ignore_eos
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(r.token_recv_s.size(), static_cast<size_t>(r.output_tokens));
    EXPECT_EQ(r.itl_s.size(), static_cast<size_t>(r.output_tokens - 1));
    EXPECT_GT(r.ttft_s, 0);
    EXPECT_LE(r.ttft_s, r.e2el_s);
    EXPECT_GE(r.sent_s, r.scheduled_s);
    EXPECT_TRUE(std::is_sorted(r.token_recv_s.begin(), r.token_recv_s.end()));
    EXPECT_GT(r.sim_ttft_s, 0);
    EXPECT_GE(r.sim_e2el_s, r.sim_ttft_s);
    EXPECT_GE(r.pim_channel, 0);
    requested_output += w->requests[i].output_tokens;
  }
  EXPECT_EQ(run.summary.total_output_tokens, requested_output);
  EXPECT_GT(run.summary.request_throughput, 0);
  EXPECT_GT(run.summary.sim_ttft_ms.median, 0);
  EXPECT_GT(run.duration_s, 0);
}

TEST_F(LoadgenServerTest, FixedSeedGivesTheSameRequestSequence) {
  const LoadOptions o = Synthetic(server_->address(), 30, "400");
  absl::StatusOr<std::vector<RunResult>> a = RunLoad(o);
  absl::StatusOr<std::vector<RunResult>> b = RunLoad(o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const RunResult& x = (*a)[0];
  const RunResult& y = (*b)[0];
  ASSERT_EQ(x.requests.size(), y.requests.size());
  bool varied = false;
  for (size_t i = 0; i < x.requests.size(); ++i) {
    EXPECT_EQ(x.requests[i].prompt_tokens, y.requests[i].prompt_tokens) << i;
    EXPECT_EQ(x.requests[i].output_tokens, y.requests[i].output_tokens) << i;
    EXPECT_DOUBLE_EQ(x.requests[i].scheduled_s, y.requests[i].scheduled_s) << i;
    varied |= x.requests[i].prompt_tokens != x.requests[0].prompt_tokens;
  }
  EXPECT_TRUE(varied);
  EXPECT_GT(x.requests.back().scheduled_s, 0);  // Poisson arrivals, not all at once
}

TEST_F(LoadgenServerTest, SweepRunsOncePerRate) {
  LoadOptions o = Synthetic(server_->address(), 12, "inf");
  o.sweep_rates = "500,inf";
  o.slo.ttft_ms = 60000;
  LoadInfo info;
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o, &info);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].request_rate, 500);
  EXPECT_EQ((*runs)[1].request_rate, 0);
  EXPECT_EQ(info.client.size(), 2u);
  for (const RunResult& r : *runs) {
    EXPECT_EQ(r.summary.completed, 12) << r.label;
    EXPECT_EQ(r.summary.good, 12) << r.label;
  }
  // Same requests, different timing.
  EXPECT_EQ((*runs)[0].requests[5].output_tokens, (*runs)[1].requests[5].output_tokens);
  EXPECT_EQ((*runs)[1].requests[5].scheduled_s, 0);
  const nlohmann::json j = ResultJson(*runs, o, info);
  ASSERT_TRUE(j.contains("runs"));
  EXPECT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["settings"]["model"], "gpt3-7b");
}

TEST_F(LoadgenServerTest, ClosedLoopKeepsConcurrencyInFlight) {
  LoadOptions o = Synthetic(server_->address(), 20, "inf");
  o.workload.max_concurrency = 3;
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  ASSERT_TRUE(runs.ok()) << runs.status();
  const RunResult& run = (*runs)[0];
  EXPECT_EQ(run.max_concurrency, 3);
  EXPECT_EQ(run.summary.completed, 20);
  // At no send time were more than 3 requests in flight.
  for (const RequestResult& r : run.requests) {
    int in_flight = 0;
    for (const RequestResult& q : run.requests) {
      if (q.sent_s <= r.sent_s && q.sent_s + q.e2el_s > r.sent_s) ++in_flight;
    }
    EXPECT_LE(in_flight, 3) << r.index;
  }
}

TEST_F(LoadgenServerTest, BadInputsNameTheFileOrFlag) {
  LoadOptions o = Synthetic(server_->address(), 5, "inf");
  o.workload.synthetic.clear();
  o.workload.dataset = "/nonexistent/lengths.tsv";
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  ASSERT_FALSE(runs.ok());
  EXPECT_THAT(runs.status().message(), HasSubstr("/nonexistent/lengths.tsv"));

  const std::string trace = (std::filesystem::path(::testing::TempDir()) /
                             ("loadgen_bad_" + std::to_string(getpid()) + ".csv"))
                                .string();
  ASSERT_TRUE(WriteFile(trace, "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.1,ten,5\n").ok());
  o.workload.trace = trace;
  runs = RunLoad(o);
  ASSERT_FALSE(runs.ok());
  EXPECT_THAT(runs.status().message(), HasSubstr(trace + ":3"));

  // Every row filtered out (longer than the 2048-token context): zero requests.
  ASSERT_TRUE(WriteFile(trace, "arrival_s,prompt_tokens,output_tokens\n0,3000,5\n").ok());
  runs = RunLoad(o);
  ASSERT_FALSE(runs.ok());
  EXPECT_THAT(runs.status().message(), HasSubstr(trace));

  o.workload.trace.clear();
  o.workload.synthetic = "8:4";
  o.model = "llama2-70b";
  runs = RunLoad(o);
  ASSERT_FALSE(runs.ok());
  EXPECT_THAT(runs.status().message(), HasSubstr("--model"));
}

TEST(LoadgenFailureTest, RejectedRequestsAreCountedByCode) {
  // One request running, one waiting: everything else sent at once is RESOURCE_EXHAUSTED.
  std::unique_ptr<server::Server> server = StartServer(server::Pacing::kRealtime, 1, 1);
  ASSERT_NE(server, nullptr);
  LoadOptions o = Synthetic(server->address(), 20, "inf");
  o.workload.synthetic = "32:8";
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  server->Shutdown();
  ASSERT_TRUE(runs.ok()) << runs.status();
  const RunResult& run = (*runs)[0];
  ASSERT_EQ(run.requests.size(), 20u);
  EXPECT_EQ(run.summary.completed + run.summary.failed, 20);
  EXPECT_GE(run.summary.completed, 1);
  EXPECT_GT(run.summary.failed, 0);
  int64_t exhausted = 0;
  for (const auto& [code, count] : run.summary.failures_by_code) {
    if (code == "RESOURCE_EXHAUSTED") exhausted = count;
  }
  EXPECT_EQ(exhausted, run.summary.failed);
  for (const RequestResult& r : run.requests) {
    if (!r.ok) {
      EXPECT_EQ(r.error_code, "RESOURCE_EXHAUSTED");
      EXPECT_THAT(r.error_message, HasSubstr("waiting queue is full"));
    }
  }
}

TEST(LoadgenFailureTest, UnreachableServerFailsQuickly) {
  LoadOptions o = Synthetic("127.0.0.1:1", 5, "inf");
  o.connect_timeout_s = 1;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(runs.ok());
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(runs.status().message(), HasSubstr("cannot reach neupims server at 127.0.0.1:1"));
  EXPECT_LT(elapsed, 5.0);
}

// The OpenAI backend (openai_client.h): the same workload over the server's HTTP API gives the
// same requests, tokens and finish reasons as over gRPC, with both views filled.
TEST_F(LoadgenServerTest, OpenAiBackendMatchesTheGrpcBackend) {
  LoadOptions grpc_options = Synthetic(server_->address(), 20, "300");
  LoadOptions http_options = grpc_options;
  http_options.backend = Backend::kOpenAi;
  http_options.base_url = absl::StrCat("http://127.0.0.1:", *server_->http_port());
  LoadInfo info;
  absl::StatusOr<std::vector<RunResult>> http = RunLoad(http_options, &info);
  ASSERT_TRUE(http.ok()) << http.status();
  absl::StatusOr<std::vector<RunResult>> grpc = RunLoad(grpc_options);
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  EXPECT_EQ(info.server.model, "gpt3-7b");
  EXPECT_EQ(info.server.max_seq_len, 2048);
  EXPECT_EQ(info.server.pacing, "fast");
  const RunResult& h = (*http)[0];
  const RunResult& g = (*grpc)[0];
  ASSERT_EQ(h.requests.size(), 20u);
  EXPECT_EQ(h.summary.completed, 20);
  EXPECT_EQ(h.summary.total_output_tokens, g.summary.total_output_tokens);
  EXPECT_EQ(h.summary.total_input_tokens, g.summary.total_input_tokens);
  for (size_t i = 0; i < h.requests.size(); ++i) {
    const RequestResult& r = h.requests[i];
    SCOPED_TRACE(r.request_id);
    EXPECT_TRUE(r.ok) << r.error_code << " " << r.error_message;
    EXPECT_EQ(r.prompt_tokens, g.requests[i].prompt_tokens);
    EXPECT_EQ(r.output_tokens, g.requests[i].output_tokens);
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(r.itl_s.size(), static_cast<size_t>(r.output_tokens - 1));
    EXPECT_GT(r.ttft_s, 0);
    EXPECT_LE(r.ttft_s, r.e2el_s);
    EXPECT_GT(r.sim_ttft_s, 0);
    EXPECT_GE(r.sim_e2el_s, r.sim_ttft_s);
    EXPECT_GE(r.pim_channel, 0);
  }
  const nlohmann::json j = ResultJson(*http, http_options, info);
  EXPECT_EQ(j["backend"], "openai");
  EXPECT_EQ(j["settings"]["server"], http_options.base_url);
}

TEST(LoadgenFailureTest, OpenAiRefusalsAreCountedByHttpStatus) {
  std::unique_ptr<server::Server> server = StartServer(server::Pacing::kRealtime, 1, 1);
  ASSERT_NE(server, nullptr);
  LoadOptions o = Synthetic("", 20, "inf");
  o.backend = Backend::kOpenAi;
  o.base_url = absl::StrCat("http://127.0.0.1:", *server->http_port(), "/v1");
  o.workload.synthetic = "32:8";
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  server->Shutdown();
  ASSERT_TRUE(runs.ok()) << runs.status();
  const RunResult& run = (*runs)[0];
  EXPECT_EQ(run.summary.completed + run.summary.failed, 20);
  EXPECT_GE(run.summary.completed, 1);
  EXPECT_GT(run.summary.failed, 0);
  for (const RequestResult& r : run.requests) {
    if (!r.ok) {
      EXPECT_EQ(r.error_code, "HTTP_429");
      EXPECT_THAT(r.error_message, HasSubstr("waiting queue is full"));
    }
  }
}

// A server started with --auth-token-file refuses every call without the token; the load
// generator sends it (--auth-token-file, the same file) on both backends, including the model
// lookup and the server samples. Without it the run fails before sending, saying why.
TEST(LoadgenAuthTest, SendsTheBearerTokenOnBothBackends) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "loadgen_auth";
  std::filesystem::create_directories(dir);
  const std::string token_file = (dir / "token").string();
  ASSERT_TRUE(WriteFile(token_file, "  bench-s3cret  \nignored\n").ok());
  server::ServerOptions so = RealtimeGrpcAndHttpServer();
  so.security.auth_token_file = token_file;
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(so);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::string> token = ReadAuthToken(token_file);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "bench-s3cret");
  LoadOptions grpc_options = Synthetic((*s)->address(), 8, "40");
  grpc_options.connect_timeout_s = 1;
  for (LoadOptions& o : BothBackends(grpc_options, **s, "http://127.0.0.1")) {
    SCOPED_TRACE(BackendNames().ToString(o.backend));
    absl::StatusOr<std::vector<RunResult>> refused = RunLoad(o);
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.status().message(), HasSubstr("bearer token"));
    o.auth_token = *token;
    absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
    ASSERT_TRUE(runs.ok()) << runs.status();
    EXPECT_EQ((*runs)[0].summary.completed, 8);
    EXPECT_FALSE((*runs)[0].samples.empty());
  }
  (*s)->Shutdown();
  EXPECT_FALSE(ReadAuthToken((dir / "missing").string()).ok());
  ASSERT_TRUE(WriteFile(token_file, "\n").ok());
  EXPECT_FALSE(ReadAuthToken(token_file).ok());
}

// A server with TLS and the bearer token (--tls-ca, --auth-token-file): both backends (an https
// --base-url for the OpenAI one) and CNN mode complete every request; without --tls-ca the gRPC
// backend cannot connect and says that a TLS server needs it.
TEST(LoadgenTlsTest, BothBackendsAndCnnModeRunOverTlsWithTheBearerToken) {
  server::test_pki::TestPki pki;
  const absl::Status made = server::test_pki::MakeTestPki(
      (std::filesystem::path(::testing::TempDir()) / "loadgen_tls").string(), &pki);
  if (!made.ok()) GTEST_SKIP() << made.message();
  ASSERT_TRUE(WriteFile(pki.Path("token"), "tls-bench-token\n").ok());
  server::ServerOptions so = RealtimeGrpcAndHttpServer();
  so.security.tls_cert = pki.server_cert;
  so.security.tls_key = pki.server_key;
  so.security.auth_token_file = pki.Path("token");
  so.cnn.models = {"resnet50"};
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(so);
  ASSERT_TRUE(s.ok()) << s.status();
  LoadOptions grpc_options = Synthetic(absl::StrCat("localhost:", (*s)->port()), 8, "40");
  grpc_options.connect_timeout_s = 1;
  grpc_options.auth_token = "tls-bench-token";
  absl::StatusOr<std::vector<RunResult>> plaintext = RunLoad(grpc_options);
  ASSERT_FALSE(plaintext.ok());
  EXPECT_THAT(plaintext.status().message(), HasSubstr("needs --tls-ca"));
  grpc_options.tls.ca = pki.ca_cert;
  for (const LoadOptions& o : BothBackends(grpc_options, **s, "https://localhost")) {
    ExpectEveryRequestCompletes(o, 8);
  }
  CnnLoadOptions cnn;
  cnn.server = grpc_options.server;
  cnn.model = "resnet50";
  cnn.requests = 4;
  cnn.auth_token = grpc_options.auth_token;
  cnn.tls = grpc_options.tls;
  absl::StatusOr<CnnLoadResult> cnn_run = RunCnnLoad(cnn);
  ASSERT_TRUE(cnn_run.ok()) << cnn_run.status();
  EXPECT_EQ(cnn_run->ok, 4);
  (*s)->Shutdown();
}

// Mutual TLS (--tls-cert / --tls-key on the client): served with the client certificate on both
// backends; a client certificate without its key is refused before anything connects.
TEST(LoadgenTlsTest, MutualTlsNeedsTheClientCertificateAndItsKey) {
  server::test_pki::TestPki pki;
  const absl::Status made = server::test_pki::MakeTestPki(
      (std::filesystem::path(::testing::TempDir()) / "loadgen_mtls").string(), &pki);
  if (!made.ok()) GTEST_SKIP() << made.message();
  server::ServerOptions so = RealtimeGrpcAndHttpServer();
  so.security.tls_cert = pki.server_cert;
  so.security.tls_key = pki.server_key;
  so.security.tls_client_ca = pki.ca_cert;
  absl::StatusOr<std::unique_ptr<server::Server>> s = server::Server::Start(so);
  ASSERT_TRUE(s.ok()) << s.status();
  LoadOptions grpc_options = Synthetic(absl::StrCat("localhost:", (*s)->port()), 8, "40");
  grpc_options.connect_timeout_s = 1;
  grpc_options.tls = {pki.ca_cert, pki.client_cert, pki.client_key};
  for (LoadOptions& o : BothBackends(grpc_options, **s, "https://localhost")) {
    SCOPED_TRACE(BackendNames().ToString(o.backend));
    ExpectEveryRequestCompletes(o, 8);
    o.tls.key.clear();
    absl::StatusOr<std::vector<RunResult>> half = RunLoad(o);
    ASSERT_FALSE(half.ok());
    EXPECT_THAT(half.status().message(), HasSubstr("--tls-key"));
  }
  (*s)->Shutdown();
}

// Server-Sent Events end lines with CRLF, LF or CR (the SSE spec); servers built on other
// stacks (sse-starlette, for one) send CRLF. Events split anywhere across reads still arrive
// whole; comments and fields other than data are skipped.
TEST(LoadgenSseTest, SplitsEventsOnEveryLineEndingAcrossReads) {
  const std::string stream =
      "data: {\"a\":1}\r\n\r\n: keep-alive\r\n\r\nevent: x\ndata: two\ndata: lines\n\n"
      "data: cr\r\rdata: [DONE]\r\n\r\n";
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SCOPED_TRACE(cut);
    SseParser parser;
    std::vector<std::string> events;
    auto collect = [&](const std::string& e) { events.push_back(e); };
    parser.Feed(stream.data(), cut, collect);
    parser.Feed(stream.data() + cut, stream.size() - cut, collect);
    EXPECT_THAT(events, ::testing::ElementsAre("{\"a\":1}", "two\nlines", "cr", "[DONE]"));
  }
}

TEST(LoadgenFailureTest, OpenAiBadOrUnreachableBaseUrl) {
  LoadOptions o = Synthetic("", 5, "inf");
  o.backend = Backend::kOpenAi;
  o.base_url = "ftp://127.0.0.1:1";
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.base_url = "https://127.0.0.1:1";  // TLS (--tls-ca): a valid URL
  EXPECT_TRUE(ValidateOptions(o).ok());
  o.base_url = "http://127.0.0.1:1";
  o.connect_timeout_s = 1;
  absl::StatusOr<std::vector<RunResult>> runs = RunLoad(o);
  ASSERT_FALSE(runs.ok());
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(runs.status().message(), HasSubstr("http://127.0.0.1:1/v1/models"));
}

}  // namespace
}  // namespace neupims::loadgen
