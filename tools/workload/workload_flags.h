// Workload command-line flags shared by `neupims simulate` and the load generator:
// where request lengths come from, how many, and how they arrive.
#ifndef NEUPIMS_TOOLS_WORKLOAD_WORKLOAD_FLAGS_H_
#define NEUPIMS_TOOLS_WORKLOAD_WORKLOAD_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/workload/workload.h"

namespace neupims::workload {

struct WorkloadFlags {
  std::string dataset = "sharegpt";  // sharegpt, alpaca or a TSV path
  std::string trace;                 // CSV / JSONL with arrival times (overrides dataset)
  std::string synthetic;             // "P:O" fixed or "PMIN-PMAX:OMIN-OMAX" uniform lengths
  int64_t num_requests = 1000;
  uint64_t seed = 0;
  std::string request_rate = "inf";  // requests/s, or inf = all at t=0
  double burstiness = 1.0;
  int max_concurrency = 0;  // > 0: closed loop
};

void AddWorkloadFlags(CLI::App* cmd, WorkloadFlags* flags);

struct Workload {
  std::vector<RequestSpec> requests;
  ArrivalOptions arrivals;
  LoadReport report;
  std::string description;  // e.g. "sharegpt (seed 0), Poisson 10/s"
};

// The latest arrival a workload may hold, seconds. The simulated clock counts int64 nanoseconds
// (up to ~292 years); arrivals stay below 1e9 s (~32 years) so the run after them fits too.
inline constexpr double kMaxArrivalS = 1e9;

// Builds the request list for a model with context `max_seq_len`. Errors name the flag; an
// arrival beyond kMaxArrivalS (a far trace timestamp, a tiny --request-rate) is refused.
absl::StatusOr<Workload> BuildWorkload(const WorkloadFlags& flags, int64_t max_seq_len);

// The flags and load report as JSON (the "settings" / "workload" sections of result files).
nlohmann::json WorkloadJson(const WorkloadFlags& flags, const Workload& w);

}  // namespace neupims::workload

#endif  // NEUPIMS_TOOLS_WORKLOAD_WORKLOAD_FLAGS_H_
