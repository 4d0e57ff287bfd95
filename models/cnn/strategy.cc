#include "models/cnn/strategy.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace neupims::models::cnn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Costs evaluated once: every singleton and every runnable candidate.
struct Costed {
  std::vector<double> single;           // per node
  std::vector<FusionGroup> candidates;  // runnable ones only
  std::vector<double> candidate_cost;
};

absl::StatusOr<Costed> Evaluate(const Graph& g, const std::vector<FusionGroup>& candidates,
                                GroupCostFn cost) {
  Costed c;
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n) {
    std::optional<double> s = cost(FusionGroup{FusionKind::kSingle, {n}});
    if (!s) {
      return absl::FailedPreconditionError(
          absl::StrCat("node '", g.nodes[n].name, "' cannot run on its own on this device"));
    }
    c.single.push_back(*s);
  }
  for (const FusionGroup& f : candidates) {
    for (int n : f.nodes) {
      if (n < 0 || n >= static_cast<int>(g.nodes.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("fusion candidate names node ", n, " outside the graph"));
      }
    }
    if (std::optional<double> v = cost(f)) {
      c.candidates.push_back(f);
      c.candidate_cost.push_back(*v);
    }
  }
  return c;
}

// Orders the groups so that each runs after every group it reads from (Kahn's algorithm).
absl::StatusOr<std::vector<FusionGroup>> ExecutionOrder(const Graph& g,
                                                        std::vector<FusionGroup> groups) {
  std::vector<int> group_of(g.nodes.size(), -1);
  for (int i = 0; i < static_cast<int>(groups.size()); ++i) {
    for (int n : groups[i].nodes) group_of[n] = i;
  }
  std::vector<std::vector<int>> next(groups.size());
  std::vector<int> indegree(groups.size(), 0);
  for (int i = 0; i < static_cast<int>(groups.size()); ++i) {
    for (int n : groups[i].nodes) {
      for (int in : g.nodes[n].inputs) {
        const int j = group_of[in];
        if (j != i) {
          next[j].push_back(i);
          ++indegree[i];
        }
      }
    }
  }
  std::vector<int> ready, order;
  for (int i = 0; i < static_cast<int>(groups.size()); ++i) {
    if (indegree[i] == 0) ready.push_back(i);
  }
  while (!ready.empty()) {
    // Smallest first node first, so the order follows the graph's where it can.
    auto it = std::min_element(ready.begin(), ready.end(), [&](int a, int b) {
      return groups[a].nodes.front() < groups[b].nodes.front();
    });
    const int i = *it;
    ready.erase(it);
    order.push_back(i);
    for (int j : next[i]) {
      if (--indegree[j] == 0) ready.push_back(j);
    }
  }
  if (order.size() != groups.size()) {
    return absl::InternalError("the chosen fusions form a cycle between groups");
  }
  std::vector<FusionGroup> out;
  for (int i : order) out.push_back(std::move(groups[i]));
  return out;
}

// Fills the nodes no chosen fusion covers with singletons, orders and prices the result.
absl::StatusOr<Strategy> Finish(const Graph& g, const Costed& c, const std::vector<int>& chosen) {
  std::vector<bool> covered(g.nodes.size(), false);
  std::vector<FusionGroup> groups;
  double total = 0;
  for (int i : chosen) {
    groups.push_back(c.candidates[i]);
    total += c.candidate_cost[i];
    for (int n : c.candidates[i].nodes) covered[n] = true;
  }
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n) {
    if (!covered[n]) {
      groups.push_back({FusionKind::kSingle, {n}});
      total += c.single[n];
    }
  }
  ASSIGN_OR_RETURN(std::vector<FusionGroup> ordered, ExecutionOrder(g, std::move(groups)));
  return Strategy{std::move(ordered), total};
}

double Gain(const Costed& c, int i) {
  double alone = 0;
  for (int n : c.candidates[i].nodes) alone += c.single[n];
  return alone - c.candidate_cost[i];
}

