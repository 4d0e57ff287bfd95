// Steady-state decode throughput of one engine configuration, as `neupims experiments` and
// `neupims sweep` measure it (NeuPIMs sec. 8.1): batches sampled in steady state from a
// dataset's lengths, one full decode iteration each, averaged.
#ifndef NEUPIMS_TOOLS_NEUPIMS_STEP_EVAL_H_
#define NEUPIMS_TOOLS_NEUPIMS_STEP_EVAL_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"
#include "tools/workload/workload.h"

namespace neupims::cli {

// Decode batches in steady state ("simulate the inference serving for a fixed amount of time ...
// warm up the batch ... sample 10 batches"): in a warm batch a request is seen with probability
// proportional to the iterations it stays (its output length) and at a uniformly random point of
// its generation, so its sequence length is prompt + U * output (renewal theory; no simulation
// of the warm-up needed).
class BatchSampler {
 public:
  BatchSampler(std::vector<workload::LengthPair> lengths, uint64_t seed);
  std::vector<engine::Engine::StepRequest> Sample(int batch);

 private:
  std::vector<workload::LengthPair> lengths_;
  std::mt19937_64 rng_;
  std::discrete_distribution<size_t> pick_;
};

using Batches = std::vector<std::vector<engine::Engine::StepRequest>>;

// Mean over the batches of one configuration; ok = false with the error if a step failed.
struct StepResult {
  double tokens_per_s = 0;
  double npu = 0, pim = 0, bw = 0;  // systolic, PIM MAC and NPU HBM-bandwidth utilisation
  bool ok = false;
  std::string error;
};
StepResult Evaluate(engine::Engine& e, const Batches& batches);

// Lossless JSON round trip (doubles print with 17 significant digits), for shard files.
nlohmann::json ToJson(const StepResult& r);
absl::StatusOr<StepResult> StepResultFromJson(const nlohmann::json& j);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_STEP_EVAL_H_
