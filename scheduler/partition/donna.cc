#include "scheduler/partition/donna.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/partition/donna_bounds.h"

namespace neupims::scheduler::partition {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxDevices = 10;  // the state space grows as 2^devices
// Relative slack of a bound taken from a plan's cost: the search and PricePlan sum the same
// costs in other orders, and Pruning::kOwnCost's key in a third. Far above the rounding of a few
// hundred layers' sums (~1e-14), far below any difference between plans that matters. A stage's
// cost is a difference of prefix sums over its device, whose rounding scales with the prefix:
// it would exceed the slack only if one device's costs over the layers before a stage were some
// 1e7 times the plan's C, far from any real profile.
constexpr double kBoundSlack = 1e-9;

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
    last_end_.assign(p.devices.size(), std::vector<int>(n, 0));
    for (size_t d = 0; d < p.devices.size(); ++d) {
      int j = 0;  // Runs(d, i, j) only turns false as j grows, and stays true as i grows
      for (int i = 0; i < static_cast<int>(n); ++i) {
        j = std::max(j, i);
        while (j < static_cast<int>(n) && Runs(static_cast<int>(d), i, j + 1)) ++j;
        last_end_[d][i] = j;
      }
    }
  }

  // The largest j with Runs(d, i, j) (i itself if layer i cannot run on d).
  int LastEnd(int d, int i) const { return last_end_[d][i]; }
  // Prefix sums: TimeS(d, i, j) = TimeRow(d)[j] - TimeRow(d)[i], EnergyJ likewise.
  const double* TimeRow(int d) const { return time_[d].data(); }
  const double* EnergyRow(int d) const { return energy_[d].data(); }

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
  std::vector<std::vector<int>> last_end_;  // [d][i]
};

// A partial plan: (T, E) so far in seconds and joules, and where it came from.
struct Label {
  double t = 0;
  double e = 0;
  double c = 0;         // C of eq. 1 for (t, e)
  int pred_state = -1;  // state the label came from (-1: start)
  int pred_label = -1;
};

bool SameLink(const LinkCost& a, const LinkCost& b) {
  return a.bytes_per_s == b.bytes_per_s && a.joules_per_bit == b.joules_per_bit &&
         a.latency_s == b.latency_s;
}

// Interchangeable devices: same kind, memory, profile column and links. A cluster of four
// identical CPUs is searched as "how many CPUs are used", not as 16 subsets: exact, and what
// makes 8-device clusters with repeated kinds fast.
struct DeviceClasses {
  std::vector<std::vector<int>> members;
  std::vector<int> stride;  // used-state encoding: sum of count[c] * stride[c]
  int states = 1;           // number of used-states: product of (size + 1)

  int size(int c) const { return static_cast<int>(members[c].size()); }
  int rep(int c) const { return members[c][0]; }
  int count(int used, int c) const { return used / stride[c] % (size(c) + 1); }
  // Two distinct devices of classes a and b (b may equal a), for their link.
  std::pair<int, int> Pair(int a, int b) const {
    return {members[a][0], a == b ? members[b][1] : members[b][0]};
  }
};

bool Equivalent(const Profile& p, int a, int b) {
  if (p.devices[a].kind != p.devices[b].kind ||
      p.devices[a].memory_bytes != p.devices[b].memory_bytes) {
    return false;
  }
  for (size_t l = 0; l < p.layers.size(); ++l) {
    if (p.time_s[l][a] != p.time_s[l][b] || p.energy_j[l][a] != p.energy_j[l][b]) return false;
  }
  for (size_t x = 0; x < p.devices.size(); ++x) {
    if (static_cast<int>(x) == a || static_cast<int>(x) == b) continue;
    if (!SameLink(p.link[a][x], p.link[b][x]) || !SameLink(p.link[x][a], p.link[x][b])) {
      return false;
    }
  }
  return SameLink(p.link[a][b], p.link[b][a]);
}

DeviceClasses Classify(const Profile& p) {
  const int n = static_cast<int>(p.devices.size());
  DeviceClasses dc;
  std::vector<int> class_of(n, -1);
  for (int d = 0; d < n; ++d) {
    for (size_t c = 0; c < dc.members.size() && class_of[d] < 0; ++c) {
      if (Equivalent(p, d, dc.members[c][0])) {
        class_of[d] = static_cast<int>(c);
        dc.members[c].push_back(d);
      }
    }
    if (class_of[d] < 0) {
      class_of[d] = static_cast<int>(dc.members.size());
      dc.members.push_back({d});
    }
  }
  // Every link must depend on the two classes only; otherwise search device by device.
  bool consistent = true;
  for (int a = 0; a < n && consistent; ++a) {
    for (int b = 0; b < n && consistent; ++b) {
      if (a == b) continue;
      const auto [x, y] = dc.Pair(class_of[a], class_of[b]);
      consistent = SameLink(p.link[a][b], p.link[x][y]);
    }
  }
  if (!consistent) {
    dc.members.clear();
    for (int d = 0; d < n; ++d) dc.members.push_back({d});
  }
  for (size_t c = 0; c < dc.members.size(); ++c) {
    dc.stride.push_back(dc.states);
    dc.states *= dc.size(static_cast<int>(c)) + 1;
  }
  return dc;
}