std::vector<int> Greedy(const Graph& g, const Costed& c) {
  // Template priority of the greedy matcher: the order templates are tried at a node.
  const FusionKind priority[] = {FusionKind::kConvConv, FusionKind::kPoolConv,
                                 FusionKind::kConvPool, FusionKind::kConvEltwise,
                                 FusionKind::kHorizontal};
  std::vector<bool> used(g.nodes.size(), false);
  std::vector<int> chosen;
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n) {
    if (used[n]) continue;
    for (FusionKind kind : priority) {
      int pick = -1;
      for (int i = 0; i < static_cast<int>(c.candidates.size()) && pick < 0; ++i) {
        const FusionGroup& f = c.candidates[i];
        if (f.kind != kind || f.nodes.front() != n || Gain(c, i) <= 0) continue;
        if (std::none_of(f.nodes.begin(), f.nodes.end(), [&](int m) { return used[m]; })) {
          pick = i;
        }
      }
      if (pick >= 0) {
        chosen.push_back(pick);
        for (int m : c.candidates[pick].nodes) used[m] = true;
        break;
      }
    }
  }
  return chosen;
}

// Chains: maximal runs of nodes linked by an edge whose producer has one consumer and whose
// consumer has one input. Their ends are the barriers of Algorithm 2.
struct Chains {
  std::vector<int> chain_of;  // node -> chain
  std::vector<int> pos;       // node -> position in its chain
  std::vector<std::vector<int>> nodes;
};

Chains BuildChains(const Graph& g, const std::vector<std::vector<int>>& consumers) {
  Chains ch;
  ch.chain_of.assign(g.nodes.size(), -1);
  ch.pos.assign(g.nodes.size(), 0);
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n) {
    const std::vector<int>& in = g.nodes[n].inputs;
    int chain = -1;
    if (in.size() == 1 && consumers[in[0]].size() == 1) chain = ch.chain_of[in[0]];
    if (chain < 0) {
      chain = static_cast<int>(ch.nodes.size());
      ch.nodes.emplace_back();
    }
    ch.chain_of[n] = chain;
    ch.pos[n] = static_cast<int>(ch.nodes[chain].size());
    ch.nodes[chain].push_back(n);
  }
  return ch;
}

// The exact search of Algorithm 2 over one graph.
class OptimalSearch {
 public:
  OptimalSearch(const Graph& g, const Costed& c)
      : g_(g), c_(c), chains_(BuildChains(g, g.Consumers())) {
    internal_.resize(chains_.nodes.size());
    for (int i = 0; i < static_cast<int>(c.candidates.size()); ++i) {
      const std::vector<int>& nodes = c.candidates[i].nodes;
      if (IsInterval(nodes)) {
        internal_[chains_.chain_of[nodes.front()]].push_back(i);
      } else {
        cross_.push_back(i);
      }
    }
  }

  // False once a component stopped at kMaxSearchSteps or exceeded kMaxSearchDepth.
  bool proven() const { return proven_; }

  std::vector<int> Run() {
    std::vector<int> chosen;
    std::vector<bool> chain_done(chains_.nodes.size(), false);
    for (const std::vector<int>& component : CrossComponents()) {
      SolveComponent(component, &chosen, &chain_done);
    }
    std::vector<bool> removed_none(g_.nodes.size(), false);
    for (int ch = 0; ch < static_cast<int>(chains_.nodes.size()); ++ch) {
      if (!chain_done[ch]) ShortestPath(ch, removed_none, &chosen);
    }
    return chosen;
  }

 private:
  bool IsInterval(const std::vector<int>& nodes) const {
    const int chain = chains_.chain_of[nodes.front()];
    for (size_t i = 1; i < nodes.size(); ++i) {
      if (chains_.chain_of[nodes[i]] != chain ||
          chains_.pos[nodes[i]] != chains_.pos[nodes[i - 1]] + 1) {
        return false;
      }
    }
    return true;
  }

