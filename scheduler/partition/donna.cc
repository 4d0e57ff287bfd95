#include "scheduler/partition/donna.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace neupims::scheduler::partition {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxDevices = 10;  // the state space grows as 2^devices

// O(1) stage costs from prefix sums over the layers, per device.
class StageCosts {
 public:
  explicit StageCosts(const Profile& p) : p_(p) {
    const size_t n = p.layers.size();
    time_.assign(p.devices.size(), std::vector<double>(n + 1, 0));
    energy_ = time_;
    blocked_.assign(p.devices.size(), std::vector<int>(n + 1, 0));
    weights_.assign(n + 1, 0);
    for (size_t d = 0; d < p.devices.size(); ++d) {
      for (size_t l = 0; l < n; ++l) {
        const bool runs = std::isfinite(p.time_s[l][d]) && std::isfinite(p.energy_j[l][d]);
        time_[d][l + 1] = time_[d][l] + (runs ? p.time_s[l][d] : 0);
        energy_[d][l + 1] = energy_[d][l] + (runs ? p.energy_j[l][d] : 0);
        blocked_[d][l + 1] = blocked_[d][l] + (runs ? 0 : 1);
      }
    }
    for (size_t l = 0; l < n; ++l) weights_[l + 1] = weights_[l] + p.layers[l].weight_bytes;
  }

  // Layers [i, j) on device d: false if one cannot run there or the weights do not fit.
  bool Runs(int d, int i, int j) const {
    return blocked_[d][j] == blocked_[d][i] &&
           weights_[j] - weights_[i] <= p_.devices[d].memory_bytes;
  }
  double TimeS(int d, int i, int j) const { return time_[d][j] - time_[d][i]; }
  double EnergyJ(int d, int i, int j) const { return energy_[d][j] - energy_[d][i]; }
  // The cut after the first j layers, shipped from u to v.
  int64_t CutBytes(int j) const { return p_.cut_bytes[j - 1]; }
  double CommS(int u, int v, int j) const { return p_.link[u][v].TimeS(CutBytes(j)); }
  double CommJ(int u, int v, int j) const { return p_.link[u][v].EnergyJ(CutBytes(j)); }

 private:
  const Profile& p_;
  std::vector<std::vector<double>> time_, energy_;
  std::vector<std::vector<int>> blocked_;
  std::vector<int64_t> weights_;
};

// A partial plan: the first `layers` layers placed on the devices of `used`, `next` to take the
// following stage. (T, E) so far in seconds and joules.
struct Label {
  double t = 0;
  double e = 0;
  int pred_state = -1;  // state the label came from (-1: start)
  int pred_label = -1;
};

class Search {
 public:
  Search(const Profile& p, double alpha, bool pareto, bool bounded)
      : p_(p),
        costs_(p),
        norm_(NormalisationOf(p)),
        alpha_(alpha),
        pareto_(pareto),
        bounded_(bounded),
        layers_(static_cast<int>(p.layers.size())),
        devices_(static_cast<int>(p.devices.size())),
        masks_(1 << devices_),
        labels_(static_cast<size_t>(layers_) * masks_ * devices_) {}

  void set_bound(double c) { best_c_ = c; }

  // Runs the recursion; complete plans are reported to `done(state, label, last_device, t, e)`.
  template <typename Done>
  void Run(Done done) {
    for (int u = 0; u < devices_; ++u) labels_[Index(0, 0, u)].push_back(Label{});
    for (int i = 0; i < layers_; ++i) {
      for (int s = 0; s < masks_; ++s) {
        for (int u = 0; u < devices_; ++u) {
          if (s & (1 << u)) continue;
          const int state = Index(i, s, u);
          for (int k = 0; k < static_cast<int>(labels_[state].size()); ++k) {
            Expand(i, s, u, state, k, done);
          }
        }
      }
    }
  }

