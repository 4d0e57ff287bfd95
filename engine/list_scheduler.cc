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

double ListScheduler::Run(absl::Span<ScheduleNode> nodes, bool blocked) {
  const int n = static_cast<int>(nodes.size());
  // Users of each node in CSR form (deps point backwards).
  user_begin_.assign(n + 1, 0);
  for (const ScheduleNode& node : nodes) {
    for (int d : node.deps) ++user_begin_[d + 1];
  }
  for (int i = 0; i < n; ++i) user_begin_[i + 1] += user_begin_[i];
  users_.resize(user_begin_[n]);
  waiting_.assign(n, 0);
  ready_at_.assign(n, 0.0);
  ready_.clear();
  running_.clear();
  {
    std::vector<int>& fill = waiting_;  // temporarily: next free slot per node
    for (int i = 0; i < n; ++i) {
      for (int d : nodes[i].deps) users_[user_begin_[d] + fill[d]++] = i;
    }
  }
  for (int i = 0; i < n; ++i) {
    nodes[i].start_ns = nodes[i].end_ns = -1;
    waiting_[i] = static_cast<int>(nodes[i].deps.size());
    if (waiting_[i] == 0) ready_.push_back(i);
  }
  constexpr int kPim = static_cast<int>(Lane::kPim);
  constexpr int kSystolic = static_cast<int>(Lane::kSystolic);
  constexpr int kOrder[kNumLanes] = {kPim, kSystolic, static_cast<int>(Lane::kVector),
                                     static_cast<int>(Lane::kInterconnect)};
  double lane_free[kNumLanes] = {0, 0, 0, 0};
  int done = 0;
  double t = 0, makespan = 0;
  while (done < n) {
    // Retire finished nodes: their users become ready when t reaches the end.
    for (size_t k = 0; k < running_.size();) {
      if (running_[k].first > t) {
        ++k;
        continue;
      }
      const int i = running_[k].second;
      for (int j = user_begin_[i]; j < user_begin_[i + 1]; ++j) {
        const int u = users_[j];
        ready_at_[u] = std::max(ready_at_[u], nodes[i].end_ns);
        if (--waiting_[u] == 0) ready_.push_back(u);
      }
      ++done;
      running_[k] = running_.back();
      running_.pop_back();
    }
    bool started = false;
    for (int lane : kOrder) {
      if (lane_free[lane] > t) continue;
      if (blocked && lane == kSystolic && lane_free[kPim] > t) continue;
      if (blocked && lane == kPim && lane_free[kSystolic] > t) continue;
      int best = -1;  // position in ready_
      for (size_t r = 0; r < ready_.size(); ++r) {
        const int i = ready_[r];
        if (static_cast<int>(nodes[i].lane) != lane || ready_at_[i] > t) continue;
        if (best < 0 || nodes[i].priority < nodes[ready_[best]].priority)
          best = static_cast<int>(r);
      }
      if (best < 0) continue;
      const int i = ready_[best];
      ScheduleNode& node = nodes[i];
      double dur = node.dur_ns;
      if (lane == kSystolic && lane_free[kPim] > t && !blocked &&
          node.dur_shared_ns > node.dur_ns) {
        const double rate = node.dur_ns / node.dur_shared_ns;  // fraction of full speed
        const double overlap = lane_free[kPim] - t;
        dur = overlap * rate >= node.dur_ns ? node.dur_shared_ns
                                            : overlap + (node.dur_ns - overlap * rate);
      }
      node.start_ns = t;
      node.end_ns = t + dur;
      lane_free[lane] = node.end_ns;
      makespan = std::max(makespan, node.end_ns);
      running_.emplace_back(node.end_ns, i);
      ready_[best] = ready_.back();  // priorities are unique: the order of ready_ is free
      ready_.pop_back();
      started = true;
    }
    if (started) continue;
    // Advance to the next event: a completion, a lane freeing up, or a node becoming ready.
    double next = std::numeric_limits<double>::infinity();
    for (const auto& [end, i] : running_) next = std::min(next, end);
    for (double f : lane_free) {
      if (f > t) next = std::min(next, f);
    }
    for (int i : ready_) {
      if (ready_at_[i] > t) next = std::min(next, ready_at_[i]);
    }
    if (!std::isfinite(next)) break;  // nothing can progress (cannot happen for a DAG)
    t = next;
  }
  return makespan;
}

}  // namespace neupims::engine