// For each used-state, the profile column of each device it leaves free (RestBounds).
std::vector<std::vector<int>> FreeColumns(const DeviceClasses& classes) {
  std::vector<std::vector<int>> columns(classes.states);
  for (int used = 0; used < classes.states; ++used) {
    for (size_t c = 0; c < classes.members.size(); ++c) {
      const int cls = static_cast<int>(c);
      for (int k = classes.count(used, cls); k < classes.size(cls); ++k) {
        columns[used].push_back(classes.rep(cls));
      }
    }
  }
  return columns;
}

// What a search computes. kPublished keeps one label per state, the others every label no other
// beats (kExact: in E and C at one alpha; kFront: in T and E, for every alpha).
enum class Mode { kPublished, kExact, kFront };

// How a search drops partial plans; each rule keeps what its mode computes exactly.
enum class Pruning {
  kNone,  // the front: every Pareto-optimal plan is needed
  // A label whose lower bound (RestBounds) reaches the best plan found: it cannot lead to a
  // cheaper one. Exact for the exact search, and for the single label at alpha 0 or 1, where the
  // label of least C does at least as well as any other in every continuation.
  kRestBounds,
  // The single label between alpha 0 and 1, where the programme as published is not exact and
  // what it returns depends on which label each state keeps: a label that cannot lead to a
  // cheaper plan still decides what its successors keep. So only the labels a plain sweep would
  // also drop without effect are dropped (OverLimit).
  kOwnCost,
};

Pruning PruningOf(Mode mode, double alpha) {
  if (mode == Mode::kFront) return Pruning::kNone;
  if (mode == Mode::kPublished && alpha != 0 && alpha != 1) return Pruning::kOwnCost;
  return Pruning::kRestBounds;
}

class Search {
 public:
  Search(const Profile& p, double alpha, Mode mode)
      : p_(p),
        costs_(p),
        classes_(Classify(p)),
        norm_(NormalisationOf(p)),
        weight_t_(alpha / norm_.time_s),
        weight_e_((1 - alpha) / norm_.energy_j),
        bounds_(p, weight_t_, weight_e_, FreeColumns(classes_)),
        pareto_(mode != Mode::kPublished),
        front_(mode == Mode::kFront),
        pruning_(PruningOf(mode, alpha)),
        layers_(static_cast<int>(p.layers.size())),
        kinds_(static_cast<int>(classes_.members.size())),
        labels_(pareto_ ? static_cast<size_t>(layers_) * classes_.states * kinds_ : 0),
        single_(pareto_ ? 0 : static_cast<size_t>(layers_) * classes_.states * kinds_,
                Label{kInf, kInf, kInf, -1, -1}),
        single_c_(single_.size(), kInf),
        free_(classes_.states, 0) {
    for (int used = 0; used < classes_.states; ++used) {
      for (int c = 0; c < kinds_; ++c) {
        if (classes_.count(used, c) < classes_.size(c)) free_[used] |= 1u << c;
      }
    }
    stage_t_.assign(layers_ + 1, 0);
    stage_e_.assign(layers_ + 1, 0);
    // Transfer time and energy of every cut between every two classes, once.
    comm_.resize(static_cast<size_t>(kinds_) * kinds_ * layers_);
    for (int u = 0; u < kinds_; ++u) {
      for (int v = 0; v < kinds_; ++v) {
        if (u == v && classes_.size(u) < 2) continue;
        const auto [a, b] = classes_.Pair(u, v);
        for (int j = 1; j < layers_; ++j) {
          comm_[(u * kinds_ + v) * layers_ + j] = {costs_.CommS(a, b, j), costs_.CommJ(a, b, j)};
        }
      }
    }
    GroupByIncomingLinks();
  }

  // The cost of the best plan found (or of a plan known to exist): what pruning compares with.
  void set_bound(double c) {
    best_c_ = c;
    limit_ = c + std::abs(c) * kBoundSlack;
  }

  // Runs the recursion; complete plans are reported to `done(state, label, last_class, t, e)`.
  template <typename Done>
  void Run(Done done) {
    for (int u = 0; u < kinds_; ++u) {
      if (p_.input_device && ClassOfDevice(*p_.input_device) != u) continue;
      Offer(Slot(Index(0, 0, u)), Label{});
    }
    for (int i = 0; i < layers_; ++i) {
      for (int used = 0; used < classes_.states; ++used) {
        for (int u = 0; u < kinds_; ++u) {
          if (!Free(used, u)) continue;  // no device of u's class left for the next stage
          const int state = Index(i, used, u);
          for (int k = 0; k < Labels(state); ++k) {
            if (DominatedByFewerDevices(i, used, u, LabelAt(state, k))) continue;
            Expand(i, used, u, state, k, done);
          }
        }
      }
    }
  }

