#include "tools/loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/loadgen/results.h"

namespace neupims::loadgen {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int Count(absl::string_view haystack, absl::string_view needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != absl::string_view::npos;
       pos = haystack.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

// Values of numeric SVG attributes that are not plain numbers ("nan", "inf", ...).
std::vector<std::string> BadNumericAttributes(const std::string& html) {
  static const std::regex kAttr(
      R"re(\s(x|y|x1|x2|y1|y2|cx|cy|r|width|height|d|viewBox|transform)="([^"]*)")re");
  std::vector<std::string> bad;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), kAttr);
       it != std::sregex_iterator(); ++it) {
    std::string value = (*it)[2].str();
    std::transform(value.begin(), value.end(), value.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (value.find("nan") != std::string::npos || value.find("inf") != std::string::npos) {
      bad.push_back(absl::StrCat((*it)[1].str(), "=\"", (*it)[2].str(), "\""));
    }
  }
  return bad;
}

// Checks every rendered page must pass.
void ExpectSelfContained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_THAT(html, HasSubstr("</html>"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  EXPECT_THAT(BadNumericAttributes(html), ::testing::IsEmpty());
}

// A completed request whose tokens arrive at a steady pace after the first.
RequestResult Completed(int64_t index, double sent_s, double ttft_s, double tpot_s,
                        int64_t output_tokens, double sim_scale) {
  RequestResult r;
  r.index = index;
  r.request_id = absl::StrCat("req-", index);
  r.scheduled_s = r.sent_s = sent_s;
  r.ok = true;
  r.finish_reason = "length";
  r.prompt_tokens = 100 + (index * 37) % 400;
  r.output_tokens = output_tokens;
  r.ttft_s = ttft_s;
  r.tpot_s = output_tokens > 1 ? tpot_s : 0;
  r.e2el_s = ttft_s + tpot_s * static_cast<double>(output_tokens - 1);
  for (int64_t k = 0; k < output_tokens; ++k) {
    r.token_recv_s.push_back(sent_s + ttft_s + tpot_s * static_cast<double>(k));
    if (k > 0) r.itl_s.push_back(tpot_s);
  }
  r.sim_queue_s = ttft_s * sim_scale * 0.3;
  r.sim_ttft_s = ttft_s * sim_scale;
  r.sim_tpot_s = tpot_s * sim_scale;
  r.sim_e2el_s = r.e2el_s * sim_scale;
  r.pim_channel = static_cast<int>(index % 16);
  return r;
}

RequestResult Failed(int64_t index, double sent_s, const std::string& code) {
  RequestResult r;
  r.index = index;
  r.request_id = absl::StrCat("req-", index);
  r.scheduled_s = r.sent_s = sent_s;
  r.ok = false;
  r.error_code = code;
  r.error_message = "KV cache full: request <rejected> & dropped";
  r.finish_reason = "rejected";
  r.e2el_s = 0.002;
  return r;
}

// Samples the number of in-flight requests every 0.5 s.
void AddSamples(RunResult& run) {
  double end = 0;
  for (const RequestResult& r : run.requests) end = std::max(end, r.sent_s + r.e2el_s);
  for (double t = 0; t <= end + 0.5; t += 0.5) {
    ServerSample s;
    s.t_s = t;
    for (const RequestResult& r : run.requests) {
      if (!r.ok || t < r.sent_s || t > r.sent_s + r.e2el_s) continue;
      if (t < r.sent_s + r.ttft_s * 0.5) {
        ++s.waiting;
      } else {
        ++s.running;
      }
    }
    s.kv_cache_usage = std::min(1.0, static_cast<double>(s.running) / 64);
    s.sim_time_s = t * 0.05;
    run.samples.push_back(s);
  }
}

// A Poisson-arrival run at `rate`; latency grows with load, like a real server.
RunResult SweepRun(double rate, int n, uint32_t seed) {
  RunResult run;
  run.label = rate > 0 ? absl::StrCat("rate ", rate, "/s") : "all at once";
  run.request_rate = rate;
  run.wall_start_unix_s = 1.7e9 + seed;
  std::mt19937 rng(seed);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1e6);
  std::lognormal_distribution<double> jitter(0, 0.35);
  std::uniform_int_distribution<int64_t> tokens(20, 260);
  const double load = rate > 0 ? rate : 40;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    const double ttft = (0.12 + 0.015 * load) * jitter(rng);
    const double tpot = (0.025 + 0.0015 * load) * jitter(rng);
    run.requests.push_back(Completed(i, t, ttft, tpot, tokens(rng), 0.08));
  }
  if (rate >= 16) {
    run.requests.push_back(Failed(n, t, "RESOURCE_EXHAUSTED"));
    run.requests.push_back(Failed(n + 1, t + 0.1, "RESOURCE_EXHAUSTED"));
  }
  double end = 0;
  for (const RequestResult& r : run.requests) end = std::max(end, r.sent_s + r.e2el_s);
  run.duration_s = end - run.requests.front().sent_s;
  AddSamples(run);
  return run;
}

std::vector<RunResult> Sweep() {
  return {SweepRun(2, 60, 1), SweepRun(8, 120, 2), SweepRun(16, 160, 3)};
}

ReportInfo Info() {
  ReportInfo info;
  info.title = "neupims load test";
  info.server = "localhost:50051";
  info.model = "gpt3-7b";
  info.device = "neupims";
  info.mode = "npu+pim";
  info.workload = "ShareGPT (sharegpt_v3.json), 120 requests, Poisson arrivals";
  info.command = "neupims loadgen --dataset sharegpt --rates 2,8,16 --out results/";
  info.generated_at = "2025-01-01 12:00:00 UTC";
  return info;
}

// 3 CDFs; 2 per charted run (throughput, batch size); 2 sweep charts when several runs.
int ExpectedCharts(size_t runs) {
  if (runs == 0) return 0;
  const int charted = static_cast<int>(std::min<size_t>(runs, 8));
  return 3 + 2 * charted + (runs > 1 ? 2 : 0);
}

TEST(ReportTest, SweepRendersSelfContainedPageWithEveryChart) {
  const std::vector<RunResult> runs = Sweep();
  const std::string html = RenderHtmlReport(runs, Info());
  ExpectSelfContained(html);
  EXPECT_EQ(Count(html, "<svg"), ExpectedCharts(3));
  for (const RunResult& run : runs) EXPECT_THAT(html, HasSubstr(run.label));
  EXPECT_THAT(html, HasSubstr("Throughput vs TTFT"));
  EXPECT_THAT(html, HasSubstr("Throughput vs TPOT"));
  EXPECT_THAT(html, HasSubstr("client (wall clock)"));
  EXPECT_THAT(html, HasSubstr("hardware (simulated)"));
  EXPECT_THAT(html, HasSubstr("How to read this"));
  EXPECT_THAT(html, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(html, HasSubstr("localhost:50051"));
  // Rates label the sweep points.
  EXPECT_THAT(html, HasSubstr(">16/s</text>"));
  // Dashed curves for the hardware view.
  EXPECT_THAT(html, HasSubstr("stroke-dasharray"));
}

TEST(ReportTest, SingleRunHasNoSweepCharts) {
  const std::vector<RunResult> runs = {SweepRun(4, 50, 7)};
  const std::string html = RenderHtmlReport(runs, Info());
  ExpectSelfContained(html);
  EXPECT_EQ(Count(html, "<svg"), ExpectedCharts(1));
  EXPECT_THAT(html, Not(HasSubstr("Throughput vs TTFT")));
  EXPECT_THAT(html, HasSubstr("median TTFT"));
}

TEST(ReportTest, UsesTheCallersSummaryWhenFilled) {
  std::vector<RunResult> runs = {SweepRun(4, 10, 9)};
  RunSummary& s = runs[0].summary;
  s.completed = 10;
  s.duration_s = 4.25;
  s.output_throughput = 321.5;
  s.good = 7;
  s.goodput = 1.65;
  const std::string html = RenderHtmlReport(runs, Info());
  EXPECT_THAT(html, HasSubstr("321.5"));
  EXPECT_THAT(html, HasSubstr("1.65 (7 good)"));
}

TEST(ReportTest, EscapesText) {
  std::vector<RunResult> runs = Sweep();
  runs[0].label = "a <b> & \"c\"";
  ReportInfo info = Info();
  info.title = "<script>alert(1)</script>";
  info.command = "loadgen --url=http://example.com --tag='x<y'";
  const std::string html = RenderHtmlReport(runs, info);
  EXPECT_THAT(html, HasSubstr("a &lt;b&gt; &amp; &quot;c&quot;"));
  EXPECT_THAT(html, Not(HasSubstr("a <b>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("x&lt;y"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, HasSubstr("KV cache full: request &lt;rejected&gt; &amp; dropped"));
}

TEST(ReportTest, ZeroRuns) {
  const std::string html = RenderHtmlReport({}, Info());
  ExpectSelfContained(html);
  EXPECT_EQ(Count(html, "<svg"), 0);
  EXPECT_THAT(html, HasSubstr("No runs to report"));
}

// An empty run, an all-failed run and a run of one single-token request.
std::vector<RunResult> EdgeRuns() {
  RunResult empty;
  empty.label = "empty";
  RunResult failed;
  failed.label = "all failed";
  failed.request_rate = 50;
  for (int i = 0; i < 5; ++i) failed.requests.push_back(Failed(i, 0.1 * i, "UNAVAILABLE"));
  RunResult one;
  one.label = "one request";
  one.request_rate = 1;
  one.requests.push_back(Completed(0, 0.0, 0.2, 0.03, 1, 0.1));  // a single token: no TPOT
  one.samples.push_back({.t_s = 0.1, .running = 1, .waiting = 0});
  return {empty, failed, one};
}

TEST(ReportTest, EmptyAllFailedAndSingleRequestRuns) {
  const std::vector<RunResult> runs = EdgeRuns();
  const std::string html = RenderHtmlReport(runs, Info());
  ExpectSelfContained(html);
  EXPECT_EQ(Count(html, "<svg"), ExpectedCharts(3));
  EXPECT_THAT(html, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(html, HasSubstr("no tokens received"));
  EXPECT_THAT(html, HasSubstr("no server samples"));
  for (const RunResult& run : runs) {
    const std::string page = RenderHtmlReport({run}, ReportInfo{});
    ExpectSelfContained(page);
    EXPECT_EQ(Count(page, "<svg"), ExpectedCharts(1)) << run.label;
  }
}

TEST(ReportTest, RendersRunsSummarizedByTheLoadGenerator) {
  std::vector<RunResult> runs = Sweep();
  for (const RunResult& edge : EdgeRuns()) runs.push_back(edge);
  for (RunResult& run : runs) Summarize(run, {.ttft_ms = 500, .tpot_ms = 60});
  const std::string html = RenderHtmlReport(runs, Info());
  ExpectSelfContained(html);
  EXPECT_EQ(Count(html, "<svg"), ExpectedCharts(runs.size()));
  EXPECT_THAT(html, HasSubstr(absl::StrCat(" (", runs[0].summary.good, " good)")));
}

TEST(ReportTest, SkipsNonFiniteAndHandlesIdenticalValues) {
  RunResult run;
  run.label = "odd values";
  run.request_rate = kInf;
  run.duration_s = kNaN;
  for (int i = 0; i < 6; ++i) {
    RequestResult r = Completed(i, 0.5, 0.1, 0.02, 5, 0.1);  // identical requests
    if (i == 1) r.ttft_s = kNaN;
    if (i == 2) r.tpot_s = kInf;
    if (i == 3) r.sim_e2el_s = -kInf;
    if (i == 4) r.token_recv_s.push_back(kNaN);
    run.requests.push_back(r);
  }
  run.samples.push_back({.t_s = 0, .running = 3, .waiting = 3});
  run.samples.push_back({.t_s = kNaN, .running = 1});
  run.samples.push_back({.t_s = 1, .running = 3, .waiting = 3});
  RunResult zero = run;
  zero.label = "zero latencies";
  for (RequestResult& r : zero.requests) {
    r.ttft_s = r.tpot_s = r.e2el_s = 0;
    r.sim_ttft_s = r.sim_tpot_s = r.sim_e2el_s = 0;
    r.token_recv_s.assign(r.token_recv_s.size(), 0.0);
  }
  const std::vector<RunResult> runs = {run, zero};
  const std::string html = RenderHtmlReport(runs, Info());
  ExpectSelfContained(html);
  EXPECT_EQ(Count(html, "<svg"), ExpectedCharts(2));
}

TEST(ReportTest, ChartsAtMostEightRuns) {
  std::vector<RunResult> runs;
  for (int i = 0; i < 12; ++i) runs.push_back(SweepRun(1 + 2 * i, 20, 100 + i));
  const std::string html = RenderHtmlReport(runs, Info());
  ExpectSelfContained(html);
  EXPECT_EQ(Count(html, "<svg"), ExpectedCharts(12));
  EXPECT_THAT(html, HasSubstr("Charts show 8 of 12 runs"));
  for (const RunResult& run : runs) EXPECT_THAT(html, HasSubstr(run.label));  // tables: all
}

// The <svg> element whose aria-label starts with `title` ("" if none).
std::string SvgTitled(const std::string& html, const std::string& title) {
  const size_t at = html.find(absl::StrCat("aria-label=\"", title));
  if (at == std::string::npos) return "";
  const size_t start = html.rfind("<svg", at);
  return html.substr(start, html.find("</svg>", at) + 6 - start);
}

// Vertices of every data line (<path d="M..L.." fill="none">) of an SVG chart.
std::vector<int> LineVertices(const std::string& svg) {
  static const std::regex kLine(R"re(<path d="(M[^"]*)" fill="none")re");
  std::vector<int> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kLine); it != std::sregex_iterator();
       ++it) {
    out.push_back(1 + Count((*it)[1].str(), "L"));
  }
  return out;
}

// A run whose server samples carry the hardware view: 6 samples, 4 PIM channels (channel c at
// 0.25 * c), 2 J and 100 tokens between samples.
RunResult HardwareRun() {
  RunResult run = SweepRun(4, 20, 3);
  run.samples.clear();
  for (int i = 0; i < 6; ++i) {
    ServerSample s;
    s.t_s = 0.5 * i;
    s.running = i;
    s.channel_kv_usage = {0.0, 0.25, 0.5, 0.75};
    s.has_hardware = true;
    s.npu_systolic = 0.1 * i;
    s.npu_vector = 0.05;
    s.pim = 0.02 * i;
    s.hbm_bandwidth = 0.6;
    s.power_w = 100 + i;
    s.energy_j = 2.0 * i;
    s.generation_tokens = 100.0 * i;
    run.samples.push_back(s);
  }
  return run;
}

TEST(ReportTest, HardwareViewDrawsUtilisationKvHeatMapPowerAndEnergyPerToken) {
  const std::string html = RenderHtmlReport({HardwareRun()}, Info());
  ExpectSelfContained(html);
  EXPECT_THAT(html, HasSubstr("<h2>Hardware (simulated)</h2>"));
  EXPECT_EQ(Count(html, "<svg"), ExpectedCharts(1) + 4);

  const std::string util = SvgTitled(html, "NPU / PIM / HBM utilisation");
  ASSERT_FALSE(util.empty());
  EXPECT_EQ(LineVertices(util), (std::vector<int>{6, 6, 6, 6}));
  for (const char* unit : {"NPU systolic", "NPU vector", "PIM", "HBM bandwidth"}) {
    EXPECT_THAT(util, HasSubstr(absl::StrCat(">", unit, "</text>")));
  }

  const std::string heat = SvgTitled(html, "KV-cache usage per PIM channel");
  ASSERT_FALSE(heat.empty());
  EXPECT_EQ(Count(heat, "<rect class=\"cell\""), 6 * 4);
  EXPECT_THAT(heat, HasSubstr("<title>t=2.50 s, channel 3: 75.0%</title>"));
  EXPECT_THAT(heat, HasSubstr("<title>t=0.00 s, channel 0: 0.0%</title>"));

  const std::string power = SvgTitled(html, "Power");
  EXPECT_EQ(LineVertices(power), (std::vector<int>{6}));

  // 2 J per 100 tokens = 20 mJ per token, between every pair of samples and over the run.
  const std::string energy = SvgTitled(html, "Energy per output token");
  EXPECT_EQ(Count(energy, "stroke-width=\"1.5\"/>"), 5);  // data markers (not the legend's)
  EXPECT_THAT(energy, HasSubstr("run: 20.00 mJ/token"));
}

TEST(ReportTest, WithoutServerMetricsTheHardwareViewSaysHowToGetIt) {
  const std::string html = RenderHtmlReport({SweepRun(4, 20, 3)}, Info());
  EXPECT_THAT(html, HasSubstr("--metrics HOST:PORT"));
  EXPECT_EQ(SvgTitled(html, "Power"), "");
}

TEST(ReportTest, WriteHtmlReportCreatesTheDirectory) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "report_test" / "nested";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteHtmlReport(dir.string(), Sweep(), Info()).ok());
  std::ifstream in(dir / "report.html", std::ios::binary);
  ASSERT_TRUE(in.good());
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(html, RenderHtmlReport(Sweep(), Info()));
}

TEST(ReportTest, WriteHtmlReportNamesThePathOnError) {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "report_test_not_a_dir";
  ASSERT_TRUE(WriteFile(file.string(), "x").ok());
  const absl::Status status = WriteHtmlReport((file / "sub").string(), Sweep(), Info());
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr((file / "sub").string()));
}

// Renders a sample report to look at: NEUPIMS_REPORT_EXAMPLE_DIR=/tmp/report_example.
TEST(ReportTest, WritesExampleWhenAsked) {
  const char* dir = std::getenv("NEUPIMS_REPORT_EXAMPLE_DIR");
  if (dir == nullptr || *dir == '\0') GTEST_SKIP() << "NEUPIMS_REPORT_EXAMPLE_DIR not set";
  std::vector<RunResult> runs = Sweep();
  runs.push_back(SweepRun(0, 120, 4));
  for (RunResult& run : runs) Summarize(run, {.ttft_ms = 500, .tpot_ms = 60});
  ASSERT_TRUE(WriteHtmlReport(dir, runs, Info()).ok());
  std::vector<RunResult> single = {SweepRun(8, 200, 5)};
  Summarize(single[0], {.ttft_ms = 500});
  ASSERT_TRUE(WriteHtmlReport(absl::StrCat(dir, "/single"), single, Info()).ok());
  ASSERT_TRUE(WriteHtmlReport(absl::StrCat(dir, "/edge"), EdgeRuns(), ReportInfo{}).ok());
}

}  // namespace
}  // namespace neupims::loadgen
