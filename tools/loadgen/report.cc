#include "tools/loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/file_io.h"
#include "common/stats.h"
#include "tools/loadgen/svg_chart.h"

// Page assembly: which tables and charts the report has and what goes in them. Drawing a chart
// is svg_chart.h's; the numbers are results.h's one summary of a run.

namespace neupims::loadgen {
namespace {

// ---------------------------------------------------------------------------------------------
// Text and numbers.

constexpr int kMaxChartRuns = kPaletteSize;  // one colour per charted run

// Table cell for a value with a fixed number of decimals; an em dash when unknown.
std::string Cell(double v, int decimals) {
  if (!Usable(v)) return "\u2014";
  return absl::StrFormat("%.*f", decimals, v);
}

// Latency in ms with a precision that suits its magnitude.
std::string MsCell(double v) {
  if (!Usable(v)) return "\u2014";
  const double a = std::abs(v);
  return absl::StrFormat("%.*f", a >= 100 ? 0 : a >= 10 ? 1 : 2, v);
}

std::string RateText(double rate) {
  if (!std::isfinite(rate) || rate <= 0) return "\u221e/s";
  return absl::StrFormat("%g/s", rate);
}

// Sort key for a request rate: 0 ("all at once") and non-finite rates sort last.
double RateKey(double rate) {
  return std::isfinite(rate) && rate > 0 ? rate : std::numeric_limits<double>::max();
}

// "date<br>time" (UTC) for a table cell.
std::string UtcTime(double unix_s) {
  if (!Usable(unix_s) || unix_s <= 0) return "\u2014";
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return "\u2014";
  char buf[64];
  if (std::strftime(buf, sizeof(buf), "%Y-%m-%d<br>%H:%M:%S", &tm) == 0) return "\u2014";
  return buf;
}

// ---------------------------------------------------------------------------------------------
// Samples and runs.

std::vector<double> SortedUsable(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !Usable(x); }), v.end());
  std::sort(v.begin(), v.end());
  return v;
}

// Which latency a chart or statistic is about.
enum class Metric { kTtft, kTpot, kE2el };

// Latency samples in ms over the completed requests; `sim` selects the hardware view. TPOT is
// undefined for single-token outputs; hardware values <= 0 mean the server reported none.
std::vector<double> LatenciesMs(const RunResult& run, Metric metric, bool sim) {
  std::vector<double> out;
  for (const RequestResult& r : run.requests) {
    if (!r.ok) continue;
    double v = 0;
    switch (metric) {
      case Metric::kTtft:
        v = sim ? r.sim_ttft_s : r.ttft_s;
        break;
      case Metric::kTpot:
        if (r.output_tokens <= 1) continue;
        v = sim ? r.sim_tpot_s : r.tpot_s;
        break;
      case Metric::kE2el:
        v = sim ? r.sim_e2el_s : r.e2el_s;
        break;
    }
    if (!Usable(v) || v < 0 || (sim && v <= 0)) continue;
    out.push_back(v * 1e3);
  }
  return out;
}

// A run with the summary the page shows: the caller's (Summarize) when it matches the requests,
// otherwise the same summary of its requests (then without goodput, which needs the SLO targets).
struct RunView {
  const RunResult* run = nullptr;
  RunSummary s;
  bool has_goodput = false;
  bool has_sim = false;  // the server reported simulated times
};

RunView MakeView(const RunResult& run) {
  RunView v;
  v.run = &run;
  const bool summarized = !run.requests.empty() && run.summary.completed + run.summary.failed ==
                                                       static_cast<int64_t>(run.requests.size());
  v.s = summarized ? run.summary : SummarizeRequests(run, SloTargets{});
  v.has_goodput = summarized;
  for (const RequestResult& r : run.requests) {
    if (r.ok && r.sim_e2el_s > 0) v.has_sim = true;
  }
  return v;
}