  // Whether a label of state (i, used, u) is dominated by one of a state (i, sub, u) whose used
  // devices are `used`'s but one: every completion of this label completes that one too, each
  // device free here being free there, at no higher cost, so skipping it keeps every optimal
  // plan (and, for the front, every Pareto-optimal one). Checking every smaller subset finds
  // more but costs up to 2^devices per label: measured slower. The published programme's single
  // label does this only where it is exact (alpha 0 or 1: there the label of least C does at
  // least as well as any other in every continuation).
  bool DominatedByFewerDevices(int i, int used, int u, const Label& l) const {
    if (pruning_ == Pruning::kOwnCost) return false;
    for (int c = 0; c < kinds_; ++c) {
      if (classes_.count(used, c) == 0) continue;
      const int slot = Slot(Index(i, used - classes_.stride[c], u));
      if (pareto_ ? Dominated(labels_[slot], l) : single_c_[slot] <= l.c) return true;
    }
    return false;
  }

  // Walks a complete label back into stages (device, last layer), giving each class's stages
  // its devices in order.
  std::vector<Stage> Trace(int state, int label, int last_class) const {
    std::vector<std::pair<int, int>> rev = {{last_class, layers_ - 1}};  // (class, last layer)
    while (state >= 0) {
      const int i = LayerOf(state);
      if (i == 0) break;
      const Label& l = LabelAt(state, label);
      rev.push_back({ClassOf(l.pred_state), i - 1});
      state = l.pred_state;
      label = l.pred_label;
    }
    std::reverse(rev.begin(), rev.end());
    return StagesOf(rev);
  }

  // A complete plan found greedily before the sweep, so that pruning starts from a finite C
  // instead of waiting for the sweep's late, multi-stage plans: from each start class, place
  // stage after stage, each time the (end, next class) of least lower bound, and finish as soon
  // as finishing costs no more than that. Its C and stages (infinite and none: no plan found).
  std::pair<double, std::vector<Stage>> Dive() {
    std::pair<double, std::vector<Stage>> best = {kInf, {}};
    for (int u = 0; u < kinds_; ++u) {
      if (p_.input_device && ClassOfDevice(*p_.input_device) != u) continue;
      std::vector<std::pair<int, int>> path;  // (class, last layer) per stage
      const double c = DiveFrom(u, &path);
      if (c < best.first) best = {c, StagesOf(path)};
    }
    return best;
  }

  double Cost(double t, double e) const { return weight_t_ * t + weight_e_ * e; }

 private:
  // One greedy dive from start class u (Dive()); fills `path` when it returns a finite C.
  double DiveFrom(int u, std::vector<std::pair<int, int>>* path) {
    Label from{};
    int i = 0, used = 0;
    while (Free(used, u)) {
      const int end = StageEnds(i, used, u, from);
      const double finish = end == layers_ ? Cost(stage_t_[end], stage_e_[end]) : kInf;
      const int now_used = used + classes_.stride[u];
      const RestBounds::State next_floors = bounds_.Of(now_used);
      double floor = kInf;
      int next_j = -1, next_v = -1;
      Label next{};
      for (uint32_t left = free_[now_used]; left != 0; left &= left - 1) {
        const int v = __builtin_ctz(left);
        const std::pair<double, double>* comm = &comm_[(u * kinds_ + v) * layers_];
        for (int j = i + 1; j <= std::min(end, layers_ - 1); ++j) {
          const double t = std::max(stage_t_[j], comm[j].first);
          const double e = stage_e_[j] + comm[j].second;
          const double f = next_floors.Floor(t, e, j);
          if (f < floor) std::tie(floor, next_j, next_v, next) = std::tuple(f, j, v, Label{t, e});
        }
      }
      if (finish <= floor) {
        if (finish < kInf) path->push_back({u, layers_ - 1});
        return finish;
      }
      path->push_back({u, next_j - 1});
      std::tie(from, i, used, u) = std::tuple(next, next_j, now_used, next_v);
    }
    return kInf;
  }

  // Stages (device, last layer) from (class, last layer) in order, giving each class's stages
  // its devices in order (the input's device first in its class).
  std::vector<Stage> StagesOf(const std::vector<std::pair<int, int>>& classes) const {
    std::vector<int> next(kinds_, 0);
    std::vector<std::vector<int>> order = classes_.members;
    if (p_.input_device) {  // the first stage runs on the input's device itself
      std::vector<int>& o = order[ClassOfDevice(*p_.input_device)];
      std::stable_partition(o.begin(), o.end(), [&](int d) { return d == *p_.input_device; });
    }
    std::vector<Stage> stages;
    for (const auto& [c, last] : classes) {
      Stage s;
      s.device = order[c][next[c]++];
      s.last_layer = last;
      stages.push_back(s);
    }
    return stages;
  }

  // States (layers placed i, used-state, class of the next stage): i innermost, so the offers
  // of one expansion (j = i+1.. for each next class) walk memory in order.
  int Index(int i, int used, int u) const { return (used * kinds_ + u) * layers_ + i; }

