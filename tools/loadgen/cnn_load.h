// neupims-bench's CNN mode: drives inference.GRPCInferenceService/ModelInfer (KServe v2) of a
// `neupims serve --cnn-model M` server, closed loop (N requests in flight, each client sending
// its next request when the previous one is answered) or open loop (Poisson arrivals at a rate),
// and reports images/s and latency percentiles as the client saw them (wall clock) and as the
// simulated partition produced them (the responses' sim_* parameters). docs/loadgen.md.
#ifndef NEUPIMS_TOOLS_LOADGEN_CNN_LOAD_H_
#define NEUPIMS_TOOLS_LOADGEN_CNN_LOAD_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "common/stats.h"
#include "tools/loadgen/loadgen.h"

namespace neupims::loadgen {

struct CnnLoadOptions {
  std::string server = "127.0.0.1:50051";
  std::string model;
  int64_t requests = 200;
  int concurrency = 8;  // closed loop
  double rate = 0;      // requests/s; > 0: Poisson open loop instead of the closed loop
  int64_t batch = 1;    // images per request
  uint64_t seed = 0;
  double timeout_s = 600;
  double connect_timeout_s = 10;
  std::string auth_token;  // sent as `authorization: Bearer` metadata; empty: none
  TlsClientOptions tls;    // TLS towards the server (loadgen.h); empty: plaintext
};

struct CnnLoadResult {
  std::string model, partition, policy;
  int64_t ok = 0, failed = 0, images = 0;
  std::string first_error;
  double wall_s = 0;
  double client_images_per_s = 0;
  double sim_images_per_s = 0;  // images / (last simulated completion - first arrival)
  Summary client_latency_s, sim_latency_s, sim_queue_s;
  double sim_energy_per_image_j = 0;
};

// Fails (setup) when the server is unreachable or does not serve `model`; failed requests are
// counted, not fatal.
absl::StatusOr<CnnLoadResult> RunCnnLoad(const CnnLoadOptions& options);
void PrintCnnSummary(const CnnLoadOptions& options, const CnnLoadResult& result, FILE* out);

}  // namespace neupims::loadgen

#endif  // NEUPIMS_TOOLS_LOADGEN_CNN_LOAD_H_
