#include "scheduler/partition/donna_bounds.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

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
                       const std::vector<std::vector<int>>& free_columns)
    : layers_(static_cast<int>(p.layers.size())), weight_t_(weight_t), weight_e_(weight_e) {
  const CutFloors cuts = CutFloorsOf(p);
  size_t rows = 0;
  for (const std::vector<int>& columns : free_columns) {
    free_.push_back(static_cast<int>(columns.size()));
    first_.push_back(rows);
    rows += static_cast<size_t>(layers_ + 1) * columns.size();
  }
  per_stages_.resize(rows);
  stage_floor_.resize(free_columns.size() * (layers_ + 1));
  for (size_t s = 0; s < free_columns.size(); ++s) {
    FillState(p, static_cast<int>(s), free_columns[s], cuts.energy_j, cuts.time_s);
  }
}

// Sweeps the layers from the last to the first, keeping the sums over the layers left, and
// writes every j's floors for m = 1 .. free devices.
void RestBounds::FillState(const Profile& p, int s, const std::vector<int>& columns,
                           const std::vector<double>& cut_e, const std::vector<double>& cut_t) {
  const int free = static_cast<int>(columns.size());
  double e_sum = 0, t_sum = 0, t_max = 0;
  std::vector<double> joint(free + 1, 0);    // [m]
  std::vector<double> slowdown(free, kInf);  // per free device
  std::vector<double> speed(free);
  for (int j = layers_; j >= 0; --j) {
    if (j < layers_) {
      double t = kInf, e = kInf;
      for (int d : columns) {
        if (!Runs(p, j, d)) continue;
        t = std::min(t, p.time_s[j][d]);
        e = std::min(e, p.energy_j[j][d]);
      }
      for (int m = 1; m <= free; ++m) {
        double mix = kInf;
        for (int d : columns) {
          if (Runs(p, j, d))
            mix = std::min(mix, weight_t_ / m * p.time_s[j][d] + weight_e_ * p.energy_j[j][d]);
        }
        joint[m] += mix;
      }
      for (int k = 0; k < free && t > 0 && std::isfinite(t); ++k) {
        if (Runs(p, j, columns[k]))
          slowdown[k] = std::min(slowdown[k], p.time_s[j][columns[k]] / t);
      }
      e_sum += e;
      t_sum += t;
      t_max = std::max(t_max, t);
    }
    for (int k = 0; k < free; ++k) speed[k] = std::isfinite(slowdown[k]) ? 1 / slowdown[k] : 0;
    std::sort(speed.begin(), speed.end(), std::greater<>());
    stage_floor_[Row(s) + j] = {e_sum, joint[free > 0 ? free : 0]};
    double capacity = 0;
    for (int m = 1; m <= free; ++m) {
      capacity += speed[m - 1];
      const double cuts = m > 1 ? (m - 1) * cut_e[j] : 0;
      const double spread = t_sum > 0 ? t_sum / capacity : 0;
      PerStages& f = per_stages_[first_[s] + static_cast<size_t>(j) * free + m - 1];
      f.t_s = std::max({t_max, spread, m > 1 ? cut_t[j] : 0});
      f.e_j = e_sum + cuts;
      f.joint = joint[m] + weight_e_ * cuts;
    }
  }
}

bool RestBounds::Reaches(double t, double e, int j, int s, double best) const {
  const PerStages* f = &per_stages_[first_[s] + static_cast<size_t>(j) * free_[s]];
  const int stages = std::min(free_[s], layers_ - j);
  for (int m = 0; m < stages; ++m) {
    const double split = weight_t_ * std::max(t, f[m].t_s) + weight_e_ * (e + f[m].e_j);
    if (std::max(split, weight_e_ * e + f[m].joint) < best) return false;
  }
  return true;
}

}  // namespace neupims::scheduler::partition