  // Where a state's labels are kept. Two next classes v and v' that every class reaches over
  // the same links (GroupByIncomingLinks) receive the same offers in every state where both are
  // free: the offers come from the same stages and pay the same cuts. So their states share one
  // slot, the group's, and an expansion offers once per group instead of once per class (with
  // one default link medium, once instead of up to 7 times). The start states (i = 0) are not
  // shared: only the input's class may begin.
  int Slot(int state) const {
    const int i = state % layers_;
    if (i == 0) return state;
    const int u = state / layers_ % kinds_;
    return state + (group_[u] - u) * layers_;
  }
  // group_[v]: the least class whose incoming cut costs equal v's from every class that can ship
  // to both (a class of one device never ships to itself).
  void GroupByIncomingLinks() {
    group_.resize(kinds_);
    for (int v = 0; v < kinds_; ++v) {
      group_[v] = v;
      for (int w = 0; w < v; ++w) {
        if (group_[w] == w && SameIncoming(w, v)) {
          group_[v] = w;
          break;
        }
      }
    }
  }
  bool SameIncoming(int v, int w) const {
    for (int u = 0; u < kinds_; ++u) {
      if ((u == v || u == w) && classes_.size(u) < 2) continue;
      const auto* a = &comm_[(u * kinds_ + v) * layers_];
      const auto* b = &comm_[(u * kinds_ + w) * layers_];
      if (!std::equal(a + 1, a + layers_, b + 1)) return false;
    }
    return true;
  }
  int LayerOf(int state) const { return state % layers_; }
  int Labels(int state) const {
    const int slot = Slot(state);
    return pareto_ ? static_cast<int>(labels_[slot].size()) : (single_c_[slot] < kInf ? 1 : 0);
  }
  const Label& LabelAt(int state, int k) const {
    return pareto_ ? labels_[Slot(state)][k] : single_[Slot(state)];
  }

  int ClassOf(int state) const { return state / layers_ % kinds_; }
  bool Free(int used, int c) const { return (free_[used] >> c) & 1u; }
  int ClassOfDevice(int d) const {
    for (int c = 0; c < kinds_; ++c) {
      for (int m : classes_.members[c]) {
        if (m == d) return c;
      }
    }
    return -1;
  }

  // Expands one label of state (i layers placed, `used`, next class u): a stage [i, j) on u's
  // device for every end j it can run to, then the cut to every next class v still free. The
  // stage's (T, E) per end is computed once (phase 1) and the offers to one next class walk the
  // states (j, used + u, v) in memory order (phase 2).
  template <typename Done>
  void Expand(int i, int used, int u, int state, int k, Done& done) {
    const Label from = LabelAt(state, k);
    // The best plan may have improved since this label was offered. (For Pruning::kOwnCost this
    // re-check is part of the argument, not only a saving: see OverLimit.)
    if (i > 0 && Dropped(from, used, i)) return;
    const int end = StageEnds(i, used, u, from);
    if (end == layers_ && Completes(Cost(stage_t_[end], stage_e_[end]))) {
      done(state, k, u, stage_t_[end], stage_e_[end]);
    }
    const int now_used = used + classes_.stride[u];
    const RestBounds::State next_floors =
        pruning_ == Pruning::kNone ? RestBounds::State() : bounds_.Of(now_used);
    const int last_cut = std::min(end, layers_ - 1);
    uint32_t offered = 0;  // groups of next classes (GroupByIncomingLinks) offered to
    for (uint32_t left = free_[now_used]; left != 0; left &= left - 1) {
      const int v = __builtin_ctz(left);
      if (offered & (1u << group_[v])) continue;
      offered |= 1u << group_[v];
      const std::pair<double, double>* comm = &comm_[(u * kinds_ + v) * layers_];
      const int to = Slot(Index(1, now_used, v)) - 1;  // to + j: layer j's slot (j >= 1)
      for (int j = i + 1; j <= last_cut; ++j) {
        const double t = std::max(stage_t_[j], comm[j].first);
        const double e = stage_e_[j] + comm[j].second;
        const double c = Cost(t, e);
        if (!pareto_ && !(c < single_c_[to + j])) continue;  // cheap test first
        if (OfferDropped(Label{t, e, c}, next_floors, j)) continue;
        Offer(to + j, Label{t, e, c, state, k});
      }
    }
  }

