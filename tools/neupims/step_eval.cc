#include "tools/neupims/step_eval.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace neupims::cli {

BatchSampler::BatchSampler(std::vector<workload::LengthPair> lengths, uint64_t seed)
    : lengths_(std::move(lengths)), rng_(seed) {
  std::vector<double> weights;
  for (const auto& l : lengths_) weights.push_back(static_cast<double>(l.output_tokens));
  pick_ = std::discrete_distribution<size_t>(weights.begin(), weights.end());
}

std::vector<engine::Engine::StepRequest> BatchSampler::Sample(int batch) {
  std::vector<engine::Engine::StepRequest> out;
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < batch; ++i) {
    const workload::LengthPair& l = lengths_[pick_(rng_)];
    const int64_t done = static_cast<int64_t>(u(rng_) * static_cast<double>(l.output_tokens));
    out.push_back({l.prompt_tokens + done + 1, -1});
  }
  return out;
}

StepResult Evaluate(engine::Engine& e, const Batches& batches) {
  StepResult r;
  double tput = 0, npu = 0, pim = 0, bw = 0;
  const hw::DeviceConfig& dev = e.device();
  for (const auto& b : batches) {
    auto c = e.SimulateStep(b, 0, false);
    if (!c.ok()) {
      r.error = std::string(c.status().message());
      return r;
    }
    const double d = c->duration_ns;
    tput += static_cast<double>(b.size()) / (d * 1e-9);
    npu += c->systolic_busy_ns / d;
    pim += c->pim_mac_ns / dev.hbm.org.channels / d;
    bw += c->npu_hbm_bytes / (dev.PeakHbmBytesPerSecond() * 1e-9) / d;
  }
  const double n = static_cast<double>(batches.size());
  r.tokens_per_s = tput / n;
  r.npu = npu / n;
  r.pim = pim / n;
  r.bw = bw / n;
  r.ok = true;
  return r;
}

nlohmann::json ToJson(const StepResult& r) {
  return {{"ok", r.ok},   {"error", r.error}, {"tokens_per_s", r.tokens_per_s},
          {"npu", r.npu}, {"pim", r.pim},     {"bw", r.bw}};
}

absl::StatusOr<StepResult> StepResultFromJson(const nlohmann::json& j) {
  StepResult r;
  try {
    r.ok = j.at("ok").get<bool>();
    r.error = j.at("error").get<std::string>();
    r.tokens_per_s = j.at("tokens_per_s").get<double>();
    r.npu = j.at("npu").get<double>();
    r.pim = j.at("pim").get<double>();
    r.bw = j.at("bw").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad step result ", j.dump(), ": ", e.what()));
  }
  return r;
}

}  // namespace neupims::cli
