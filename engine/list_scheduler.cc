#include "engine/list_scheduler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace neupims::engine {

const char* ToString(Lane lane) {
  switch (lane) {
    case Lane::kSystolic:
      return "NPU systolic arrays";
    case Lane::kVector:
      return "NPU vector units";
    case Lane::kPim:
      return "PIM";
    case Lane::kInterconnect:
      return "interconnect";
  }
  return "?";
}

namespace {

// The highest-priority (lowest value) node of a non-empty ready list, as its index in the list.
int Best(absl::Span<const ScheduleNode> nodes, const std::vector<int>& ready) {
  size_t best = 0;
  for (size_t r = 1; r < ready.size(); ++r) {
    if (nodes[ready[r]].priority < nodes[ready[best]].priority) best = r;
  }
  return static_cast<int>(best);
}

// As Best among the nodes of stages up to `open_stage`; -1 if there is none.
int BestOfStage(absl::Span<const ScheduleNode> nodes, const std::vector<int>& ready,
                int open_stage) {
  int best = -1;
  for (size_t r = 0; r < ready.size(); ++r) {
    if (nodes[ready[r]].stage > open_stage) continue;
    if (best < 0 || nodes[ready[r]].priority < nodes[ready[best]].priority) {
      best = static_cast<int>(r);
    }
  }
  return best;
}

// How long `node` runs when it starts now: a GEMM (`shares_bandwidth`) that starts while the PIM
// computes for `pim_left` more ns progresses at the reduced bandwidth share until the PIM frees
// the channels, then at full speed.
double Duration(const ScheduleNode& node, bool shares_bandwidth, double pim_left) {
  if (!shares_bandwidth || pim_left <= 0 || node.dur_shared_ns <= node.dur_ns) return node.dur_ns;
  const double rate = node.dur_ns / node.dur_shared_ns;  // fraction of full speed
  return pim_left * rate >= node.dur_ns ? node.dur_shared_ns
                                        : pim_left + (node.dur_ns - pim_left * rate);
}

// A point in the event loop: a time and the pass at that time (a zero-duration node started in
// pass q is retired in pass q + 1 at the same time), ordered by time, then pass. Times are
// finite and >= 0 (Replay checks), so the bits of the double order them as integers below
// 2^63, and a point of pass 1 or 2 is one 64-bit integer: twice the bits plus the pass - 1
// (Replay refuses a third pass, which needs a zero-duration node after a zero-duration node).
using Point = uint64_t;
constexpr uint64_t Bits(double t) { return std::bit_cast<uint64_t>(t); }
// The bits of the largest finite double: a double >= +0 is finite exactly when its bits are at
// most these.
constexpr uint64_t kMaxFiniteBits = Bits(std::numeric_limits<double>::max());
Point At(double t, int pass) { return (Bits(t) << 1) | static_cast<uint64_t>(pass - 1); }
int PassOf(Point p) { return static_cast<int>(p & 1) + 1; }
double TimeOf(Point p) {
  const uint64_t bits = p >> 1;
  double t;
  std::memcpy(&t, &bits, sizeof(t));
  return t;
}

// The lanes in the order they decide within a pass (the PIM first: a GEMM that starts at the
// same time sees it busy).
constexpr int kPim = static_cast<int>(Lane::kPim);
constexpr int kSystolic = static_cast<int>(Lane::kSystolic);
constexpr int kOrder[kNumLanes] = {kPim, kSystolic, static_cast<int>(Lane::kVector),
                                   static_cast<int>(Lane::kInterconnect)};
constexpr int kRank[kNumLanes] = {1, 2, 0, 3};  // position of each lane in kOrder
static_assert(kOrder[kRank[0]] == 0 && kOrder[kRank[1]] == 1 && kOrder[kRank[2]] == 2 &&
              kOrder[kRank[3]] == 3);

}  // namespace

