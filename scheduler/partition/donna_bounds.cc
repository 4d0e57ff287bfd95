#include "scheduler/partition/donna_bounds.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

namespace neupims::scheduler::partition {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The cheapest energy and time of one cut after k layers for some k > j, on any link.
struct CutFloors {
  std::vector<double> energy_j, time_s;  // per j
};
CutFloors CutFloorsOf(const Profile& p) {
  const int layers = static_cast<int>(p.layers.size());
  const int n = static_cast<int>(p.devices.size());
  CutFloors f{std::vector<double>(layers + 1, kInf), std::vector<double>(layers + 1, kInf)};
  for (int j = layers - 2; j >= 0; --j) {
    double e = kInf, t = kInf;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a == b) continue;
        e = std::min(e, p.link[a][b].EnergyJ(p.cut_bytes[j]));
        t = std::min(t, p.link[a][b].TimeS(p.cut_bytes[j]));
      }
    }
    f.energy_j[j] = std::min(f.energy_j[j + 1], e);
    f.time_s[j] = std::min(f.time_s[j + 1], t);
  }
  return f;
}

bool Runs(const Profile& p, int l, int d) {
  return std::isfinite(p.time_s[l][d]) && std::isfinite(p.energy_j[l][d]);
}

}  // namespace

RestBounds::RestBounds(const Profile& p, double weight_t, double weight_e,
                       std::vector<std::vector<int>> free_columns)
    : p_(p),
      columns_(std::move(free_columns)),
      layers_(static_cast<int>(p.layers.size())),
      weight_t_(weight_t),
      weight_e_(weight_e) {
  CutFloors cuts = CutFloorsOf(p);
  cut_e_ = std::move(cuts.energy_j);
  cut_t_ = std::move(cuts.time_s);
  size_t rows = 0;
  for (const std::vector<int>& columns : columns_) {
    free_.push_back(static_cast<int>(columns.size()));
    first_.push_back(rows);
    rows += static_cast<size_t>(layers_ + 1) * columns.size();
  }
  filled_.assign(columns_.size(), 0);
  per_stages_.reset(new PerStages[rows]);
  stage_floor_.reset(new StageFloor[columns_.size() * (layers_ + 1)]);
}

// Sweeps the layers from the last to the first, keeping the sums over the layers left, and
// writes every j's floors for m = 1 .. free devices.
void RestBounds::FillState(int s) const {
  const std::vector<int>& columns = columns_[s];
  const int free = static_cast<int>(columns.size());
  double e_sum = 0, t_sum = 0, t_max = 0;
  std::vector<double> joint(free + 1, 0);    // [m]
  std::vector<double> slowdown(free, kInf);  // per free device
  std::vector<double> speed(free);
  std::vector<double> layer_t(free), layer_e(free);  // per free device that runs layer j
  std::vector<int> runs_on(free);                    // its index in `columns`
  StageFloor* floors = &stage_floor_[static_cast<size_t>(s) * (layers_ + 1)];
  for (int j = layers_; j >= 0; --j) {
    if (j < layers_) {
      // Layer j's time and energy on the free devices that run it.
      int runs = 0;
      for (int k = 0; k < free; ++k) {
        if (!Runs(p_, j, columns[k])) continue;
        layer_t[runs] = p_.time_s[j][columns[k]];
        layer_e[runs] = p_.energy_j[j][columns[k]];
        runs_on[runs++] = k;
      }
      double t = kInf, e = kInf;
      for (int r = 0; r < runs; ++r) {
        t = std::min(t, layer_t[r]);
        e = std::min(e, layer_e[r]);
      }
      for (int m = 1; m <= free; ++m) {
        const double w_t = weight_t_ / m;
        double mix = kInf;
        for (int r = 0; r < runs; ++r)
          mix = std::min(mix, w_t * layer_t[r] + weight_e_ * layer_e[r]);
        joint[m] += mix;
      }
      for (int r = 0; r < runs && t > 0; ++r) {
        slowdown[runs_on[r]] = std::min(slowdown[runs_on[r]], layer_t[r] / t);
      }
      e_sum += e;
      t_sum += t;
      t_max = std::max(t_max, t);
    }
    for (int k = 0; k < free; ++k) speed[k] = std::isfinite(slowdown[k]) ? 1 / slowdown[k] : 0;
    std::sort(speed.begin(), speed.end(), std::greater<>());
    floors[j] = {e_sum, joint[free]};
    double capacity = 0;
    for (int m = 1; m <= free; ++m) {
      capacity += speed[m - 1];
      const double cuts = m > 1 ? (m - 1) * cut_e_[j] : 0;
      const double spread = t_sum > 0 ? t_sum / capacity : 0;
      per_stages_[first_[s] + static_cast<size_t>(j) * free + m - 1] = {
          std::max({t_max, spread, m > 1 ? cut_t_[j] : 0}), e_sum + cuts,
          joint[m] + weight_e_ * cuts};
    }
  }
  filled_[s] = 1;
}

RestBounds::State RestBounds::Of(int s) const {
  if (!filled_[s]) FillState(s);
  State state;
  state.rows_ = &per_stages_[first_[s]];
  state.floors_ = &stage_floor_[static_cast<size_t>(s) * (layers_ + 1)];
  state.free_ = free_[s];
  state.layers_ = layers_;
  state.w_t_ = weight_t_;
  state.w_e_ = weight_e_;
  return state;
}

double RestBounds::State::Floor(double t, double e, int j) const {
  const PerStages* f = &rows_[static_cast<size_t>(j) * free_];
  const int stages = std::min(free_, layers_ - j);
  double floor = kInf;
  for (int m = 0; m < stages; ++m) {
    const double split = w_t_ * std::max(t, f[m].t_s) + w_e_ * (e + f[m].e_j);
    const double c = std::max(split, w_e_ * e + f[m].joint);
    if (c < floor) floor = c;  // a NaN (0 x infinity: that m cannot be) is never less
  }
  return floor;
}

}  // namespace neupims::scheduler::partition