  std::vector<int> ChainsOf(int candidate) const {
    std::vector<int> out;
    for (int n : c_.candidates[candidate].nodes) out.push_back(chains_.chain_of[n]);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  // Barrier-crossing candidates grouped so that two groups share no chain (and no node): each
  // group can be decided on its own.
  std::vector<std::vector<int>> CrossComponents() const {
    std::vector<int> parent(cross_.size());
    std::iota(parent.begin(), parent.end(), 0);
    const auto find = [&](int x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    std::vector<int> owner(chains_.nodes.size(), -1);
    for (int k = 0; k < static_cast<int>(cross_.size()); ++k) {
      for (int ch : ChainsOf(cross_[k])) {
        if (owner[ch] < 0) {
          owner[ch] = k;
        } else {
          parent[find(k)] = find(owner[ch]);
        }
      }
    }
    std::vector<std::vector<int>> by_root(cross_.size());
    for (int k = 0; k < static_cast<int>(cross_.size()); ++k) by_root[find(k)].push_back(k);
    std::vector<std::vector<int>> out;
    for (auto& members : by_root) {
      if (!members.empty()) out.push_back(std::move(members));
    }
    return out;
  }

  // Lines 5-12: every disjoint choice of the component's barrier fusions, each completed by the
  // shortest paths of the chains it cuts; the cheapest wins.
  void SolveComponent(const std::vector<int>& component, std::vector<int>* chosen,
                      std::vector<bool>* chain_done) {
    std::vector<int> chains;
    for (int k : component) {
      for (int ch : ChainsOf(cross_[k])) chains.push_back(ch);
    }
    std::sort(chains.begin(), chains.end());
    chains.erase(std::unique(chains.begin(), chains.end()), chains.end());
    best_cost_ = kInf;
    best_picks_.clear();
    std::vector<bool> removed(g_.nodes.size(), false);
    std::vector<int> picks;
    steps_ = 0;
    if (component.size() <= static_cast<size_t>(kMaxSearchDepth)) {
      Enumerate(component, 0, chains, &removed, &picks, 0.0);
    }
    if (component.size() > static_cast<size_t>(kMaxSearchDepth) || steps_ > kMaxSearchSteps) {
      proven_ = false;
      TryGreedyByGain(component, chains);
    }
    chosen->insert(chosen->end(), best_picks_.begin(), best_picks_.end());
    for (int ch : chains) (*chain_done)[ch] = true;
  }

  // The component's cover with its barrier fusions taken by decreasing saving while disjoint,
  // completed by the chains' shortest paths; kept if cheaper than the best seen.
  void TryGreedyByGain(const std::vector<int>& component, const std::vector<int>& chains) {
    std::vector<int> order;
    for (int k : component) order.push_back(cross_[k]);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return Gain(c_, a) > Gain(c_, b); });
    std::vector<bool> removed(g_.nodes.size(), false);
    std::vector<int> all;
    double total = 0;
    for (int cand : order) {
      const std::vector<int>& nodes = c_.candidates[cand].nodes;
      if (Gain(c_, cand) <= 0 ||
          std::any_of(nodes.begin(), nodes.end(), [&](int n) { return removed[n]; })) {
        continue;
      }
      for (int n : nodes) removed[n] = true;
      all.push_back(cand);
      total += c_.candidate_cost[cand];
    }
    for (int ch : chains) total += ShortestPath(ch, removed, &all);
    if (total < best_cost_) {
      best_cost_ = total;
      best_picks_ = std::move(all);
    }
  }

  void Enumerate(const std::vector<int>& component, size_t k, const std::vector<int>& chains,
                 std::vector<bool>* removed, std::vector<int>* picks, double cost) {
    if (++steps_ > kMaxSearchSteps) return;  // SolveComponent falls back
    if (k == component.size()) {
      std::vector<int> all = *picks;
      double total = cost;
      for (int ch : chains) total += ShortestPath(ch, *removed, &all);
      if (total < best_cost_) {
        best_cost_ = total;
        best_picks_ = std::move(all);
      }
      return;
    }
    Enumerate(component, k + 1, chains, removed, picks, cost);
    const int cand = cross_[component[k]];
    const std::vector<int>& nodes = c_.candidates[cand].nodes;
    if (std::any_of(nodes.begin(), nodes.end(), [&](int n) { return (*removed)[n]; })) return;
    for (int n : nodes) (*removed)[n] = true;
    picks->push_back(cand);
    Enumerate(component, k + 1, chains, removed, picks, cost + c_.candidate_cost[cand]);
    picks->pop_back();
    for (int n : nodes) (*removed)[n] = false;
  }