double ListScheduler::Run(absl::Span<ScheduleNode> nodes, bool blocked, bool barriers,
                          uint64_t shape) {
  ++calls_;
  // Blocked mode couples the PIM and systolic lanes' free times; it always runs the loop.
  // Otherwise every remembered order of this node count is tried, the most recently used
  // first: a graph whose durations cross back and forth alternates between a few orders.
  std::array<Memory*, kMemories> found{};
  const int count = blocked ? 0 : Find(nodes.size(), barriers, &found);
  for (int c = 0; c < count; ++c) {
    Memory* memory = found[c];
    double makespan = 0;
    if (shape != 0 && memory->shape == shape && Lean(nodes, *memory, &makespan)) {
      memory->last_used = calls_;
      ++lean_replays_;
      return makespan;
    }
    if (Replay(nodes, memory->order, barriers, &makespan)) {
      memory->last_used = calls_;
      ++checked_replays_;
      if (shape != 0 && !barriers) Prove(nodes, memory, shape);
      return makespan;
    }
  }
  ++event_loop_runs_;
  const double makespan = RunEventLoop(nodes, blocked, barriers);
  // Every node started (a DAG): remember the order in place of the least recently used one
  // (an order that failed here is kept while slots remain: the durations may cross back).
  if (blocked || order_.size() != nodes.size()) return makespan;
  Memory* memory = &*std::min_element(
      memories_.begin(), memories_.end(),
      [](const Memory& a, const Memory& b) { return a.last_used < b.last_used; });
  memory->barriers = barriers;
  memory->last_used = calls_;
  memory->order.swap(order_);
  // A new order: no proof, no ancestor sets yet.
  memory->shape = memory->ancestors_shape = 0;
  return makespan;
}

int ListScheduler::Find(size_t n, bool barriers, std::array<Memory*, kMemories>* found) {
  int count = 0;
  for (Memory& m : memories_) {
    if (m.last_used == 0 || m.order.size() != n || m.barriers != barriers) continue;
    // Insertion by last use, descending (at most kMemories entries).
    int at = count++;
    for (; at > 0 && (*found)[at - 1]->last_used < m.last_used; --at)
      (*found)[at] = (*found)[at - 1];
    (*found)[at] = &m;
  }
  return count;
}