  // Walks a complete label back into stages (device, last layer).
  std::vector<Stage> Trace(int state, int label, int last_device) const {
    std::vector<Stage> stages;
    Stage last;
    last.device = last_device;
    last.last_layer = layers_ - 1;
    stages.push_back(last);
    while (state >= 0) {
      const int i = state / (masks_ * devices_);
      const Label& l = labels_[state][label];
      if (i == 0) break;
      Stage s;
      s.device = DeviceOf(l.pred_state);
      s.last_layer = i - 1;
      stages.push_back(s);
      state = l.pred_state;
      label = l.pred_label;
    }
    std::reverse(stages.begin(), stages.end());
    return stages;
  }

  double Cost(double t, double e) const {
    return alpha_ * t / norm_.time_s + (1 - alpha_) * e / norm_.energy_j;
  }

 private:
  int Index(int i, int s, int u) const { return (i * masks_ + s) * devices_ + u; }
  int DeviceOf(int state) const { return state % devices_; }

  template <typename Done>
  void Expand(int i, int s, int u, int state, int k, Done& done) {
    const Label from = labels_[state][k];
    for (int j = i + 1; j <= layers_; ++j) {
      if (!costs_.Runs(u, i, j)) break;  // a longer stage cannot run either
      const double t_comp = std::max(from.t, costs_.TimeS(u, i, j));
      const double e_comp = from.e + costs_.EnergyJ(u, i, j);
      if (bounded_ && Cost(t_comp, e_comp) >= best_c_) break;  // only grows with j
      if (j == layers_) {
        if (Cost(t_comp, e_comp) < best_c_ || !bounded_) done(state, k, u, t_comp, e_comp);
        continue;
      }
      const int used = s | (1 << u);
      for (int v = 0; v < devices_; ++v) {
        if (used & (1 << v)) continue;
        const Label next{std::max(t_comp, costs_.CommS(u, v, j)), e_comp + costs_.CommJ(u, v, j),
                         state, k};
        if (bounded_ && Cost(next.t, next.e) >= best_c_) continue;
        Offer(Index(j, used, v), next);
      }
    }
  }

  // Keeps the label of least C (published) or every non-dominated label (exact).
  void Offer(int state, const Label& l) {
    std::vector<Label>& ls = labels_[state];
    if (!pareto_) {
      if (ls.empty()) {
        ls.push_back(l);
      } else if (Cost(l.t, l.e) < Cost(ls[0].t, ls[0].e)) {
        ls[0] = l;
      }
      return;
    }
    for (const Label& o : ls) {
      if (o.t <= l.t && o.e <= l.e) return;
    }
    // Labels already expanded are never removed: their successors may point at them. Only the
    // states ahead of the sweep (j > i) receive offers, so nothing here has been expanded yet.
    ls.erase(std::remove_if(ls.begin(), ls.end(),
                            [&](const Label& o) { return l.t <= o.t && l.e <= o.e; }),
             ls.end());
    ls.push_back(l);
  }

  const Profile& p_;
  StageCosts costs_;
  Normalisation norm_;
  double alpha_;
  bool pareto_;
  bool bounded_;
  int layers_, devices_, masks_;
  std::vector<std::vector<Label>> labels_;
  double best_c_ = kInf;
};

absl::Status CheckProblem(const Profile& p, double alpha) {
  RETURN_IF_ERROR(p.Validate());
  if (!(alpha >= 0 && alpha <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha must be in [0, 1], got ", alpha));
  }
  if (p.devices.size() > kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxDevices,
                                                   " devices (the search is exponential in "
                                                   "them), got ",
                                                   p.devices.size()));
  }
  return absl::OkStatus();
}

absl::Status NoPlan(const Profile& p) {
  return absl::FailedPreconditionError(
      absl::StrCat("no partition of ", p.model,
                   " fits the cluster: some layer runs on no device, or no "
                   "device set holds the weights"));
}

absl::StatusOr<Plan> Solve(const Profile& p, double alpha, bool pareto, double bound) {
  RETURN_IF_ERROR(CheckProblem(p, alpha));
  Search search(p, alpha, pareto, /*bounded=*/true);
  search.set_bound(bound);
  double best = kInf;
  std::vector<Stage> stages;
  search.Run([&](int state, int label, int u, double t, double e) {
    const double c = search.Cost(t, e);
    if (c < best) {
      best = c;
      search.set_bound(c);
      stages = search.Trace(state, label, u);
    }
  });
  if (stages.empty()) return NoPlan(p);
  return PricePlan(p, stages, alpha);
}

}  // namespace

