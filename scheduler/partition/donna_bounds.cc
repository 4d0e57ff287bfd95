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

void RestBounds::LayerCosts(const std::vector<int>& columns, int j, LayerOnFree* out) const {
  out->t.clear();
  out->e.clear();
  out->device.clear();
  for (size_t k = 0; k < columns.size(); ++k) {
    if (!Runs(p_, j, columns[k])) continue;
    out->t.push_back(p_.time_s[j][columns[k]]);
    out->e.push_back(p_.energy_j[j][columns[k]]);
    out->device.push_back(static_cast<int>(k));
  }
}

// Sweeps the layers from the last to the first, keeping the sums over the layers left (the
// cheapest energy and time of each, its cheapest alpha-weighted mix per m, the slowest fastest
// time, each free device's least slowdown), and writes every j's floors for m = 1 .. free.
void RestBounds::FillState(int s) const {
  const std::vector<int>& columns = columns_[s];
  const int free = static_cast<int>(columns.size());
  double e_sum = 0, t_sum = 0, t_max = 0;
  std::vector<double> joint(free + 1, 0);    // [m]
  std::vector<double> slowdown(free, kInf);  // per free device
  std::vector<double> speed(free);
  LayerOnFree layer;
  StageFloor* floors = &stage_floor_[static_cast<size_t>(s) * (layers_ + 1)];
  for (int j = layers_; j >= 0; --j) {
    if (j < layers_) {
      LayerCosts(columns, j, &layer);
      const double t = layer.t.empty() ? kInf : *std::min_element(layer.t.begin(), layer.t.end());
      const double e = layer.e.empty() ? kInf : *std::min_element(layer.e.begin(), layer.e.end());
      for (int m = 1; m <= free; ++m) {
        double mix = kInf;
        for (size_t r = 0; r < layer.t.size(); ++r)
          mix = std::min(mix, weight_t_ / m * layer.t[r] + weight_e_ * layer.e[r]);
        joint[m] += mix;
      }
      for (size_t r = 0; r < layer.t.size() && t > 0; ++r) {
        slowdown[layer.device[r]] = std::min(slowdown[layer.device[r]], layer.t[r] / t);
      }
      e_sum += e;
      t_sum += t;
      t_max = std::max(t_max, t);
    }
    for (int k = 0; k < free; ++k) speed[k] = std::isfinite(slowdown[k]) ? 1 / slowdown[k] : 0;
    std::sort(speed.begin(), speed.end(), std::greater<>());
    floors[j] = {e_sum, joint[free]};
    WriteRows(s, j, t_max, t_sum, e_sum, joint, speed);
  }
  filled_[s] = 1;
}

// Used-state s's floors after j for m = 1 .. free stages: T at least the slowest layer, the
// fastest times over the m fastest devices' capacity, and a cut if m > 1; m - 1 cheapest cuts.
void RestBounds::WriteRows(int s, int j, double t_max, double t_sum, double e_sum,
                           const std::vector<double>& joint,
                           const std::vector<double>& speed) const {
  const int free = static_cast<int>(speed.size());
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
    const double c = WithStages(f[m], t, e);
    if (c < floor) floor = c;  // a NaN (that m cannot be) is never less
  }
  return floor;
}

}  // namespace neupims::scheduler::partition