// Takes the nodes in a remembered start order and checks, by induction over it, that the event
// loop on these nodes would start them in that order at the same times. Nothing else is taken
// from the remembered call: lanes, priorities, stages and dependencies are the current nodes',
// and an order that does not start every node once after its dependencies is refused. If
// every earlier decision is the loop's, node i (lane L) is its next decision on L, at point
// D = max(i's ready point, the point L became free), when
//   - D is after the previous decision's point (same point: L decides later in the pass);
//     otherwise the order itself changed;
//   - no node of L that was ready by an earlier decision point of L has a better (or equal)
//     priority than the node started there: checked when that node comes up, as its ready
//     point is then known, and a node whose dependencies are not all started yet is ready
//     only after D;
//   - no node of L was ready before a point at which L had idled up to then.
// The start, end and bandwidth-sharing duration are the event loop's expressions.
bool ListScheduler::Replay(absl::Span<ScheduleNode> nodes, absl::Span<const int> order,
                           bool barriers, double* makespan) {
  const int n = static_cast<int>(nodes.size());
  if (order.size() != nodes.size()) return false;
  constexpr Point kUnset = ~Point{0};  // not yet started: no finite time has these bits
  // The pass runs once per node of every replayed stage: raw pointers and per-lane decision
  // counts in locals (no bounds-checked spans, no vector ends reloaded after each store).
  // retire[DepList::kNone] is the origin, so a node's ready point is the max over its four
  // padded dependency slots, without a loop over its dependency count.
  static_assert(DepList::kNone == -1 && DepList::kMax == 4);
  retire_.assign(n + 1, kUnset);
  Point* retire = retire_.data() + 1;
  // Each lane's decisions so far, in order, after a sentinel whose `after` (0) is no point's: the
  // walk below stops at it without counting.
  const size_t per_lane = static_cast<size_t>(n) + 1;
  if (decisions_.size() < kNumLanes * per_lane) decisions_.resize(kNumLanes * per_lane);
  Decision* taken_end[kNumLanes];  // one past each lane's last decision
  for (int lane = 0; lane < kNumLanes; ++lane) {
    Decision* sentinel = decisions_.data() + lane * per_lane;
    *sentinel = {0, 0};
    taken_end[lane] = sentinel + 1;
  }
  ScheduleNode* node_at = nodes.data();
  const Point origin = At(0, 1);  // the first pass at time 0
  retire[DepList::kNone] = origin;
  Point lane_free[kNumLanes] = {origin, origin, origin, origin};   // last node's retire point
  Point idle_start[kNumLanes] = {origin, origin, origin, origin};  // latest decision after idling
  Point last = 0;      // the previous decision's point...
  int last_rank = -1;  // ...and its lane's position in the pass
  double pim_end = 0;  // end of the last PIM node started (the event loop's lane_free)
  Point retired_max = origin, stage_open = origin;  // barriers: latest retire; stage opened
  int stage = -1;
  double span = 0;
  for (const int i : order) {
    // `order` must start each node once, after its dependencies.
    if (static_cast<unsigned>(i) >= static_cast<unsigned>(n) || retire[i] != kUnset) return false;
    ScheduleNode& node = node_at[i];
    const int lane = static_cast<int>(node.lane);
    // origin <= every point: the max over the padded slots is the loop's max(origin, deps).
    const std::array<int, DepList::kMax>& deps = node.deps.padded();
    Point ready = std::max(std::max(retire[deps[0]], retire[deps[1]]),
                           std::max(retire[deps[2]], retire[deps[3]]));
    if (ready == kUnset) return false;
    if (barriers) {
      if (node.stage < stage) return false;
      // Every node of a lower stage started earlier in this order, and is retired by the time
      // the stage opens (the event loop's open_stage).
      if (node.stage > stage) stage_open = retired_max;
      stage = node.stage;
      ready = std::max(ready, stage_open);
    }
    const Point at = std::max(ready, lane_free[lane]);
    if (at < last || (at == last && kRank[lane] <= last_rank)) return false;
    if (ready < idle_start[lane]) return false;
    // The lane's decisions at points >= ready (after > ready), latest first.
    for (const Decision* d = taken_end[lane] - 1; d->after > ready; --d) {
      if (d->priority >= node.priority) return false;  // ties: the loop's ready order
    }
    if (lane_free[lane] < at) idle_start[lane] = at;
    const double t = TimeOf(at);
    const double end = t + Duration(node, lane == kSystolic, pim_end - t);
    // Points need finite times >= 0, and end >= t. t is +0 or positive and finite (a point's
    // time), so end is never -0 and, as an integer, its bits lie in [t's bits, kMaxFiniteBits]
    // exactly when end >= t and end <= the largest double (a negative end has the sign bit,
    // infinity and NaN lie above): one pair of integer compares for the two double checks.
    const uint64_t end_bits = Bits(end), t_bits = at >> 1;
    if (end_bits < t_bits || end_bits > kMaxFiniteBits) return false;
    node.start_ns = t;
    node.end_ns = end;
    if (lane == kPim) pim_end = end;
    span = std::max(span, end);
    Point retired = end_bits << 1;  // At(end, 1) when end > t
    if (end_bits == t_bits) {
      if (PassOf(at) == 2) return false;  // its retire point would be a third pass
      retired = at + 1;                   // At(t, 2)
    }
    retire[i] = retired;
    lane_free[lane] = retired;
    retired_max = std::max(retired_max, retired);
    *taken_end[lane]++ = {at + 1, node.priority};  // at < kUnset: no overflow
    last = at;
    last_rank = kRank[lane];
  }
  *makespan = span;
  return true;
}