// Which runs get drawn (at most kMaxChartRuns, spread evenly over the list).
std::vector<size_t> ChartRuns(size_t n) {
  std::vector<size_t> out;
  if (n <= static_cast<size_t>(kMaxChartRuns)) {
    for (size_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (int i = 0; i < kMaxChartRuns; ++i) {
    out.push_back(static_cast<size_t>(
        std::lround(static_cast<double>(i) * static_cast<double>(n - 1) / (kMaxChartRuns - 1))));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Chart data.

// Empirical CDF in percent: exact steps for small samples, 400 quantiles for large ones.
Points CdfPoints(std::vector<double> values) {
  const std::vector<double> v = SortedUsable(std::move(values));
  Points p;
  const size_t n = v.size();
  if (n == 0) return p;
  if (n <= 400) {
    for (size_t i = 0; i < n; ++i) {
      p.emplace_back(v[i], 100.0 * static_cast<double>(i) / static_cast<double>(n));
      p.emplace_back(v[i], 100.0 * static_cast<double>(i + 1) / static_cast<double>(n));
    }
    return p;
  }
  constexpr int kSteps = 400;
  for (int k = 0; k <= kSteps; ++k) {
    const double q = static_cast<double>(k) / kSteps;
    p.emplace_back(QuantileSorted(v, q), 100.0 * q);
  }
  return p;
}

std::string RunName(const RunResult& run, size_t index) {
  return run.label.empty() ? absl::StrCat("run ", index + 1) : run.label;
}

ChartSpec CdfChart(const std::vector<RunView>& views, const std::vector<size_t>& shown,
                   Metric metric) {
  ChartSpec c;
  const char* name = metric == Metric::kTtft   ? "Time to first token (TTFT)"
                     : metric == Metric::kTpot ? "Time per output token (TPOT)"
                                               : "End-to-end latency (E2E)";
  c.title = absl::StrCat(name, " \u2014 CDF");
  c.x_label = metric == Metric::kTtft   ? "TTFT (ms)"
              : metric == Metric::kTpot ? "TPOT (ms per token)"
                                        : "E2E latency (ms)";
  c.y_label = "requests at or below (%)";
  c.log_x_allowed = c.pad_x = true;
  c.y_fixed = std::make_pair(0.0, 100.0);
  c.refs = {{50, "p50"}, {99, "p99"}};
  c.empty_text = metric == Metric::kTpot ? "no completed request with 2+ output tokens"
                                         : "no completed requests";
  const bool several = shown.size() > 1;
  bool any_sim = false;
  for (size_t k = 0; k < shown.size(); ++k) {
    const RunResult& run = *views[shown[k]].run;
    const std::string color = kPalette[k];
    const std::string run_name = RunName(run, shown[k]);
    Series client{.name = several ? run_name : "client (wall clock)", .color = color};
    client.points = CdfPoints(LatenciesMs(run, metric, false));
    Series sim{.name = several ? "" : "hardware (simulated)", .color = color, .dashed = true};
    sim.points = CdfPoints(LatenciesMs(run, metric, true));
    any_sim = any_sim || !sim.points.empty();
    c.series.push_back(std::move(client));
    if (!sim.points.empty()) c.series.push_back(std::move(sim));
  }
  if (several) {
    for (size_t k = 0; k < shown.size(); ++k) {
      c.legend.push_back({RunName(*views[shown[k]].run, shown[k]), kPalette[k]});
    }
    c.legend.push_back({"client (wall clock)", kNeutral});
    if (any_sim) c.legend.push_back({"hardware (simulated)", kNeutral, true});
  }
  return c;
}

ChartSpec ThroughputChart(const RunView& view, size_t index, const std::string& color) {
  const RunResult& run = *view.run;
  double t_max = 0;
  bool any = false;
  for (const RequestResult& r : run.requests) {
    for (double t : r.token_recv_s) {
      if (!Usable(t) || t < 0) continue;
      any = true;
      t_max = std::max(t_max, t);
    }
  }
  // 1 s bins; coarser (2, 5, 10, 20, ... s) for long runs so the path stays small.
  double bin = 1;
  for (int i = 0; t_max / bin > 600 && i < 40; ++i) bin = NiceStep(bin * 1.5);
  ChartSpec c;
  c.title = absl::StrCat("Output throughput \u2014 ", Truncate(RunName(run, index), 36));
  c.x_label = "time since start (s)";
  c.y_label =
      bin == 1 ? "output tokens/s (1 s bins)" : absl::StrFormat("output tokens/s (%g s bins)", bin);
  c.x_from_zero = c.y_from_zero = c.pad_x = true;
  c.empty_text = "no tokens received";
  if (!any) return c;
  std::vector<double> counts(static_cast<size_t>(t_max / bin) + 1, 0);
  for (const RequestResult& r : run.requests) {
    for (double t : r.token_recv_s) {
      if (!Usable(t) || t < 0) continue;
      counts[std::min(counts.size() - 1, static_cast<size_t>(t / bin))] += 1;
    }
  }
  Series s{.name = "output tokens/s", .color = color, .fill = true};
  for (size_t b = 0; b < counts.size(); ++b) {
    const double y = counts[b] / bin;
    s.points.emplace_back(static_cast<double>(b) * bin, y);
    s.points.emplace_back(static_cast<double>(b + 1) * bin, y);
  }
  c.series.push_back(std::move(s));
  if (Usable(view.s.output_throughput) && view.s.output_throughput > 0) {
    c.refs.push_back(
        {view.s.output_throughput, absl::StrFormat("mean %.1f tok/s", view.s.output_throughput)});
  }
  return c;
}

// The run's server samples with a usable time, in time order.
std::vector<ServerSample> SortedSamples(const RunResult& run) {
  std::vector<ServerSample> samples;
  for (const ServerSample& s : run.samples) {
    if (Usable(s.t_s)) samples.push_back(s);
  }
  std::stable_sort(samples.begin(), samples.end(),
                   [](const ServerSample& a, const ServerSample& b) { return a.t_s < b.t_s; });
  return samples;
}

ChartSpec BatchChart(const RunView& view, size_t index, const std::string& color) {
  const RunResult& run = *view.run;
  ChartSpec c;
  c.title = absl::StrCat("Batch size \u2014 ", Truncate(RunName(run, index), 40));
  c.x_label = "time since start (s)";
  c.y_label = "requests";
  c.x_from_zero = c.y_from_zero = c.y_integer = c.pad_x = true;
  c.empty_text = "no server samples";
  const std::vector<ServerSample> samples = SortedSamples(run);
  if (samples.empty()) return c;
  // Sample-and-hold steps: a count holds until the next sample.
  Series running{.name = "running", .color = color, .fill = true};
  Series waiting{.name = "waiting", .color = kNeutral, .dashed = true};
  for (size_t i = 0; i < samples.size(); ++i) {
    const ServerSample& s = samples[i];
    if (i > 0) {
      running.points.emplace_back(s.t_s, static_cast<double>(samples[i - 1].running));
      waiting.points.emplace_back(s.t_s, static_cast<double>(samples[i - 1].waiting));
    }
    running.points.emplace_back(s.t_s, static_cast<double>(s.running));
    waiting.points.emplace_back(s.t_s, static_cast<double>(s.waiting));
  }
  c.series.push_back(std::move(running));
  c.series.push_back(std::move(waiting));
  return c;
}

// ---- Hardware view: the server's /metrics and per-channel KV usage sampled during the run.

bool HasHardwareView(const RunResult& run) {
  for (const ServerSample& s : run.samples) {
    if (s.has_hardware || !s.channel_kv_usage.empty()) return true;
  }
  return false;
}

std::vector<ServerSample> HardwareSamples(const RunResult& run) {
  std::vector<ServerSample> out;
  for (const ServerSample& s : SortedSamples(run)) {
    if (s.has_hardware) out.push_back(s);
  }
  return out;
}

ChartSpec TimeChart(const std::string& title, const RunResult& run, size_t index,
                    const std::string& y_label) {
  ChartSpec c;
  c.title = absl::StrCat(title, " \u2014 ", Truncate(RunName(run, index), 32));
  c.x_label = "time since start (s)";
  c.y_label = y_label;
  c.x_from_zero = c.y_from_zero = c.pad_x = true;
  c.empty_text = "no metrics samples (neupims-bench --metrics HOST:PORT)";
  return c;
}

ChartSpec UtilizationChart(const RunView& view, size_t index) {
  ChartSpec c = TimeChart("NPU / PIM / HBM utilisation", *view.run, index, "utilisation (%)");
  c.y_fixed = std::make_pair(0.0, 100.0);
  const std::vector<ServerSample> samples = HardwareSamples(*view.run);
  if (samples.empty()) return c;
  struct Unit {
    const char* name;
    double ServerSample::*field;
  };
  const Unit units[] = {{"NPU systolic", &ServerSample::npu_systolic},
                        {"NPU vector", &ServerSample::npu_vector},
                        {"PIM", &ServerSample::pim},
                        {"HBM bandwidth", &ServerSample::hbm_bandwidth}};
  for (size_t u = 0; u < std::size(units); ++u) {
    Series s{.name = units[u].name, .color = kPalette[u], .dashed = u == 1};
    for (const ServerSample& x : samples) s.points.emplace_back(x.t_s, 100 * (x.*units[u].field));
    c.series.push_back(std::move(s));
  }
  return c;
}

HeatmapSpec KvHeatmap(const RunView& view, size_t index) {
  HeatmapSpec h;
  h.title = absl::StrCat("KV-cache usage per PIM channel \u2014 ",
                         Truncate(RunName(*view.run, index), 24));
  h.x_label = "time since start (s)";
  h.y_label = "PIM channel";
  h.row_name = "channel";
  h.empty_text = "no per-channel samples";
  for (const ServerSample& s : SortedSamples(*view.run)) {
    if (s.channel_kv_usage.empty()) continue;
    if (h.rows.size() < s.channel_kv_usage.size()) {
      h.rows.resize(s.channel_kv_usage.size(), std::vector<double>(h.xs.size(), 0.0));
    }
    h.xs.push_back(s.t_s);
    for (size_t r = 0; r < h.rows.size(); ++r) {
      h.rows[r].push_back(r < s.channel_kv_usage.size() ? s.channel_kv_usage[r] : 0.0);
    }
  }
  return h;
}

ChartSpec PowerChart(const RunView& view, size_t index) {
  ChartSpec c = TimeChart("Power", *view.run, index, "simulated power (W)");
  Series s{.name = "power (last simulated second)", .color = kPalette[3], .fill = true};
  for (const ServerSample& x : HardwareSamples(*view.run)) s.points.emplace_back(x.t_s, x.power_w);
  if (!s.points.empty()) c.series.push_back(std::move(s));
  return c;
}

// Joules per output token between consecutive samples (where tokens were produced), and over
// the whole run as a reference line.
ChartSpec EnergyPerTokenChart(const RunView& view, size_t index) {
  ChartSpec c = TimeChart("Energy per output token", *view.run, index, "mJ per output token");
  const std::vector<ServerSample> samples = HardwareSamples(*view.run);
  Series s{.name = "between samples", .color = kPalette[4], .markers = true};
  for (size_t i = 1; i < samples.size(); ++i) {
    const double tokens = samples[i].generation_tokens - samples[i - 1].generation_tokens;
    const double joules = samples[i].energy_j - samples[i - 1].energy_j;
    if (tokens > 0 && joules >= 0) s.points.emplace_back(samples[i].t_s, 1e3 * joules / tokens);
  }
  if (s.points.empty()) return c;
  c.series.push_back(std::move(s));
  const double tokens = samples.back().generation_tokens - samples.front().generation_tokens;
  const double joules = samples.back().energy_j - samples.front().energy_j;
  if (tokens > 0) {
    c.refs.push_back(
        {1e3 * joules / tokens, absl::StrFormat("run: %.2f mJ/token", 1e3 * joules / tokens)});
  }
  return c;
}

// Throughput against latency over a sweep, one point per run in order of request rate.
ChartSpec SweepChart(const std::vector<RunView>& views, Metric metric) {
  const bool ttft = metric == Metric::kTtft;
  ChartSpec c;
  c.title = ttft ? "Throughput vs TTFT" : "Throughput vs TPOT";
  c.x_label = "output throughput (tokens/s)";
  c.y_label = ttft ? "TTFT (ms)" : "TPOT (ms per token)";
  c.x_from_zero = c.y_from_zero = true;
  c.pad_x = true;
  c.log_y_allowed = true;  // the hardware view is often far below the client's
  c.empty_text = ttft ? "no run completed a request" : "no run has a TPOT (2+ output tokens)";
  std::vector<const RunView*> order;
  for (const RunView& v : views) {
    if (v.s.completed > 0 && Usable(v.s.output_throughput)) order.push_back(&v);
  }
  std::stable_sort(order.begin(), order.end(), [](const RunView* a, const RunView* b) {
    return RateKey(a->run->request_rate) < RateKey(b->run->request_rate);
  });
  const std::string what = ttft ? "TTFT" : "TPOT";
  Series med{.name = "", .color = kPalette[0], .markers = true};
  Series p99{.name = "", .color = kPalette[3], .markers = true};
  Series sim_med{.name = "", .color = kPalette[0], .dashed = true, .markers = true};
  Series sim_p99{.name = "", .color = kPalette[3], .dashed = true, .markers = true};
  for (const RunView* v : order) {
    const Percentiles& client = ttft ? v->s.ttft_ms : v->s.tpot_ms;
    const Percentiles& sim = ttft ? v->s.sim_ttft_ms : v->s.sim_tpot_ms;
    const double x = v->s.output_throughput;
    // A latency of 0 means "none measured" (e.g. TPOT when every output had one token).
    auto add = [x](Series& series, double y) {
      if (!Usable(y) || y <= 0) return false;
      series.points.emplace_back(x, y);
      return true;
    };
    if (add(med, client.median)) med.point_labels.push_back(RateText(v->run->request_rate));
    add(p99, client.p99);
    if (v->has_sim) {
      add(sim_med, sim.median);
      add(sim_p99, sim.p99);
    }
  }
  const bool any_sim = !sim_med.points.empty();
  c.series = {std::move(med), std::move(p99)};
  if (any_sim) {
    c.series.push_back(std::move(sim_med));
    c.series.push_back(std::move(sim_p99));
  }
  c.legend = {{absl::StrCat("median ", what), kPalette[0], false, true},
              {absl::StrCat("p99 ", what), kPalette[3], false, true},
              {"client (wall clock)", kNeutral}};
  if (any_sim) c.legend.push_back({"hardware (simulated)", kNeutral, true});
  return c;
}

// ---------------------------------------------------------------------------------------------
// Page.

constexpr absl::string_view kCss = R"css(
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f5f6f8; color: #1f2328;
  font: 14px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 28px 28px 56px; }
h1 { font-size: 26px; margin: 0 0 2px; }
h2 { font-size: 19px; margin: 36px 0 12px; padding-bottom: 4px; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 15px; margin: 20px 0 8px; }
.sub { color: #57606a; margin: 0 0 18px; }
.note { background: #fff; border: 1px solid #d0d7de; border-left: 4px solid #1f77b4;
  border-radius: 6px; padding: 10px 16px; }
.note p { margin: 6px 0; }
.warn { background: #fff8e6; border: 1px solid #e3b341; border-radius: 6px; padding: 8px 14px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 8px 0 4px; }
.card { background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 10px 16px;
  min-width: 170px; }
.card .k { color: #57606a; font-size: 12px; }
.card .v { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .h { color: #57606a; font-size: 12px; font-variant-numeric: tabular-nums; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; }
figure { margin: 0; background: #fff; border: 1px solid #d0d7de; border-radius: 8px; padding: 6px; }
svg.chart { display: block; width: 100%; height: auto; font-family: inherit; }
svg .ct { font-size: 14px; font-weight: 600; fill: #1f2328; }
svg .tk { font-size: 11px; fill: #57606a; font-variant-numeric: tabular-nums; }
svg .al { font-size: 12px; fill: #24292f; }
svg .lg { font-size: 11.5px; fill: #24292f; }
svg .pl { font-size: 10.5px; fill: #24292f; }
svg .rl { font-size: 10px; fill: #6e7781; }
svg .empty { font-size: 14px; fill: #8c959f; }
svg .grid line { stroke: #e6e9ed; stroke-width: 1; }
svg .minor line { stroke: #f3f4f6; stroke-width: 1; }
svg .frame { fill: none; stroke: #8c959f; stroke-width: 1; }
svg .ref { stroke: #8c959f; stroke-width: 1; stroke-dasharray: 2 3; }
.table-wrap { overflow-x: auto; background: #fff; border: 1px solid #d0d7de; border-radius: 8px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 9px; border-bottom: 1px solid #eaeef2; text-align: right; white-space: nowrap; }
thead th { white-space: normal; vertical-align: bottom; }
.small { color: #57606a; font-size: 12px; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f0f3f6; font-weight: 600; }
thead th.client { background: #e4eefa; }
thead th.hw { background: #e6f4ea; }
tbody tr:last-child td { border-bottom: none; }
table.kv td { text-align: left; white-space: normal; }
table.kv td:first-child { color: #57606a; width: 160px; white-space: nowrap; }
table.kv code { white-space: pre-wrap; word-break: break-all; }
td.msg { text-align: left; white-space: normal; color: #57606a; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
footer { color: #8c959f; font-size: 12px; margin-top: 40px; }
)css";

constexpr absl::string_view kHowToRead = R"html(
<div class="note">
<p><b>Two views of every latency.</b> <b>Client (wall clock)</b> is what a user of the endpoint
sees: seconds on the load generator's clock from sending a request to receiving tokens, including
the network, gRPC and, above all, how fast the host CPU runs the simulator. <b>Hardware
(simulated)</b> is what the simulated NeuPIMs NPU+PIM device would take: simulated time the server
reports in each request's final message, independent of host speed. In charts, solid lines are the
client view and dashed lines the hardware view.</p>
<p><b>Latency CDFs</b> show, for each latency, the share of completed requests at or below a
value: curves further left are faster, a long flat tail means outliers (dotted lines mark p50 and
p99). <b>TTFT</b> is the time to the first token, <b>TPOT</b> the mean time per output token after
the first, <b>ITL</b> the gap between consecutive tokens, <b>E2E</b> the whole request.
<b>Throughput over time</b> counts output tokens received per second; <b>batch size</b> is the
number of running and waiting requests sampled from the server. For a sweep of request rates,
<b>throughput vs latency</b> shows the price in latency of each step up in load (points labelled
with the offered rate; &#8734; = all requests at once). <b>Goodput</b> counts requests per second
that met every set SLO.</p>
</div>
)html";

void AppendKv(std::string& o, absl::string_view key, const std::string& value, bool code = false) {
  absl::StrAppend(&o, "<tr><td>", Esc(key), "</td><td>");
  if (value.empty()) {
    absl::StrAppend(&o, "\u2014");
  } else if (code) {
    absl::StrAppend(&o, "<code>", Esc(value), "</code>");
  } else {
    absl::StrAppend(&o, Esc(value));
  }
  absl::StrAppend(&o, "</td></tr>");
}

std::string RunCell(const RunView& v, size_t index, int color) {
  std::string swatch;
  if (color >= 0) {
    swatch =
        absl::StrCat("<span class=\"swatch\" style=\"background:", kPalette[color], "\"></span>");
  }
  return absl::StrCat("<td>", swatch, Esc(RunName(*v.run, index)), "</td>");
}

// A percentile in ms, or an em dash when it is not shown or no sample is behind it.
std::string PercentileCell(const Percentiles& p, double value, bool shown) {
  return shown && p.count > 0 ? MsCell(value) : "\u2014";
}

void AppendPercentileCells(std::string& o, const Percentiles& p, bool known) {
  for (double x : {p.mean, p.median, p.p90, p.p99}) {
    absl::StrAppend(&o, "<td>", PercentileCell(p, x, known), "</td>");
  }
}

void AppendLatencyTable(std::string& o, const std::vector<RunView>& views,
                        const std::vector<int>& colors, bool sim) {
  const std::vector<std::pair<const char*, Percentiles RunSummary::*>> metrics =
      sim ? std::vector<std::pair<const char*,
                                  Percentiles RunSummary::*>>{{"TTFT", &RunSummary::sim_ttft_ms},
                                                              {"TPOT", &RunSummary::sim_tpot_ms},
                                                              {"E2E", &RunSummary::sim_e2el_ms},
                                                              {"queue", &RunSummary::sim_queue_ms}}
          : std::vector<std::pair<const char*, Percentiles RunSummary::*>>{
                {"TTFT", &RunSummary::ttft_ms},
                {"TPOT", &RunSummary::tpot_ms},
                {"ITL", &RunSummary::itl_ms},
                {"E2E", &RunSummary::e2el_ms}};
  const char* cls = sim ? "hw" : "client";
  absl::StrAppend(&o, "<div class=\"table-wrap\"><table><thead><tr><th class=\"", cls,
                  "\" rowspan=\"2\">", sim ? "hardware (simulated)" : "client (wall clock)",
                  "</th>");
  for (const auto& [name, member] : metrics) {
    absl::StrAppend(&o, "<th class=\"", cls, "\" colspan=\"4\" style=\"text-align:center\">", name,
                    " (ms)</th>");
  }
  absl::StrAppend(&o, "</tr><tr>");
  for (size_t i = 0; i < metrics.size(); ++i) {
    absl::StrAppend(&o, "<th>mean</th><th>median</th><th>p90</th><th>p99</th>");
  }
  absl::StrAppend(&o, "</tr></thead><tbody>");
  for (size_t i = 0; i < views.size(); ++i) {
    const RunView& v = views[i];
    absl::StrAppend(&o, "<tr>", RunCell(v, i, colors[i]));
    const bool known = v.s.completed > 0 && (!sim || v.has_sim);
    for (const auto& [name, member] : metrics) AppendPercentileCells(o, v.s.*member, known);
    absl::StrAppend(&o, "</tr>");
  }
  absl::StrAppend(&o, "</tbody></table></div>");
}

std::string FailuresText(const RunSummary& s) {
  std::string out;
  for (const auto& [code, count] : s.failures_by_code) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", code, ": ", count);
  }
  return out;
}

}  // namespace

std::string RenderHtmlReport(const std::vector<RunResult>& runs, const ReportInfo& info) {
  std::vector<RunView> views;
  views.reserve(runs.size());
  for (const RunResult& r : runs) views.push_back(MakeView(r));
  const std::vector<size_t> shown = ChartRuns(runs.size());
  std::vector<int> colors(runs.size(), -1);  // palette index of each charted run
  for (size_t k = 0; k < shown.size(); ++k) colors[shown[k]] = static_cast<int>(k);
  const std::string title = info.title.empty() ? "neupims load test" : info.title;

  std::string o;
  o.reserve(1 << 16);
  absl::StrAppend(&o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
                  "<title>", Esc(title), "</title>\n<style>", kCss, "</style>\n</head>\n<body>\n",
                  "<main>\n<h1>", Esc(title), "</h1>\n<p class=\"sub\">");
  {
    std::vector<std::string> parts;
    for (const std::string* s : {&info.model, &info.device, &info.mode, &info.server}) {
      if (!s->empty()) parts.push_back(Esc(*s));
    }
    parts.push_back(absl::StrCat(runs.size(), runs.size() == 1 ? " run" : " runs"));
    if (!info.generated_at.empty()) parts.push_back(Esc(info.generated_at));
    for (size_t i = 0; i < parts.size(); ++i) {
      absl::StrAppend(&o, i ? " &middot; " : "", parts[i]);
    }
  }
  absl::StrAppend(&o, "</p>\n");

  // At a glance (single run).
  if (views.size() == 1) {
    const RunSummary& s = views[0].s;
    const bool done = s.completed > 0;
    const bool sim = views[0].has_sim;
    auto card = [&](absl::string_view key, const std::string& value, const std::string& hint) {
      absl::StrAppend(&o, "<div class=\"card\"><div class=\"k\">", Esc(key),
                      "</div><div class=\"v\">", Esc(value), "</div><div class=\"h\">", Esc(hint),
                      "</div></div>");
    };
    absl::StrAppend(&o, "<div class=\"cards\">");
    card("completed", absl::StrCat(s.completed, " / ", s.completed + s.failed),
         s.failed > 0 ? absl::StrCat(s.failed, " failed") : "none failed");
    card("output throughput", absl::StrCat(Cell(s.output_throughput, 1), " tok/s"),
         absl::StrCat(Cell(s.request_throughput, 2), " req/s"));
    auto median_card = [&](absl::string_view key, const Percentiles& client,
                           const Percentiles& hw) {
      card(key, absl::StrCat(PercentileCell(client, client.median, done), " ms"),
           absl::StrCat("hardware ", PercentileCell(hw, hw.median, done && sim), " ms"));
    };
    median_card("median TTFT", s.ttft_ms, s.sim_ttft_ms);
    median_card("median TPOT", s.tpot_ms, s.sim_tpot_ms);
    median_card("median E2E", s.e2el_ms, s.sim_e2el_ms);
    absl::StrAppend(&o, "</div>\n");
  }

  absl::StrAppend(&o, "<h2>How to read this</h2>", kHowToRead);

  // Settings.
  absl::StrAppend(&o, "<h2>Settings</h2>\n<div class=\"table-wrap\"><table class=\"kv\"><tbody>");
  AppendKv(o, "server", info.server);
  AppendKv(o, "model", info.model);
  AppendKv(o, "device", info.device);
  AppendKv(o, "mode", info.mode);
  AppendKv(o, "workload", info.workload);
  AppendKv(o, "command", info.command, /*code=*/true);
  AppendKv(o, "generated", info.generated_at);
  absl::StrAppend(&o, "</tbody></table></div>\n");

  if (views.empty()) {
    absl::StrAppend(&o, "<h2>Results</h2><p class=\"warn\">No runs to report.</p>\n");
  } else {
    // Runs and throughput.
    absl::StrAppend(
        &o, "<h2>Summary</h2>\n<h3>Runs and throughput</h3>\n<div class=\"table-wrap\"><table>",
        "<thead><tr><th>run</th><th>request rate</th><th>max concurrency</th><th>started "
        "(UTC)</th>",
        "<th>completed</th><th>failed</th><th>duration (s)</th><th>req/s</th>",
        "<th>output tok/s</th><th>total tok/s</th><th>input tokens</th><th>output tokens</th>",
        "<th>goodput (req/s)</th></tr></thead><tbody>");
    for (size_t i = 0; i < views.size(); ++i) {
      const RunView& v = views[i];
      const RunSummary& s = v.s;
      const std::string failures = FailuresText(s);
      absl::StrAppend(
          &o, "<tr>", RunCell(v, i, colors[i]), "<td>",
          v.run->request_rate > 0 && std::isfinite(v.run->request_rate)
              ? Esc(RateText(v.run->request_rate))
              : "all at once",
          "</td><td>",
          v.run->max_concurrency > 0 ? absl::StrCat(v.run->max_concurrency) : "unlimited",
          "</td><td>", UtcTime(v.run->wall_start_unix_s), "</td><td>", s.completed, "</td><td>",
          s.failed,
          failures.empty() ? ""
                           : absl::StrCat("<br><span class=\"small\">", Esc(failures), "</span>"),
          "</td><td>", Cell(s.duration_s, 2), "</td><td>", Cell(s.request_throughput, 2),
          "</td><td>", Cell(s.output_throughput, 1), "</td><td>", Cell(s.total_token_throughput, 1),
          "</td><td>", s.total_input_tokens, "</td><td>", s.total_output_tokens, "</td><td>",
          v.has_goodput ? absl::StrCat(Cell(s.goodput, 2), " (", s.good, " good)") : "\u2014",
          "</td></tr>");
    }
    absl::StrAppend(&o, "</tbody></table></div>\n");

    absl::StrAppend(&o, "<h3>Latency \u2014 client (wall clock)</h3>\n");
    AppendLatencyTable(o, views, colors, /*sim=*/false);
    absl::StrAppend(&o, "<h3>Latency \u2014 hardware (simulated)</h3>\n");
    AppendLatencyTable(o, views, colors, /*sim=*/true);

    // Errors: per run and code, a count and the first message.
    std::string errors;
    for (size_t i = 0; i < views.size(); ++i) {
      std::map<std::string, std::pair<int64_t, std::string>> by_code;
      for (const RequestResult& r : views[i].run->requests) {
        if (r.ok) continue;
        auto& [count, message] = by_code[r.error_code.empty() ? "UNKNOWN" : r.error_code];
        if (count++ == 0) message = r.error_message;
      }
      for (const auto& [code, entry] : by_code) {
        absl::StrAppend(&errors, "<tr>", RunCell(views[i], i, colors[i]), "<td>", Esc(code),
                        "</td><td>", entry.first, "</td><td class=\"msg\">",
                        Esc(Truncate(entry.second, 300)), "</td></tr>");
      }
    }
    if (!errors.empty()) {
      absl::StrAppend(&o,
                      "<h3>Errors</h3>\n<div class=\"table-wrap\"><table><thead><tr><th>run</th>"
                      "<th>code</th><th>requests</th><th style=\"text-align:left\">first "
                      "message</th></tr></thead><tbody>",
                      errors, "</tbody></table></div>\n");
    }

    // Charts.
    int chart_id = 0;
    auto figure = [&](const ChartSpec& spec) {
      absl::StrAppend(&o, "<figure>", RenderChart(spec, chart_id++), "</figure>\n");
    };
    absl::StrAppend(&o, "<h2>Latency distributions</h2>\n");
    if (shown.size() < views.size()) {
      absl::StrAppend(&o, "<p class=\"sub\">Charts show ", shown.size(), " of ", views.size(),
                      " runs, spread evenly over the list; the tables show all.</p>\n");
    }
    absl::StrAppend(&o, "<div class=\"charts\">\n");
    for (Metric m : {Metric::kTtft, Metric::kTpot, Metric::kE2el}) {
      figure(CdfChart(views, shown, m));
    }
    absl::StrAppend(&o, "</div>\n");

    if (views.size() > 1) {
      absl::StrAppend(&o, "<h2>Throughput vs latency</h2>\n<div class=\"charts\">\n");
      figure(SweepChart(views, Metric::kTtft));
      figure(SweepChart(views, Metric::kTpot));
      absl::StrAppend(&o, "</div>\n");
    }

    absl::StrAppend(&o, "<h2>Over time</h2>\n");
    for (size_t k = 0; k < shown.size(); ++k) {
      const RunView& v = views[shown[k]];
      if (shown.size() > 1) {
        absl::StrAppend(&o, "<h3><span class=\"swatch\" style=\"background:", kPalette[k],
                        "\"></span>", Esc(RunName(*v.run, shown[k])), "</h3>\n");
      }
      absl::StrAppend(&o, "<div class=\"charts\">\n");
      figure(ThroughputChart(v, shown[k], kPalette[k]));
      figure(BatchChart(v, shown[k], kPalette[k]));
      absl::StrAppend(&o, "</div>\n");
    }

    absl::StrAppend(&o, "<h2>Hardware (simulated)</h2>\n");
    bool any_hardware = false;
    for (size_t k = 0; k < shown.size(); ++k) {
      const RunView& v = views[shown[k]];
      if (!HasHardwareView(*v.run)) continue;
      any_hardware = true;
      if (shown.size() > 1) {
        absl::StrAppend(&o, "<h3><span class=\"swatch\" style=\"background:", kPalette[k],
                        "\"></span>", Esc(RunName(*v.run, shown[k])), "</h3>\n");
      }
      absl::StrAppend(&o, "<div class=\"charts hardware\">\n");
      figure(UtilizationChart(v, shown[k]));
      absl::StrAppend(&o, "<figure>", RenderHeatmap(KvHeatmap(v, shown[k])), "</figure>\n");
      figure(PowerChart(v, shown[k]));
      figure(EnergyPerTokenChart(v, shown[k]));
      absl::StrAppend(&o, "</div>\n");
    }
    if (!any_hardware) {
      absl::StrAppend(&o,
                      "<p class=\"sub\">No server samples with the hardware view: run "
                      "neupims-bench with <code>--metrics HOST:PORT</code> (the server's "
                      "metrics port) for NPU / PIM / HBM utilisation, KV usage per channel, power "
                      "and energy per token over time.</p>\n");
    }
  }

  absl::StrAppend(&o,
                  "<footer>Generated by the neupims load generator. Self-contained page: inline "
                  "CSS and SVG, no scripts.</footer>\n</main>\n</body>\n</html>\n");
  return o;
}

absl::Status WriteHtmlReport(const std::string& dir, const std::vector<RunResult>& runs,
                             const ReportInfo& info) {
  const std::filesystem::path directory(dir.empty() ? "." : dir);
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create report directory '", directory.string(), "': ", ec.message()));
  }
  return WriteFile((directory / "report.html").string(), RenderHtmlReport(runs, info));
}

}  // namespace neupims::loadgen
