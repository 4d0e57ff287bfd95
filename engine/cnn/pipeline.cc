#include "engine/cnn/pipeline.h"

#include <algorithm>
#include <limits>
#include <utility>

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
    p.AddStep({.name = dev, .device = dev}, s.compute_s, s.compute_energy_j);
    if (k + 1 < plan.stages.size()) {
      const std::string& next = profile.devices[plan.stages[k + 1].device].name;
      p.AddStep({.name = absl::StrCat(dev, "->", next), .device = dev, .link = true}, s.transfer_s,
                s.transfer_energy_j);
    }
  }
  p.booked_.resize(p.resources_.size());
  return p;
}

void Pipeline::AddStep(PipelineResource resource, double service_s, double energy_j) {
  size_t r = 0;
  while (r < resources_.size() && resources_[r].name != resource.name) ++r;
  if (r == resources_.size()) resources_.push_back(std::move(resource));
  resources_[r].service_s += service_s;
  resources_[r].energy_j += energy_j;
  path_.push_back({.resource = static_cast<int>(r), .service_s = service_s, .energy_j = energy_j});
}

double Pipeline::EarliestFit(int resource, double ready_s, double length_s) const {
  double start = ready_s;
  for (const Interval& i : booked_[resource]) {
    if (i.end_s <= start) continue;
    if (i.start_s >= start + length_s) break;  // the gap before this interval is long enough
    start = i.end_s;
  }
  return start;
}

void Pipeline::Book(int resource, double start_s, double end_s) {
  if (end_s <= start_s) return;  // a zero-time step occupies nothing
  std::vector<Interval>& b = booked_[resource];
  auto at = std::upper_bound(b.begin(), b.end(), start_s,
                             [](double t, const Interval& i) { return t < i.start_s; });
  b.insert(at, {start_s, end_s});
}

absl::StatusOr<PipelineCompletion> Pipeline::Submit(int64_t id, double arrival_s) {
  if (arrival_s < last_arrival_s_) {
    return absl::InvalidArgumentError(absl::StrCat("arrival ", arrival_s,
                                                   " s is before the previous arrival ",
                                                   last_arrival_s_, " s (FIFO pipeline)"));
  }
  last_arrival_s_ = arrival_s;
  for (std::vector<Interval>& b : booked_) {
    std::erase_if(b, [&](const Interval& i) { return i.end_s <= arrival_s; });
  }
  PipelineCompletion c{.id = id, .arrival_s = arrival_s};
  double ready = arrival_s;
  for (const Step& s : path_) {
    const double start = EarliestFit(s.resource, ready, s.service_s);
    c.queue_s += start - ready;
    ready = start + s.service_s;
    Book(s.resource, start, ready);
    c.energy_j += s.energy_j;
  }
  c.completion_s = ready;
  pending_.push(c);
  return c;
}

double Pipeline::EarliestUnqueuedArrival(double after_s) const {
  // Entering at t, the image reaches step k at t + (service of the steps before k); on a clash
  // with a booked interval, t moves so that step starts at the interval's end, and all is
  // rechecked.
  double t = std::max(after_s, last_arrival_s_);
  for (bool moved = true; moved;) {
    moved = false;
    double offset = 0;
    for (const Step& s : path_) {
      const double start = EarliestFit(s.resource, t + offset, s.service_s);
      if (start > t + offset) {
        t = start - offset;
        moved = true;
        break;
      }
      offset += s.service_s;
    }
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