// Lean replay: the argument.
//
// Fix the graph's structure (the caller's `shape`: node count, priorities, stages, dependencies),
// the lanes and the order. Replay (above) is then a fixed computation on the durations whose
// outcome is decided by comparisons of retire points (a time and a pass; -1 below is the
// origin): a node's ready point is the max of its dependencies' points, its start point the max
// of that and its lane's last point, and each check compares such points. Prove, after a checked
// replay that passed, records for each position k which candidate was the max (its `source`; a
// tie with the lane's last point takes the lane: the lane did not idle) and the comparisons
// whose outcomes the checks need, each as the proof saw it:
//   - the ready point: every other dependency's point not above the chosen one's (rs, its value);
//   - the start's max: the lane's last point below (strict) or not above rs's (lp against rs),
//     or rs's not above the lane's when the lane is the source; the lane idled exactly when
//     the source is rs;
//   - the order: the previous decision's start not above this one's (below, when this lane
//     does not decide after the previous one's in a pass);
//   - idling: the start of the lane's latest decision after idling (m) not above rs's point;
//   - priorities: the start of the lane's latest earlier decision with a worse or equal priority
//     (w, found with a per-lane stack of decreasing priorities) below rs's point.
// A comparison that holds for any durations is left out: the two sides are the same position
// (not above), or one side's position is an ancestor of the other's (a dependency or the lane's
// previous node, transitively: along such an edge retire points strictly increase as long as
// each end is at least its start, a zero-duration node retiring in the next pass), or m or w is
// rs or an ancestor of it (its start is below its own point).
//
// Lean runs the order with each start at its source's point, the end t + Duration with the
// same floating-point operations as Replay, the retire point as Replay makes it, and Replay's
// range check on each end (finite, not below its start; each node ends at its start exactly
// when it did in the proof, so every pass is the proof's and none is a third); then it
// evaluates the recorded comparisons on the new points. If all hold, by induction over the
// order every ready point and start point is Replay's (the sources are the maxes; ties give
// the same value), every check of Replay passes (the order and priority checks are the recorded
// comparisons or hold by ancestry; a decision that did not idle in the proof does not idle now,
// so the lane's latest start after idling is at most m's and the recorded idling comparison
// implies Replay's), so the checked replay would pass with these times: Lean's times are
// Replay's, which are the event loop's. Any failed comparison runs the checked replay, which
// proves again. Nothing bounds how far the durations moved.
bool ListScheduler::Lean(absl::Span<ScheduleNode> nodes, const Memory& memory, double* makespan) {
  static_assert(kNonZeroRoom == (uint64_t{1} << 63) - 2);
  const size_t n = nodes.size();
  if (memory.steps.size() != n) return false;
  points_.resize(n + 1);
  Point* point = points_.data() + 1;  // per position; point[-1]: the origin
  point[-1] = At(0, 1);
  const LeanStep* step = memory.steps.data();
  const int* order = memory.order.data();
  ScheduleNode* node_at = nodes.data();
  // The largest end's bits: ends are checked finite and non-negative at once (a negative end
  // has the sign bit, infinity and NaN lie above the largest double), and for such ends the
  // bits order as the values, so they also give the makespan.
  uint64_t max_bits = 0;
  double pim_end = 0;
  for (size_t k = 0; k < n; ++k) {
    const LeanStep& s = step[k];
    ScheduleNode& node = node_at[order[k]];
    if (node.lane != s.lane) return false;
    const Point at = point[s.source];
    const double t = TimeOf(at);
    const double end = t + Duration(node, s.lane == Lane::kSystolic, pim_end - t);
    // Replay's range check: for a finite end >= 0 the bits' difference is 0 exactly when the
    // node ends where it starts, and wraps to 2^63 or more when it ends before its start; so
    // it must be 0 for the proof's zero-duration nodes and in [1, 2^63 - 1] for the others
    // (LeanStep::room).
    const uint64_t end_bits = Bits(end), past = end_bits - (at >> 1);
    if (past + s.zero - 1 > s.room) return false;
    node.start_ns = t;
    node.end_ns = end;
    // Replay's retire point: a zero-duration node's start is a first pass (its source is not
    // one: the proof had no third pass, and the zero nodes are the proof's), so At(t, 2).
    point[k] = (end_bits << 1) + s.zero;
    if (s.lane == Lane::kPim) pim_end = end;
    max_bits = std::max(max_bits, end_bits);
  }
  if (max_bits > kMaxFiniteBits) return false;
  bool held = true;
  for (const Comparison& c : memory.not_above) held &= point[c.a] <= point[c.b];
  for (const Comparison& c : memory.below) held &= point[c.a] < point[c.b];
  if (!held) return false;
  *makespan = TimeOf(max_bits << 1);
  return true;
}

