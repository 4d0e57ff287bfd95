// The load generator's HTML report: one self-contained page (inline SVG, no scripts or network)
// that users would rather look at than read the JSON.
//
// Contents: settings and summary tables per run; latency CDFs (TTFT, TPOT, end-to-end; client
// and simulated views); output-token throughput and running batch size over time; for a sweep of
// request rates, throughput against latency (median and p99 TTFT / TPOT); the hardware view from
// the server samples: NPU / PIM / HBM utilisation, KV usage per PIM channel (heat map), power and
// energy per output token over time. Every chart has axes, units, ticks and a legend.
#ifndef NEUPIMS_TOOLS_LOADGEN_REPORT_H_
#define NEUPIMS_TOOLS_LOADGEN_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/loadgen/results.h"

namespace neupims::loadgen {

struct ReportInfo {
  std::string title = "neupims load test";
  std::string server;  // address
  std::string model, device, mode;
  std::string workload;      // description
  std::string command;       // the command line that produced it
  std::string generated_at;  // timestamp text
};

std::string RenderHtmlReport(const std::vector<RunResult>& runs, const ReportInfo& info);

// Writes <dir>/report.html (creating dir).
absl::Status WriteHtmlReport(const std::string& dir, const std::vector<RunResult>& runs,
                             const ReportInfo& info);

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_REPORT_H_