  // Fills stage_t_[j] / stage_e_[j] with (T, E) after a stage [i, j) on class u's device, for
  // j = i+1 .. the returned last end: as far as the stage can run and, when pruning, as long as
  // a plan through the end j can still be kept: its lower bound stays below the best plan
  // (Pruning::kRestBounds) or its key within the limit (kOwnCost).
  int StageEnds(int i, int used, int u, const Label& from) {
    const int d = classes_.rep(u);
    const RestBounds::State floors =
        pruning_ == Pruning::kNone ? RestBounds::State() : bounds_.Of(used);
    const double spread = weight_t_ / std::max(floors.free(), 1);  // >= 1 free when pruning: u
    const double* time = costs_.TimeRow(d);
    const double* energy = costs_.EnergyRow(d);
    const int last = costs_.LastEnd(d, i);  // a longer stage cannot run
    int j = i + 1;
    for (; j <= last; ++j) {
      const double stage_s = time[j] - time[i];
      stage_t_[j] = std::max(from.t, stage_s);
      stage_e_[j] = from.e + (energy[j] - energy[i]);
      // Both bounds only grow with j, since d is free in `used`: a layer's energy (or its
      // alpha-weighted mix of time spread over the free devices and energy) on d is at least the
      // cheapest on a device free in `used`, which the bound assumed for it after j. Every offer
      // and plan from the end j costs at least as much (its cut only adds; fewer devices are free
      // after it), so OverLimit here drops only what it would drop there.
      if (pruning_ == Pruning::kRestBounds &&
          (Cost(stage_t_[j], stage_e_[j] + floors.EnergyAfter(j)) >= best_c_ ||
           weight_e_ * stage_e_[j] + spread * stage_s + floors.JointAfter(j) >= best_c_)) {
        break;
      }
      if (pruning_ == Pruning::kOwnCost && OverLimit(Cost(stage_t_[j], stage_e_[j]), floors, j)) {
        break;
      }
    }
    return j - 1;
  }

  // Whether a label of state (j layers placed, `used`) is dropped before its expansion.
  bool Dropped(const Label& l, int used, int j) const {
    return pruning_ != Pruning::kNone && OfferDropped(l, bounds_.Of(used), j);
  }
  // Whether an offer of (t, e, c) to a state with the layers from j on left, whose free devices'
  // floors are `floors`, is dropped.
  bool OfferDropped(const Label& l, const RestBounds::State& floors, int j) const {
    switch (pruning_) {
      case Pruning::kNone:
        return false;
      case Pruning::kRestBounds:
        return floors.Reaches(l.t, l.e, j, best_c_);
      case Pruning::kOwnCost:
        return OverLimit(l.c, floors, j);
    }
    return false;
  }
  // Whether a complete plan of cost c is reported.
  bool Completes(double c) const {
    switch (pruning_) {
      case Pruning::kNone:
        return true;
      case Pruning::kRestBounds:
        return c < best_c_;
      case Pruning::kOwnCost:
        return c <= limit_;
    }
    return true;
  }
  // Pruning::kOwnCost: whether a label of cost c whose layers from j on are still to be placed
  // on the devices `floors` leaves free is over the limit. Its key, c + w_e x (the least energy
  // of those layers on those devices),
  //  - never decreases along a path: a stage adds at least its layers' least energy over the
  //    devices free before it (its device is one), its cut only adds, and fewer free devices only
  //    raise the floor (StageEnds' break tests the stage with the floors before it, for that);
  //  - grows with c among one state's labels (the floor is the state's, not the label's);
  //  - is C itself for a complete plan.
  // Let F be the C of the plan the plain sweep (no pruning) returns; the limit starts at least F.
  // Invariant: every label this sweep expands is the plain sweep's label for its state. A state
  // whose plain label has a key of at most the limit receives that label, since its predecessors
  // are plain labels with smaller keys, and keeps it, since any other offer there has a larger C
  // (ties: the same first one, as offers come in the same order). A state whose plain label was
  // dropped (key above the limit at that time) can keep another, costlier label, but its key is
  // larger still and the limit never grows, so the re-check before expansion (Dropped) drops it.
  // So every plan found is one of the plain sweep's (C >= F): the limit, the best plan found,
  // never falls below F, and the plain sweep's plan, whose keys are at most F, is found. A seed
  // below F leaves nothing to find (every plan found costs at least F); the caller then sweeps
  // again without it. The slack (kBoundSlack) absorbs rounding.
  bool OverLimit(double c, const RestBounds::State& floors, int j) const {
    return c + weight_e_ * floors.EnergyAfter(j) > limit_;
  }

  // The order and dominance of the exact searches' labels. The front (every alpha) keeps the
  // labels no other beats in both T and E. At one alpha a label A does at least as well as B in
  // every continuation (which takes T to max(T, X) and adds Y to E) iff E_A <= E_B and
  // C_A <= C_B: the difference of the two C's is monotone in X, and those are its two ends
  // (X = 0 and X large). So the exact search keeps the labels no other beats in both E and C:
  // fewer than in (T, E), with the same optimum.
  double Primary(const Label& l) const { return front_ ? l.t : l.e; }
  double Secondary(const Label& l) const { return front_ ? l.e : l.c; }
  // Labels are kept sorted by increasing Primary, so by decreasing Secondary.
  bool Before(const Label& a, const Label& b) const { return Primary(a) < Primary(b); }
  bool Dominated(const std::vector<Label>& ls, const Label& l) const {
    // The labels with Primary <= l's end at `after`; the last has the least Secondary of them.
    const auto after = std::upper_bound(
        ls.begin(), ls.end(), l, [this](const Label& a, const Label& b) { return Before(a, b); });
    return after != ls.begin() && Secondary(*std::prev(after)) <= Secondary(l);
  }