void ListScheduler::ComputeAncestors(absl::Span<const ScheduleNode> nodes, Memory* memory) {
  const size_t n = nodes.size(), words = (n + 63) / 64;
  std::vector<uint64_t>& anc = memory->ancestors;
  anc.assign(n * words, 0);
  int lane_prev[kNumLanes] = {-1, -1, -1, -1};
  for (size_t k = 0; k < n; ++k) {
    const ScheduleNode& node = nodes[memory->order[k]];
    uint64_t* row = anc.data() + k * words;
    auto inherit = [&](int q) {
      const uint64_t* from = anc.data() + static_cast<size_t>(q) * words;
      for (size_t w = 0; w < words; ++w) row[w] |= from[w];
      row[q / 64] |= uint64_t{1} << (q % 64);
    };
    for (int d : node.deps) inherit(position_[d]);
    const int lane = static_cast<int>(node.lane);
    if (lane_prev[lane] >= 0) inherit(lane_prev[lane]);
    lane_prev[lane] = static_cast<int>(k);
  }
}

void ListScheduler::Prove(absl::Span<const ScheduleNode> nodes, Memory* memory, uint64_t shape) {
  const int n = static_cast<int>(nodes.size());
  const std::vector<int>& order = memory->order;
  position_.resize(n);
  for (int k = 0; k < n; ++k) position_[order[k]] = k;
  // The ancestor sets hold lane edges too: a lane change (allowed under a shape) recomputes them.
  bool lanes_same = memory->ancestor_lanes.size() == static_cast<size_t>(n);
  for (int i = 0; lanes_same && i < n; ++i) lanes_same = memory->ancestor_lanes[i] == nodes[i].lane;
  if (memory->ancestors_shape != shape || !lanes_same) {
    ComputeAncestors(nodes, memory);
    memory->ancestor_lanes.resize(n);
    for (int i = 0; i < n; ++i) memory->ancestor_lanes[i] = nodes[i].lane;
    memory->ancestors_shape = shape;
  }
  const size_t words = (static_cast<size_t>(n) + 63) / 64;
  const uint64_t* anc = memory->ancestors.data();
  // a (-1: the origin) is a strict ancestor of b.
  auto ancestor = [&](int a, int b) {
    if (b < 0) return false;
    if (a < 0) return true;
    const unsigned bit = static_cast<unsigned>(a);
    return (anc[static_cast<size_t>(b) * words + bit / 64] >> (bit % 64) & 1) != 0;
  };
  std::vector<Comparison>& not_above = memory->not_above;
  std::vector<Comparison>& below = memory->below;
  not_above.clear();
  below.clear();
  // Records "a's retire point below (strict) or not above b's" unless it holds for any durations.
  // Inlined by force: GCC kept it out of line (a call per comparison, a fifth of Prove).
  auto rest_on = [&](int a, int b, bool strict) __attribute__((always_inline)) {
    if (a == b ? !strict : ancestor(a, b)) return;
    (strict ? below : not_above).push_back({a, b});
  };
  points_.assign(n + 1, 0);
  Point* point = points_.data() + 1;  // retire point per position; point[-1]: the origin
  point[-1] = At(0, 1);
  memory->steps.resize(n);
  LeanStep* steps = memory->steps.data();
  for (auto& w : worse_) w.clear();
  int lane_prev[kNumLanes] = {-1, -1, -1, -1}, idle[kNumLanes] = {-1, -1, -1, -1};
  for (int k = 0; k < n; ++k) {
    const ScheduleNode& node = nodes[order[k]];
    const int lane = static_cast<int>(node.lane);
    // Replay's ready point and start point, with the positions they are the points of.
    int rs = -1;
    for (int d : node.deps) {
      const int q = position_[d];
      if (rs < 0 || point[q] > point[rs]) rs = q;
    }
    for (int d : node.deps) rest_on(position_[d], rs, false);
    const int lp = lane_prev[lane];
    // A tie takes the lane: the lane did not idle, and must not start idling (it would move
    // the lane's latest start after idling up).
    const int source = point[lp] >= point[rs] ? lp : rs;
    if (source == lp) {
      rest_on(rs, lp, false);
    } else {
      rest_on(lp, rs, false);  // if the lane stops idling here, its m only moves down
    }
    // The order: the previous decision's start not above this one's (below unless this lane
    // decides later in a pass than the previous one's); an ancestor of k retired before k's
    // start, so it also started before.
    if (k > 0 && !ancestor(k - 1, k)) {
      const int prev_lane = static_cast<int>(steps[k - 1].lane);
      rest_on(steps[k - 1].source, source, kRank[lane] <= kRank[prev_lane]);
    }
    // Idling: the ready point not below where the lane last started a node after idling.
    const int m = idle[lane];
    if (m >= 0 && m != rs && !ancestor(m, rs)) rest_on(steps[m].source, rs, false);
    // Priorities: the lane's latest earlier decision with a worse or equal priority started
    // below the ready point. The stack keeps the lane's decisions that can still be someone's
    // latest worse one: priorities decreasing towards the top.
    std::vector<std::pair<int, int>>& worse = worse_[lane];
    while (!worse.empty() && worse.back().first < node.priority) worse.pop_back();
    if (!worse.empty()) {
      const int w = worse.back().second;
      if (w != rs && !ancestor(w, rs)) rest_on(steps[w].source, rs, true);
      if (worse.back().first == node.priority) worse.pop_back();
    }
    worse.push_back({node.priority, k});
    if (source != lp) idle[lane] = k;
    // The retire point as Replay computes it.
    const Point at = point[source];
    const bool zero = Bits(node.end_ns) == Bits(node.start_ns);
    point[k] = zero ? at + 1 : At(node.end_ns, 1);
    lane_prev[lane] = k;
    steps[k] = {source, node.lane, zero, zero ? 0 : kNonZeroRoom};
  }
  memory->shape = shape;
}