absl::Status Profile::Validate() const {
  const size_t n = layers.size(), d = devices.size();
  if (n == 0 || d == 0) return absl::InvalidArgumentError("profile needs layers and devices");
  if (time_s.size() != n || energy_j.size() != n || cut_bytes.size() + 1 != n || link.size() != d) {
    return absl::InvalidArgumentError("profile tables do not match its layers and devices");
  }
  for (size_t l = 0; l < n; ++l) {
    if (time_s[l].size() != d || energy_j[l].size() != d) {
      return absl::InvalidArgumentError(absl::StrCat("profile row of layer '", layers[l].name,
                                                     "' does not have one entry per device"));
    }
    for (size_t k = 0; k < d; ++k) {
      if (!(time_s[l][k] >= 0) || !(energy_j[l][k] >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat("layer '", layers[l].name, "' on '",
                                                       devices[k].name, "': negative or NaN cost"));
      }
    }
  }
  for (size_t a = 0; a < d; ++a) {
    if (link[a].size() != d) return absl::InvalidArgumentError("link matrix is not square");
    for (size_t b = 0; b < d; ++b) {
      if (a != b && !(link[a][b].bytes_per_s > 0 && link[a][b].joules_per_bit >= 0 &&
                      link[a][b].latency_s >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat("link ", devices[a].name, " -> ",
                                                       devices[b].name,
                                                       " needs bandwidth > 0 and costs >= 0"));
      }
    }
  }
  return absl::OkStatus();
}

Normalisation NormalisationOf(const Profile& p) {
  Normalisation n{0, 0};
  for (size_t l = 0; l < p.layers.size(); ++l) {
    for (size_t d = 0; d < p.devices.size(); ++d) {
      if (std::isfinite(p.time_s[l][d])) n.time_s = std::max(n.time_s, p.time_s[l][d]);
      if (std::isfinite(p.energy_j[l][d])) n.energy_j = std::max(n.energy_j, p.energy_j[l][d]);
    }
  }
  for (int64_t bytes : p.cut_bytes) {
    for (size_t a = 0; a < p.devices.size(); ++a) {
      for (size_t b = 0; b < p.devices.size(); ++b) {
        if (a == b) continue;
        n.time_s = std::max(n.time_s, p.link[a][b].TimeS(bytes));
        n.energy_j = std::max(n.energy_j, p.link[a][b].EnergyJ(bytes));
      }
    }
  }
  if (!(n.time_s > 0)) n.time_s = 1;
  if (!(n.energy_j > 0)) n.energy_j = 1;
  return n;
}

absl::StatusOr<Plan> PricePlan(const Profile& p, const std::vector<Stage>& stages, double alpha) {
  RETURN_IF_ERROR(p.Validate());
  const StageCosts costs(p);
  Plan plan;
  int first = 0;
  std::vector<bool> used(p.devices.size(), false);
  for (size_t k = 0; k < stages.size(); ++k) {
    Stage s = stages[k];
    const int d = s.device;
    if (d < 0 || d >= static_cast<int>(p.devices.size()) || used[d]) {
      return absl::InvalidArgumentError("each stage needs its own device of the cluster");
    }
    used[d] = true;
    const int end = s.last_layer + 1;
    if (end <= first || end > static_cast<int>(p.layers.size())) {
      return absl::InvalidArgumentError("stages must cover the layers in order");
    }
    if (!costs.Runs(d, first, end)) {
      return absl::InvalidArgumentError(
          absl::StrCat("layers ", p.layers[first].name, "..", p.layers[end - 1].name,
                       " cannot run on ", p.devices[d].name, " (unsupported or too large)"));
    }
    s.first_layer = first;
    s.compute_s = costs.TimeS(d, first, end);
    s.compute_energy_j = costs.EnergyJ(d, first, end);
    s.transfer_s = s.transfer_energy_j = 0;
    s.transfer_bytes = 0;
    if (k + 1 < stages.size()) {
      const int v = stages[k + 1].device;
      if (v < 0 || v >= static_cast<int>(p.devices.size())) {
        return absl::InvalidArgumentError("stage device outside the cluster");
      }
      s.transfer_bytes = costs.CutBytes(end);
      s.transfer_s = costs.CommS(d, v, end);
      s.transfer_energy_j = costs.CommJ(d, v, end);
    }
    plan.bottleneck_s = std::max(plan.bottleneck_s, s.time_s());
    plan.energy_j += s.compute_energy_j + s.transfer_energy_j;
    plan.stages.push_back(s);
    first = end;
  }
  if (first != static_cast<int>(p.layers.size())) {
    return absl::InvalidArgumentError("stages must cover every layer");
  }
  const Normalisation n = NormalisationOf(p);
  plan.objective = alpha * plan.bottleneck_s / n.time_s + (1 - alpha) * plan.energy_j / n.energy_j;
  return plan;
}