  // Lines 17-25 on one chain: the cheapest cover of its nodes not `removed` by singletons and
  // the chain's own fusions (an extra edge each), a shortest path from its start to its end.
  // Appends the fusions used to `chosen` and returns the cost.
  double ShortestPath(int ch, const std::vector<bool>& removed, std::vector<int>* chosen) const {
    const std::vector<int>& nodes = chains_.nodes[ch];
    const size_t m = nodes.size();
    std::vector<double> dist(m + 1, kInf);
    std::vector<int> via(m + 1, -1);  // candidate ending here, or -1 for a singleton step
    dist[0] = 0;
    for (size_t i = 0; i < m; ++i) {
      if (dist[i] == kInf) continue;
      const double step = removed[nodes[i]] ? 0 : c_.single[nodes[i]];
      if (dist[i] + step < dist[i + 1]) dist[i + 1] = dist[i] + step, via[i + 1] = -1;
      for (int cand : internal_[ch]) {
        const std::vector<int>& f = c_.candidates[cand].nodes;
        if (chains_.pos[f.front()] != static_cast<int>(i)) continue;
        if (std::any_of(f.begin(), f.end(), [&](int n) { return removed[n]; })) continue;
        const size_t end = i + f.size();
        if (dist[i] + c_.candidate_cost[cand] < dist[end]) {
          dist[end] = dist[i] + c_.candidate_cost[cand];
          via[end] = cand;
        }
      }
    }
    for (size_t i = m; i > 0;) {
      if (via[i] < 0) {
        --i;
      } else {
        chosen->push_back(via[i]);
        i -= c_.candidates[via[i]].nodes.size();
      }
    }
    return dist[m];
  }

  const Graph& g_;
  const Costed& c_;
  Chains chains_;
  std::vector<std::vector<int>> internal_;  // per chain: candidates inside it
  std::vector<int> cross_;                  // candidates touching a barrier
  double best_cost_ = kInf;
  std::vector<int> best_picks_;
  int64_t steps_ = 0;   // Enumerate calls for the current component
  bool proven_ = true;  // no component stopped at the budget
};

void BruteForce(const Costed& c, size_t k, std::vector<bool>* used, std::vector<int>* picks,
                double saved, double* best_saved, std::vector<int>* best) {
  if (k == c.candidates.size()) {
    if (saved > *best_saved) *best_saved = saved, *best = *picks;
    return;
  }
  BruteForce(c, k + 1, used, picks, saved, best_saved, best);
  const std::vector<int>& nodes = c.candidates[k].nodes;
  if (std::any_of(nodes.begin(), nodes.end(), [&](int n) { return (*used)[n]; })) return;
  for (int n : nodes) (*used)[n] = true;
  picks->push_back(static_cast<int>(k));
  BruteForce(c, k + 1, used, picks, saved + Gain(c, static_cast<int>(k)), best_saved, best);
  picks->pop_back();
  for (int n : nodes) (*used)[n] = false;
}

// Algorithm 2; where its enumeration stopped at the budget, never worse than greedy.
absl::StatusOr<Strategy> Optimal(const Graph& g, const Costed& c) {
  OptimalSearch search(g, c);
  ASSIGN_OR_RETURN(Strategy s, Finish(g, c, search.Run()));
  if (search.proven()) return s;
  ASSIGN_OR_RETURN(Strategy greedy, Finish(g, c, Greedy(g, c)));
  if (greedy.cost < s.cost) s = std::move(greedy);
  s.proven_optimal = false;
  return s;
}

constexpr EnumName<StrategyKind> kStrategyKinds[] = {{"none", StrategyKind::kNone},
                                                     {"greedy", StrategyKind::kGreedy},
                                                     {"optimal", StrategyKind::kOptimal}};

}  // namespace

const EnumNames<StrategyKind>& StrategyKindNames() {
  static constexpr EnumNames<StrategyKind> kNames("fusion strategy", kStrategyKinds);
  return kNames;
}

absl::StatusOr<Strategy> ChooseStrategy(const Graph& graph,
                                        const std::vector<FusionGroup>& candidates,
                                        StrategyKind kind, GroupCostFn cost) {
  ASSIGN_OR_RETURN(Costed c, Evaluate(graph, candidates, cost));
  switch (kind) {
    case StrategyKind::kNone:
      return Finish(graph, c, {});
    case StrategyKind::kGreedy:
      return Finish(graph, c, Greedy(graph, c));
    case StrategyKind::kOptimal:
      return Optimal(graph, c);
  }
  return absl::InvalidArgumentError("unknown strategy kind");
}

absl::StatusOr<Strategy> BruteForceStrategy(const Graph& graph,
                                            const std::vector<FusionGroup>& candidates,
                                            GroupCostFn cost) {
  ASSIGN_OR_RETURN(Costed c, Evaluate(graph, candidates, cost));
  std::vector<bool> used(graph.nodes.size(), false);
  std::vector<int> picks, best;
  double best_saved = 0;
  BruteForce(c, 0, &used, &picks, 0, &best_saved, &best);
  return Finish(graph, c, best);
}

}  // namespace neupims::models::cnn