double ListScheduler::RunEventLoop(absl::Span<ScheduleNode> nodes, bool blocked, bool barriers) {
  const int n = static_cast<int>(nodes.size());
  order_.clear();
  // Users of each node in CSR form (deps point backwards).
  user_begin_.assign(n + 1, 0);
  for (const ScheduleNode& node : nodes) {
    for (int d : node.deps) ++user_begin_[d + 1];
  }
  for (int i = 0; i < n; ++i) user_begin_[i + 1] += user_begin_[i];
  users_.resize(user_begin_[n]);
  waiting_.assign(n, 0);  // first: the next free user slot of each node
  for (int i = 0; i < n; ++i) {
    for (int d : nodes[i].deps) users_[user_begin_[d] + waiting_[d]++] = i;
  }
  // Barriers: the open stage is the lowest with nodes not yet retired.
  int open_stage = 0;
  if (barriers) {
    stage_left_.clear();
    for (int i = 0; i < n; ++i) {
      const int st = nodes[i].stage;
      for (int d : nodes[i].deps) NEUPIMS_CHECK_MSG(nodes[d].stage <= st, "stage below a dep's");
      if (st >= static_cast<int>(stage_left_.size())) stage_left_.resize(st + 1, 0);
      ++stage_left_[st];
    }
    while (open_stage < static_cast<int>(stage_left_.size()) && stage_left_[open_stage] == 0) {
      ++open_stage;
    }
  }
  for (auto& r : ready_) r.clear();
  for (int i = 0; i < n; ++i) {
    nodes[i].start_ns = nodes[i].end_ns = -1;
    waiting_[i] = static_cast<int>(nodes[i].deps.size());
    if (waiting_[i] == 0) ready_[static_cast<int>(nodes[i].lane)].push_back(i);
  }
  double lane_free[kNumLanes] = {0, 0, 0, 0};
  // The node each lane runs (-1: none; it ends at lane_free). A lane starts a node only once its
  // previous one has ended and been retired, so one slot per lane holds everything running.
  int lane_node[kNumLanes] = {-1, -1, -1, -1};
  int done = 0;
  double t = 0, makespan = 0;
  // Invariant: a node becomes ready when its last dependency is retired, and a node is retired
  // once t reaches its end, so every ready node can start at t (its deps ended by t).
  while (done < n) {
    // Retire finished nodes: their users become ready.
    for (int lane = 0; lane < kNumLanes; ++lane) {
      const int i = lane_node[lane];
      if (i < 0 || lane_free[lane] > t) continue;
      for (int j = user_begin_[i]; j < user_begin_[i + 1]; ++j) {
        const int u = users_[j];
        if (--waiting_[u] == 0) ready_[static_cast<int>(nodes[u].lane)].push_back(u);
      }
      ++done;
      lane_node[lane] = -1;
      if (barriers && --stage_left_[nodes[i].stage] == 0) {
        while (open_stage < static_cast<int>(stage_left_.size()) && stage_left_[open_stage] == 0) {
          ++open_stage;
        }
      }
    }
    // Each free lane starts its best ready node. Only a zero-duration node (a join) can make
    // more work startable at the same time, so only then is there another pass at t. A lane's
    // decision changes only its own lane_free, so the next completion time (when a lane frees
    // up) is gathered in the same pass.
    bool again = false;
    double next = std::numeric_limits<double>::infinity();
    for (int lane : kOrder) {
      std::vector<int>& ready = ready_[lane];
      const bool can_start = !ready.empty() && lane_free[lane] <= t &&
                             !(blocked && lane == kSystolic && lane_free[kPim] > t) &&
                             !(blocked && lane == kPim && lane_free[kSystolic] > t);
      const int best = !can_start ? -1
                       : barriers ? BestOfStage(nodes, ready, open_stage)
                                  : Best(nodes, ready);
      if (best >= 0) {
        const int i = ready[best];
        ready[best] = ready.back();  // priorities are unique: the order of ready is free
        ready.pop_back();
        ScheduleNode& node = nodes[i];
        node.start_ns = t;
        node.end_ns = t + Duration(node, lane == kSystolic && !blocked, lane_free[kPim] - t);
        lane_free[lane] = node.end_ns;
        makespan = std::max(makespan, node.end_ns);
        lane_node[lane] = i;
        again |= node.end_ns <= t;
        order_.push_back(i);
      }
      if (lane_node[lane] >= 0) next = std::min(next, lane_free[lane]);
    }
    if (again) continue;
    if (!std::isfinite(next)) break;  // nothing can progress (cannot happen for a DAG)
    t = next;
  }
  return makespan;
}

}  // namespace neupims::engine