  // Keeps the label of least C (published) or every non-dominated label (exact) in a slot.
  void Offer(int slot, const Label& l) {
    if (!pareto_) {
      if (l.c < single_c_[slot]) {
        single_[slot] = l;
        single_c_[slot] = l.c;
      }
      return;
    }
    std::vector<Label>& ls = labels_[slot];
    if (Dominated(ls, l)) return;
    // Those l dominates: a run from the first with Primary >= l's while Secondary >= l's.
    const auto first = std::lower_bound(
        ls.begin(), ls.end(), l, [this](const Label& a, const Label& b) { return Before(a, b); });
    auto last = first;
    while (last != ls.end() && Secondary(*last) >= Secondary(l)) ++last;
    // Offers only reach states ahead of the sweep (more layers done), which have not been
    // expanded yet, so no successor points at a label moved or removed here.
    if (first != last) {
      *first = l;
      ls.erase(std::next(first), last);
    } else {
      ls.insert(first, l);
    }
  }

  const Profile& p_;
  StageCosts costs_;
  DeviceClasses classes_;
  Normalisation norm_;
  double weight_t_, weight_e_;  // C = weight_t_ T + weight_e_ E (eq. 1 on normalised terms)
  RestBounds bounds_;           // what the layers not yet placed still cost, at least
  bool pareto_;                 // every non-dominated label per state, not one
  bool front_;                  // the Pareto front over every alpha: (T, E) labels (Primary())
  Pruning pruning_;
  int layers_, kinds_;
  std::vector<std::vector<Label>> labels_;  // exact: every non-dominated label per state
  std::vector<Label> single_;               // published: one label per state
  std::vector<double> single_c_;  // its C (inf: none), apart: the offers' test reads only this
  std::vector<uint32_t> free_;    // per used-state: the classes with a device left
  std::vector<std::pair<double, double>> comm_;  // [u][v][j]: seconds, joules
  std::vector<int> group_;                       // GroupByIncomingLinks(): per class
  std::vector<double> stage_t_, stage_e_;        // StageEnds(): per end of the stage being expanded
  double best_c_ = kInf;
  double limit_ = kInf;  // best_c_ with kBoundSlack
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

// The stages of the best plan the search finds within C = `bound` (none: empty): below it
// (Pruning::kRestBounds), or at most it (kOwnCost).
std::vector<Stage> BestStages(const Profile& p, double alpha, Mode mode, double bound) {
  Search search(p, alpha, mode);
  double best = kInf;
  std::vector<Stage> stages;
  // The exact search also starts from a greedy plan when it beats the bound it was given. Not
  // the published one: a better plan found before its sweep would hide what the programme as
  // published finds (PublishedDpIsNotExactBetweenZeroAndOne).
  if (mode == Mode::kExact) {
    if (auto [c, dived] = search.Dive(); c < bound)
      std::tie(best, bound, stages) = std::tuple(c, c, dived);
  }
  search.set_bound(bound);
  search.Run([&](int state, int label, int u, double t, double e) {
    const double c = search.Cost(t, e);
    if (c < best) {
      best = c;
      search.set_bound(c);
      stages = search.Trace(state, label, u);
    }
  });
  return stages;
}

// The model cut only after every k-th layer: blocks of k layers (the last may be shorter), each
// block's costs and weights the sums of its layers', runnable where all its layers are.
Profile Coarsened(const Profile& p, int k) {
  Profile c = p;
  const int layers = static_cast<int>(p.layers.size());
  const int blocks = (layers + k - 1) / k;
  c.layers.assign(blocks, {});
  c.time_s.assign(blocks, std::vector<double>(p.devices.size(), 0));
  c.energy_j = c.time_s;
  c.cut_bytes.clear();
  for (int l = 0; l < layers; ++l) {
    ProfiledLayer& block = c.layers[l / k];
    block.name = p.layers[l].name;
    block.output_bytes = p.layers[l].output_bytes;
    block.weight_bytes += p.layers[l].weight_bytes;
    for (size_t d = 0; d < p.devices.size(); ++d) {
      c.time_s[l / k][d] += p.time_s[l][d];  // kCannotRun (infinite) stays so
      c.energy_j[l / k][d] += p.energy_j[l][d];
    }
    if (l % k == k - 1 && l + 1 < layers) c.cut_bytes.push_back(p.cut_bytes[l]);
  }
  return c;
}

// An achievable C to start the published programme's pruning from: the programme's plan on the
// model coarsened to at most kCoarseBlocks blocks of ceil(L / kCoarseBlocks) layers (ResNet152's
// 209 layers: 24 blocks of 9, so ~1/76 of the work). A plan of the coarsened model is a plan of
// the model, cut at fewer places. Infinite when the model has fewer than kMinCoarsenedLayers
// layers (too little to gain) or the coarse model has no plan.
constexpr int kCoarseBlocks = 26;
constexpr int kMinCoarsenedLayers = 2 * kCoarseBlocks;
double CoarseUpperBound(const Profile& p, double alpha) {
  const int layers = static_cast<int>(p.layers.size());
  if (layers < kMinCoarsenedLayers) return kInf;
  const int k = (layers + kCoarseBlocks - 1) / kCoarseBlocks;
  std::vector<Stage> stages = BestStages(Coarsened(p, k), alpha, Mode::kPublished, kInf);
  for (Stage& s : stages) s.last_layer = std::min((s.last_layer + 1) * k, layers) - 1;
  absl::StatusOr<Plan> plan = PricePlan(p, stages, alpha);
  return plan.ok() ? plan->objective : kInf;
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
  if (input_device && (*input_device < 0 || *input_device >= static_cast<int>(d))) {
    return absl::InvalidArgumentError("input_device is not a device of the profile");
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

namespace {

// T under DeviceReuse::kShared: each device's compute and each directed link's transfers add up.
double BusiestResourceS(const Profile& p, const std::vector<Stage>& stages) {
  const size_t n = p.devices.size();
  std::vector<double> compute(n, 0);
  std::vector<double> link(n * n, 0);
  for (size_t k = 0; k < stages.size(); ++k) {
    compute[stages[k].device] += stages[k].compute_s;
    if (k + 1 < stages.size())
      link[stages[k].device * n + stages[k + 1].device] += stages[k].transfer_s;
  }
  return std::max(*std::max_element(compute.begin(), compute.end()),
                  *std::max_element(link.begin(), link.end()));
}

// The device of stage k: in the cluster, and allowed again under `reuse`.
absl::Status CheckStageDevice(const Profile& p, const std::vector<Stage>& stages, size_t k,
                              DeviceReuse reuse, const std::vector<bool>& used) {
  const int d = stages[k].device;
  if (d < 0 || d >= static_cast<int>(p.devices.size())) {
    return absl::InvalidArgumentError("stage device outside the cluster");
  }
  if (reuse == DeviceReuse::kDistinct && used[d]) {
    return absl::InvalidArgumentError("each stage needs its own device of the cluster");
  }
  if (k > 0 && stages[k - 1].device == d) {
    return absl::InvalidArgumentError(
        absl::StrCat("consecutive stages on ", p.devices[d].name, " must be one stage"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plan> PricePlan(const Profile& p, const std::vector<Stage>& stages, double alpha,
                               DeviceReuse reuse) {
  RETURN_IF_ERROR(p.Validate());
  const StageCosts costs(p);
  Plan plan;
  int first = 0;
  std::vector<bool> used(p.devices.size(), false);
  std::vector<int64_t> weights(p.devices.size(), 0);
  if (p.input_device && !stages.empty() && stages[0].device != *p.input_device) {
    return absl::InvalidArgumentError(absl::StrCat("the first stage must run on ",
                                                   p.devices[*p.input_device].name,
                                                   ", where the input arrives"));
  }
  for (size_t k = 0; k < stages.size(); ++k) {
    RETURN_IF_ERROR(CheckStageDevice(p, stages, k, reuse, used));
    Stage s = stages[k];
    const int d = s.device;
    used[d] = true;
    const int end = s.last_layer + 1;
    if (end <= first || end > static_cast<int>(p.layers.size())) {
      return absl::InvalidArgumentError("stages must cover the layers in order");
    }
    for (int l = first; l < end; ++l) weights[d] += p.layers[l].weight_bytes;
    if (!costs.Runs(d, first, end) || weights[d] > p.devices[d].memory_bytes) {
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
  if (reuse == DeviceReuse::kShared) plan.bottleneck_s = BusiestResourceS(p, plan.stages);
  const Normalisation n = NormalisationOf(p);
  plan.objective = alpha * plan.bottleneck_s / n.time_s + (1 - alpha) * plan.energy_j / n.energy_j;
  return plan;
}

absl::StatusOr<Plan> DonnaPublished(const Profile& p, double alpha) {
  RETURN_IF_ERROR(CheckProblem(p, alpha));
  // Pruning starts from the coarsened model's plan (CoarseUpperBound) rather than waiting for
  // the sweep's own late, multi-stage plans. At alpha 0 and 1 the single label is exact and any
  // achievable bound keeps the optimum. Between them the sweep drops only what the plain sweep
  // would drop without effect (Pruning::kOwnCost), so it returns the plain sweep's plan whenever
  // that plan is within the bound, and nothing when it is not (the coarse plan can be cheaper
  // than the programme's own: the programme is not exact there); then it sweeps again without
  // the seed. The coarse plan itself is never returned.
  std::vector<Stage> stages;
  if (const double coarse = CoarseUpperBound(p, alpha); coarse < kInf) {
    // The slack here is for the lower bounds at alpha 0 and 1, which compare with the bound
    // itself; set_bound adds kOwnCost's own on top, which only keeps more.
    stages = BestStages(p, alpha, Mode::kPublished, coarse * (1 + kBoundSlack));
  }
  if (stages.empty()) stages = BestStages(p, alpha, Mode::kPublished, kInf);
  if (stages.empty()) return NoPlan(p);
  return PricePlan(p, stages, alpha);
}

absl::StatusOr<Plan> DonnaExact(const Profile& p, double alpha) {
  // At alpha 0 (1) C is E (T) alone and the least-C label of a state does at least as well as
  // any other in every continuation, so the published programme is already exact.
  if (alpha == 0 || alpha == 1) return DonnaPublished(p, alpha);
  // The published programme's plan is achievable, so its cost bounds the exact search.
  absl::StatusOr<Plan> seed = DonnaPublished(p, alpha);
  if (!seed.ok()) return seed.status();
  const std::vector<Stage> stages =
      BestStages(p, alpha, Mode::kExact, seed->objective * (1 + kBoundSlack));
  // Nothing below the bound: the seed is optimal (e.g. an objective of 0, whose bound is 0).
  if (stages.empty()) return seed;
  absl::StatusOr<Plan> plan = PricePlan(p, stages, alpha);
  // Within the slack the seed may still be the cheaper of the two.
  if (plan.ok() && plan->objective > seed->objective) return seed;
  return plan;
}

void ForEachPlan(const Profile& p, double alpha, const std::function<void(const Plan&)>& visit) {
  const int layers = static_cast<int>(p.layers.size());
  const int devices = static_cast<int>(p.devices.size());
  std::vector<Stage> stages;
  std::vector<bool> used(devices, false);
  // Every ordered sequence of distinct devices with every set of cut points.
  auto recurse = [&](auto& self, int first) -> void {
    if (first == layers) {
      absl::StatusOr<Plan> plan = PricePlan(p, stages, alpha);
      if (plan.ok()) visit(*plan);
      return;
    }
    for (int d = 0; d < devices; ++d) {
      if (used[d] || (first == 0 && p.input_device && d != *p.input_device)) continue;
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
}

absl::StatusOr<Plan> BruteForcePartition(const Profile& p, double alpha) {
  RETURN_IF_ERROR(CheckProblem(p, alpha));
  std::optional<Plan> best;
  ForEachPlan(p, alpha, [&](const Plan& plan) {
    if (!best || plan.objective < best->objective) best = plan;
  });
  if (!best) return NoPlan(p);
  return *best;
}

namespace {

// How far apart two figures of one axis may be and still count as equal: a plan's energy is a
// sum of prefix-sum differences (StageCosts), so two cuts of the same layers over like devices
// come out a few ulps of the largest figure apart though their energy is the same.
constexpr double kTieTolerance = 1e-12;

// Whether `b` is no worse than `a` on both axes (throughput_per_s(), energy_j) within the
// tolerances: then `a` is either beaten on one axis and tied on the other, or a duplicate.
bool NoWorse(const Plan& b, const Plan& a, double tol_t, double tol_e) {
  return b.throughput_per_s() >= a.throughput_per_s() - tol_t && b.energy_j <= a.energy_j + tol_e;
}

// Keeps the plans no other plan matches or beats on both axes and beats on one (of plans that
// tie on both, the first by throughput then energy: the sort is stable over the search's order).
std::vector<Plan> NonDominated(std::vector<Plan> plans) {
  std::stable_sort(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) {
    if (a.throughput_per_s() != b.throughput_per_s()) {
      return a.throughput_per_s() > b.throughput_per_s();
    }
    return a.energy_j < b.energy_j;
  });
  double max_t = 0, max_e = 0;
  for (const Plan& plan : plans) {
    max_t = std::max(max_t, plan.throughput_per_s());
    max_e = std::max(max_e, plan.energy_j);
  }
  const double tol_t = kTieTolerance * max_t, tol_e = kTieTolerance * max_e;
  std::vector<Plan> front;
  for (size_t i = 0; i < plans.size(); ++i) {
    bool dropped = false;
    for (size_t k = 0; k < plans.size() && !dropped; ++k) {
      // An earlier plan no worse on both, or a later one that is also better beyond the tie.
      dropped = k != i && NoWorse(plans[k], plans[i], tol_t, tol_e) &&
                (k < i || !NoWorse(plans[i], plans[k], tol_t, tol_e));
    }
    if (!dropped) front.push_back(plans[i]);
  }
  return front;
}

}  // namespace

absl::StatusOr<std::vector<Plan>> ParetoFront(const Profile& p) {
  RETURN_IF_ERROR(CheckProblem(p, 1.0));
  Search search(p, 1.0, Mode::kFront);
  // The search's own sums round differently from PricePlan's, so they only discard plans beaten
  // by a clear margin on both axes; the front itself is taken on the priced figures, the ones
  // `cnn pareto` reports (a tie there within rounding of the search's sums would otherwise stay).
  constexpr double kMargin = 1e-9;
  std::vector<std::pair<double, double>> points;
  std::vector<std::vector<Stage>> plans;
  search.Run([&](int state, int label, int u, double t, double e) {
    for (const auto& [pt, pe] : points) {
      if (pt * (1 + kMargin) < t && pe * (1 + kMargin) < e) return;
    }
    points.push_back({t, e});
    plans.push_back(search.Trace(state, label, u));
  });
  std::vector<Plan> priced;
  for (const std::vector<Stage>& stages : plans) {
    ASSIGN_OR_RETURN(Plan plan, PricePlan(p, stages, 1.0));
    priced.push_back(std::move(plan));
  }
  std::vector<Plan> front = NonDominated(std::move(priced));
  if (front.empty()) return NoPlan(p);
  return front;
}

}  // namespace neupims::scheduler::partition
