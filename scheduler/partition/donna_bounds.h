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

#include <vector>

#include "scheduler/partition/profile.h"

namespace neupims::scheduler::partition {

class RestBounds {
 public:
  // free_columns[s]: for used-state s, the profile column of each free device (a device that
  // stands for several interchangeable ones is listed once per free device).
  RestBounds(const Profile& p, double weight_t, double weight_e,
             const std::vector<std::vector<int>>& free_columns);

  // Whether a partial plan (t, e) with j < L layers placed in used-state s cannot end below C =
  // `best`: its bound reaches it. True when a layer left runs on no free device.
  bool Reaches(double t, double e, int j, int s, double best) const;

  // For a stage that starts at some i < j on a free device of s and ends at j: the floors of the
  // layers after j with every free device of s (m = all of them) that only grow as the stage
  // grows, since its layers on its device cost at least as much as the floors assumed for them.
  // C >= w_t max(t, stage) + w_e (e + stage_e + EnergyAfter) and
  // C >= w_e (e + stage_e) + w_t stage / free + JointAfter.
  double EnergyAfter(int s, int j) const { return stage_floor_[Row(s) + j].energy_j; }
  double JointAfter(int s, int j) const { return stage_floor_[Row(s) + j].joint; }
  int Free(int s) const { return free_[s]; }

 private:
  struct PerStages {   // the floors of the layers from j on, for m more stages
    double t_s = 0;    // T >= max(t, t_s)
    double e_j = 0;    // E >= e + e_j (the cuts included)
    double joint = 0;  // C >= w_e e + joint (the cuts included)
  };
  struct StageFloor {
    double energy_j = 0;
    double joint = 0;
  };
  size_t Row(int s) const { return static_cast<size_t>(s) * (layers_ + 1); }
  void FillState(const Profile& p, int s, const std::vector<int>& columns,
                 const std::vector<double>& cut_e, const std::vector<double>& cut_t);

  int layers_;
  double weight_t_, weight_e_;
  std::vector<int> free_;                // per used-state: free devices
  std::vector<size_t> first_;            // per used-state: its rows in per_stages_
  std::vector<PerStages> per_stages_;    // [first_[s] + j * free_[s] + m - 1]
  std::vector<StageFloor> stage_floor_;  // [Row(s) + j]
};

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_SCHEDULER_PARTITION_DONNA_BOUNDS_H_
