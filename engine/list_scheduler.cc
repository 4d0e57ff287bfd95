#include "engine/list_scheduler.h"

#include <algorithm>
#include <cmath>
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

}  // namespace

double ListScheduler::Run(absl::Span<ScheduleNode> nodes, bool blocked, bool barriers) {
  const int n = static_cast<int>(nodes.size());
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
  constexpr int kPim = static_cast<int>(Lane::kPim);
  constexpr int kSystolic = static_cast<int>(Lane::kSystolic);
  constexpr int kOrder[kNumLanes] = {kPim, kSystolic, static_cast<int>(Lane::kVector),
                                     static_cast<int>(Lane::kInterconnect)};
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