absl::StatusOr<Plan> DonnaPublished(const Profile& p, double alpha) {
  return Solve(p, alpha, /*pareto=*/false, kInf);
}

absl::StatusOr<Plan> DonnaExact(const Profile& p, double alpha) {
  // The published programme's plan is achievable, so its cost bounds the exact search.
  absl::StatusOr<Plan> seed = DonnaPublished(p, alpha);
  if (!seed.ok()) return seed.status();
  return Solve(p, alpha, /*pareto=*/true, seed->objective * (1 + 1e-12));
}

absl::StatusOr<Plan> BruteForcePartition(const Profile& p, double alpha) {
  RETURN_IF_ERROR(CheckProblem(p, alpha));
  const int layers = static_cast<int>(p.layers.size());
  const int devices = static_cast<int>(p.devices.size());
  std::optional<Plan> best;
  std::vector<Stage> stages;
  std::vector<bool> used(devices, false);
  // Every ordered sequence of distinct devices with every set of cut points.
  auto recurse = [&](auto& self, int first) -> void {
    if (first == layers) {
      absl::StatusOr<Plan> plan = PricePlan(p, stages, alpha);
      if (plan.ok() && (!best || plan->objective < best->objective)) best = *plan;
      return;
    }
    for (int d = 0; d < devices; ++d) {
      if (used[d]) continue;
      used[d] = true;
      for (int last = first; last < layers; ++last) {
        Stage s;
        s.device = d;
        s.last_layer = last;
        stages.push_back(s);
        self(self, last + 1);
        stages.pop_back();
      }
      used[d] = false;
    }
  };
  recurse(recurse, 0);
  if (!best) return NoPlan(p);
  return *best;
}

absl::StatusOr<std::vector<Plan>> ParetoFront(const Profile& p) {
  RETURN_IF_ERROR(CheckProblem(p, 1.0));
  Search search(p, 1.0, /*pareto=*/true, /*bounded=*/false);
  std::vector<std::pair<double, double>> points;
  std::vector<std::vector<Stage>> plans;
  search.Run([&](int state, int label, int u, double t, double e) {
    for (const auto& [pt, pe] : points) {
      if (pt <= t && pe <= e) return;
    }
    points.push_back({t, e});
    plans.push_back(search.Trace(state, label, u));
  });
  std::vector<Plan> front;
  for (size_t i = 0; i < points.size(); ++i) {
    bool dominated = false;
    for (size_t k = 0; k < points.size() && !dominated; ++k) {
      dominated = k != i && points[k].first <= points[i].first &&
                  points[k].second <= points[i].second && points[k] != points[i];
    }
    if (dominated) continue;
    ASSIGN_OR_RETURN(Plan plan, PricePlan(p, plans[i], 1.0));
    front.push_back(std::move(plan));
  }
  std::sort(front.begin(), front.end(),
            [](const Plan& a, const Plan& b) { return a.bottleneck_s < b.bottleneck_s; });
  // Equal points reached by different plans: keep one.
  front.erase(std::unique(front.begin(), front.end(),
                          [](const Plan& a, const Plan& b) {
                            return a.bottleneck_s == b.bottleneck_s && a.energy_j == b.energy_j;
                          }),
              front.end());
  if (front.empty()) return NoPlan(p);
  return front;
}

}  // namespace neupims::scheduler::partition
