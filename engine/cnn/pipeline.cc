#include "engine/cnn/pipeline.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace neupims::engine::cnn {

absl::StatusOr<Pipeline> Pipeline::Create(const scheduler::partition::Profile& profile,
                                          const scheduler::partition::Plan& plan) {
  if (plan.stages.empty()) return absl::InvalidArgumentError("the plan has no stages");
  Pipeline p;
  for (size_t k = 0; k < plan.stages.size(); ++k) {
    const scheduler::partition::Stage& s = plan.stages[k];
    if (s.device < 0 || s.device >= static_cast<int>(profile.devices.size()) || s.compute_s < 0 ||
        s.transfer_s < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan stage ", k, ": bad device index or negative time"));
    }
    const std::string& dev = profile.devices[s.device].name;
    p.resources_.push_back(
        {.name = dev, .device = dev, .service_s = s.compute_s, .energy_j = s.compute_energy_j});
    if (k + 1 < plan.stages.size()) {
      const std::string& next = profile.devices[plan.stages[k + 1].device].name;
      p.resources_.push_back({.name = absl::StrCat(dev, "->", next),
                              .device = dev,
                              .link = true,
                              .service_s = s.transfer_s,
                              .energy_j = s.transfer_energy_j});
    }
  }
  p.free_at_s_.assign(p.resources_.size(), 0.0);
  return p;
}

absl::StatusOr<PipelineCompletion> Pipeline::Submit(int64_t id, double arrival_s) {
  if (arrival_s < last_arrival_s_) {
    return absl::InvalidArgumentError(absl::StrCat("arrival ", arrival_s,
                                                   " s is before the previous arrival ",
                                                   last_arrival_s_, " s (FIFO pipeline)"));
  }
  last_arrival_s_ = arrival_s;
  PipelineCompletion c{.id = id, .arrival_s = arrival_s};
  double ready = arrival_s;
  for (size_t r = 0; r < resources_.size(); ++r) {
    const double start = std::max(ready, free_at_s_[r]);
    c.queue_s += start - ready;
    ready = start + resources_[r].service_s;
    free_at_s_[r] = ready;
    c.energy_j += resources_[r].energy_j;
  }
  c.completion_s = ready;
  pending_.push(c);
  return c;
}

double Pipeline::EarliestUnqueuedArrival(double after_s) const {
  // Entering at t, the image reaches resource r at t + (service of the resources before r).
  double t = std::max(after_s, last_arrival_s_);
  double offset = 0;
  for (size_t r = 0; r < resources_.size(); ++r) {
    t = std::max(t, free_at_s_[r] - offset);
    offset += resources_[r].service_s;
  }
  return t;
}

std::vector<PipelineCompletion> Pipeline::AdvanceTo(double t) {
  std::vector<PipelineCompletion> out;
  while (!pending_.empty() && pending_.top().completion_s <= t) {
    out.push_back(pending_.top());
    pending_.pop();
    for (PipelineResource& r : resources_) {
      r.busy_s += r.service_s;
      r.total_energy_j += r.energy_j;
    }
  }
  now_s_ = std::max(now_s_, t);
  return out;
}

double Pipeline::next_completion_s() const {
  return pending_.empty() ? std::numeric_limits<double>::infinity() : pending_.top().completion_s;
}

double Pipeline::latency_s() const {
  double sum = 0;
  for (const PipelineResource& r : resources_) sum += r.service_s;
  return sum;
}

double Pipeline::bottleneck_s() const {
  double m = 0;
  for (const PipelineResource& r : resources_) m = std::max(m, r.service_s);
  return m;
}

double Pipeline::energy_per_request_j() const {
  double sum = 0;
  for (const PipelineResource& r : resources_) sum += r.energy_j;
  return sum;
}

}  // namespace neupims::engine::cnn
