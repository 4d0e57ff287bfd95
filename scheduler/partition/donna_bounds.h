// Lower bounds for DONNA's searches (donna.cc): what the layers not yet placed must still cost.
// Internal to the partitioner; the searches prune with them and stay exact, because a partial
// plan is dropped only when even this bound reaches the cost of a complete plan already found.
//
// A partial plan has placed layers [0, j), has cost (t, e) so far, and may use the devices its
// used-state leaves free. If the rest forms m more stages (so m - 1 more cuts), then with
// w_t = alpha / T_max and w_e = (1 - alpha) / E_max (C = w_t T + w_e E, eq. 1):
//   - each layer costs at least its cheapest energy and time on a free device that runs it;
//   - T >= the slowest such time, T >= every cut's transfer time, and each cut costs at least
//     the cheapest cut left on any link;
//   - a free device d runs every layer left at least slowdown_d times slower than the fastest
//     free device (slowdown_d = min over the layers left of t_l(d) / min_d' t_l(d')), so d's
//     stage holds layers worth at most T / slowdown_d of the fastest times, and
//     T >= (sum of the fastest times) / (the m largest 1 / slowdown_d)        ("split" bound);
//   - T >= the mean of the m stages' times while E adds up, so
//     C >= w_e (e + cuts) + sum over layers of min over free d of [w_t t_l(d) / m + w_e e_l(d)]
//                                                                              ("joint" bound).
// A plan has some m between 1 and the free devices, so C >= the least over m of the larger of
// the two bounds.
#ifndef NEUPIMS_SCHEDULER_PARTITION_DONNA_BOUNDS_H_
#define NEUPIMS_SCHEDULER_PARTITION_DONNA_BOUNDS_H_

#include <algorithm>
#include <memory>
#include <vector>

#include "scheduler/partition/profile.h"

namespace neupims::scheduler::partition {

class RestBounds {
 public:
  // free_columns[s]: for used-state s, the profile column of each free device (a device that
  // stands for several interchangeable ones is listed once per free device). `p` must outlive
  // the bounds.
  RestBounds(const Profile& p, double weight_t, double weight_e,
             std::vector<std::vector<int>> free_columns);

  // A used-state's floors per j (and m). Left uninitialised until FillState writes them (no
  // default member values).
  struct PerStages {  // the floors of the layers from j on, for m more stages
    double t_s;       // T >= max(t, t_s)
    double e_j;       // E >= e + e_j (the cuts included)
    double joint;     // C >= w_e e + joint (the cuts included)
  };
  struct StageFloor {
    double energy_j;
    double joint;
  };
  // One used-state's floors: what the searches' inner loops read (Of()).
  class State {
   public:
    // Whether a partial plan (t, e) with j < L layers placed cannot end below C = `best`: its
    // bound reaches it. True when a layer left runs on no free device.
    bool Reaches(double t, double e, int j, double best) const {
      const PerStages* f = &rows_[static_cast<size_t>(j) * free_];
      const int stages = std::min(free_, layers_ - j);
      for (int m = 0; m < stages; ++m) {
        if (WithStages(f[m], t, e) < best) return false;
      }
      return true;
    }
    // The bound itself: the least over m (infinite when a layer left runs on no free device).
    double Floor(double t, double e, int j) const;

    // For a stage that starts at some i < j on a free device and ends at j: the floors of the
    // layers after j with every free device (m = all of them) that only grow as the stage grows,
    // since its layers on its device cost at least as much as the floors assumed for them:
    // C >= w_t max(t, stage) + w_e (e + stage_e + EnergyAfter) and
    // C >= w_e (e + stage_e) + w_t stage / free + JointAfter.
    double EnergyAfter(int j) const { return floors_[j].energy_j; }
    double JointAfter(int j) const { return floors_[j].joint; }
    int free() const { return free_; }

   private:
    friend class RestBounds;
    // The bound for one number of stages m: the larger of the split and joint bounds (header
    // comment). NaN (0 x infinity) when m stages cannot be: never less than anything.
    double WithStages(const PerStages& f, double t, double e) const {
      return std::max(w_t_ * std::max(t, f.t_s) + w_e_ * (e + f.e_j), w_e_ * e + f.joint);
    }
    const PerStages* rows_ = nullptr;
    const StageFloor* floors_ = nullptr;
    int free_ = 0, layers_ = 0;
    double w_t_ = 0, w_e_ = 0;
  };
  // Used-state s's floors, computed on first use (a search prunes most used-states before it
  // reaches them).
  State Of(int s) const;

 private:
  // The costs of layer j on the free devices of a state that run it.
  struct LayerOnFree {
    std::vector<double> t, e;  // per device that runs it
    std::vector<int> device;   // its index among the state's free devices
  };
  void LayerCosts(const std::vector<int>& columns, int j, LayerOnFree* out) const;
  void FillState(int s) const;
  void WriteRows(int s, int j, double t_max, double t_sum, double e_sum,
                 const std::vector<double>& joint, const std::vector<double>& speed) const;

  const Profile& p_;
  std::vector<std::vector<int>> columns_;  // per used-state: the free devices' columns
  int layers_;
  double weight_t_, weight_e_;
  std::vector<double> cut_e_, cut_t_;  // per j: the cheapest cut after some k > j
  std::vector<int> free_;              // per used-state: free devices
  std::vector<size_t> first_;          // per used-state: its rows in per_stages_
  // The memo FillState fills (mutable: a cache of what the constructor's arguments define).
  mutable std::vector<char> filled_;                   // per used-state
  mutable std::unique_ptr<PerStages[]> per_stages_;    // [first_[s] + j * free_[s] + m - 1]
  mutable std::unique_ptr<StageFloor[]> stage_floor_;  // [s * (L + 1) + j]
};

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_SCHEDULER_PARTITION_DONNA_BOUNDS_H_
