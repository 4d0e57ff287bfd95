// The hardware view of a load test: the server's Prometheus endpoint (`neupims serve
// --metrics-port`, docs/metrics.md) read while the load runs, for the report's utilisation,
// power and energy charts.
#ifndef NEUPIMS_TOOLS_LOADGEN_METRICS_SCRAPE_H_
#define NEUPIMS_TOOLS_LOADGEN_METRICS_SCRAPE_H_

#include <string>

#include "absl/status/statusor.h"
#include "tools/loadgen/results.h"

namespace neupims::loadgen {

// What one scrape says about the simulated hardware (sums over the series of each family, so a
// server that serves one model reads as that model).
struct HardwareReading {
  double npu_systolic = 0, npu_vector = 0, pim = 0, hbm_bandwidth = 0;  // ratios 0..1
  double power_w = 0;
  double energy_j = 0;           // neupims:energy_joules_total, all components (cumulative)
  double generation_tokens = 0;  // neupims:generation_tokens_total (cumulative)
};

// Parses the text exposition format; INVALID_ARGUMENT if it holds no neupims:power_watts (not a
// neupims metrics endpoint).
absl::StatusOr<HardwareReading> ParseHardwareReading(const std::string& exposition);

// Copies a reading into a server sample (has_hardware and the hardware fields).
void SetHardware(const HardwareReading& reading, ServerSample* sample);

// GET http://<host_port>/metrics (HTTP/1.0, IPv4 host or name) within `timeout_s`; the body.
absl::StatusOr<std::string> FetchMetrics(const std::string& host_port, double timeout_s);

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_METRICS_SCRAPE_H_
