// DONNA's programme (paper 003, sec. II-B, Algorithm 1) written plainly, as the oracle of what
// DonnaPublished must return: one label (T, E) per state (layers placed, set of devices used,
// device of the next stage), the one of least C = w_t T + w_e E, no pruning, no classes of
// interchangeable devices, no shared slots, no bounds. O(L^2 2^D D^2): for tests only.
#ifndef NEUPIMS_TESTS_SCHEDULER_PARTITION_PLAIN_DONNA_H_
#define NEUPIMS_TESTS_SCHEDULER_PARTITION_PLAIN_DONNA_H_

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/partition/donna.h"
#include "scheduler/partition/profile.h"

namespace neupims::scheduler::partition {

// The plain sweep's plan, priced by PricePlan (NotFound when no plan fits). Stage costs are
// differences of per-device prefix sums, as in the solvers, so that the two round alike.
inline absl::StatusOr<Plan> PlainPublished(const Profile& p, double alpha) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  const int layers = static_cast<int>(p.layers.size());
  const int devices = static_cast<int>(p.devices.size());
  const Normalisation n = NormalisationOf(p);
  const double w_t = alpha / n.time_s, w_e = (1 - alpha) / n.energy_j;
  std::vector<std::vector<double>> time(devices, std::vector<double>(layers + 1, 0));
  std::vector<std::vector<double>> energy = time;
  for (int d = 0; d < devices; ++d) {
    for (int l = 0; l < layers; ++l) {
      const bool runs = std::isfinite(p.time_s[l][d]) && std::isfinite(p.energy_j[l][d]);
      time[d][l + 1] = time[d][l] + (runs ? p.time_s[l][d] : 0);
      energy[d][l + 1] = energy[d][l] + (runs ? p.energy_j[l][d] : 0);
    }
  }
  struct Label {
    double t = kInf, e = kInf, c = kInf;
    size_t pred = kNone;  // the state whose label's stage led here
  };
  const int masks = 1 << devices;
  auto at = [&](int i, int mask, int u) -> size_t {
    return (static_cast<size_t>(i) * masks + mask) * devices + u;
  };
  std::vector<Label> best(static_cast<size_t>(layers) * masks * devices);
  for (int u = 0; u < devices; ++u) {
    if (!p.input_device || *p.input_device == u) best[at(0, 0, u)] = {0, 0, 0, kNone};
  }
  double answer = kInf;
  size_t answer_state = kNone;
  for (int i = 0; i < layers; ++i) {
    for (int mask = 0; mask < masks; ++mask) {
      for (int u = 0; u < devices; ++u) {
        const Label from = best[at(i, mask, u)];
        if (from.c == kInf || (mask >> u & 1)) continue;
        int64_t weights = 0;
        for (int j = i + 1; j <= layers; ++j) {  // the stage [i, j) on u
          const int l = j - 1;
          weights += p.layers[l].weight_bytes;
          if (!std::isfinite(p.time_s[l][u]) || !std::isfinite(p.energy_j[l][u]) ||
              weights > p.devices[u].memory_bytes) {
            break;
          }
          const double t = std::max(from.t, time[u][j] - time[u][i]);
          const double e = from.e + (energy[u][j] - energy[u][i]);
          if (j == layers) {
            if (w_t * t + w_e * e < answer) {
              answer = w_t * t + w_e * e;
              answer_state = at(i, mask, u);
            }
            continue;
          }
          for (int v = 0; v < devices; ++v) {
            if ((mask | 1 << u) >> v & 1) continue;
            const LinkCost& link = p.link[u][v];
            const double t2 = std::max(t, link.TimeS(p.cut_bytes[j - 1]));
            const double e2 = e + link.EnergyJ(p.cut_bytes[j - 1]);
            const double c2 = w_t * t2 + w_e * e2;
            Label& to = best[at(j, mask | 1 << u, v)];
            if (c2 < to.c) to = {t2, e2, c2, at(i, mask, u)};
          }
        }
      }
    }
  }
  if (answer_state == kNone) return absl::NotFoundError("no plan fits");
  // Walk back: state (i, mask, u) holds the plan up to layer i, whose next stage runs on u.
  std::vector<Stage> stages;
  int last = layers - 1;
  for (size_t state = answer_state; state != kNone; state = best[state].pred) {
    Stage s;
    s.device = static_cast<int>(state % devices);
    s.last_layer = last;
    stages.insert(stages.begin(), s);
    last = static_cast<int>(state / devices / masks) - 1;
  }
  return PricePlan(p, stages, alpha);
}

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_TESTS_SCHEDULER_PARTITION_PLAIN_DONNA_H_
