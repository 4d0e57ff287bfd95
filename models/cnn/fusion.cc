#include "models/cnn/fusion.h"

#include <algorithm>
#include <deque>
#include <set>
#include <utility>

namespace neupims::models::cnn {
namespace {

enum class VertexType { kAny, kConv, kPool, kEltwise };

struct QueryVertex {
  VertexType type = VertexType::kAny;
  bool fused = true;  // part of the group (false: matched context, e.g. the shared input)
};

// A template as a pattern graph Q_i (sec. 4.2).
struct Pattern {
  FusionKind kind;
  std::vector<QueryVertex> vertices;
  std::vector<std::pair<int, int>> edges;  // u -> v
  bool ordered_convs = false;  // symmetric conv vertices matched in ascending node order
};

std::vector<Pattern> Templates(int max_horizontal) {
  std::vector<Pattern> t = {
      {FusionKind::kConvPool, {{VertexType::kConv}, {VertexType::kPool}}, {{0, 1}}},
      {FusionKind::kConvEltwise, {{VertexType::kConv}, {VertexType::kEltwise}}, {{0, 1}}},
      {FusionKind::kConvConv, {{VertexType::kConv}, {VertexType::kConv}}, {{0, 1}}},
      {FusionKind::kPoolConv, {{VertexType::kPool}, {VertexType::kConv}}, {{0, 1}}},
  };
  for (int k = 2; k <= max_horizontal; ++k) {
    Pattern p{FusionKind::kHorizontal, {{VertexType::kAny, false}}, {}, true};
    for (int i = 1; i <= k; ++i) {
      p.vertices.push_back({VertexType::kConv});
      p.edges.push_back({0, i});
    }
    t.push_back(std::move(p));
  }
  return t;
}

bool TypeMatches(VertexType type, const Node& n) {
  switch (type) {
    case VertexType::kAny:
      return true;
    case VertexType::kConv:
      return n.kind == OpKind::kConv;
    case VertexType::kPool:
      return n.kind == OpKind::kPool;
    case VertexType::kEltwise:
      return n.kind == OpKind::kEltwise;
  }
  return false;
}

// Subgraph isomorphism of one pattern in the graph: Algorithm 1.
class Matcher {
 public:
  Matcher(const Graph& g, const std::vector<std::vector<int>>& consumers, const Pattern& q)
      : g_(g), consumers_(consumers), q_(q), map_(q.vertices.size(), -1) {}

  void Run(std::set<std::vector<int>>* groups) {
    groups_ = groups;
    // Lines 2-7: FilterCandidates; a query vertex with no candidate ends the search.
    candidates_.resize(q_.vertices.size());
    for (size_t v = 0; v < q_.vertices.size(); ++v) {
      for (int u = 0; u < static_cast<int>(g_.nodes.size()); ++u) {
        if (TypeMatches(q_.vertices[v].type, g_.nodes[u])) candidates_[v].push_back(u);
      }
      if (candidates_[v].empty()) return;
    }
    // Line 8: DefineStartPoint, the query vertex of the rarest type.
    int start = 0;
    for (size_t v = 1; v < q_.vertices.size(); ++v) {
      if (candidates_[v].size() < candidates_[start].size()) start = static_cast<int>(v);
    }
    order_ = BreadthFirstOrder(start);
    Search(0);
  }

 private:
  // NextQueryVertex: breadth-first over the pattern (edges taken both ways).
  std::vector<int> BreadthFirstOrder(int start) const {
    std::vector<int> order = {start};
    std::vector<bool> seen(q_.vertices.size(), false);
    seen[start] = true;
    for (size_t i = 0; i < order.size(); ++i) {
      for (const auto& [a, b] : q_.edges) {
        const int next = a == order[i] ? b : (b == order[i] ? a : -1);
        if (next >= 0 && !seen[next]) {
          seen[next] = true;
          order.push_back(next);
        }
      }
    }
    return order;
  }

  bool HasEdge(int from, int to) const {
    const std::vector<int>& in = g_.nodes[to].inputs;
    return std::find(in.begin(), in.end(), from) != in.end();
  }

  // RefineCandidates: only graph neighbours of an already matched pattern neighbour. The
  // convolutions of a horizontal pattern come from their input's first kMaxHorizontalSiblings
  // convolution consumers.
  std::vector<int> Refine(int v) const {
    for (const auto& [a, b] : q_.edges) {
      if (b == v && map_[a] >= 0) {
        std::vector<int> out = Filter(consumers_[map_[a]], v);
        if (q_.kind == FusionKind::kHorizontal && out.size() > kMaxHorizontalSiblings) {
          out.resize(kMaxHorizontalSiblings);
        }
        return out;
      }
      if (a == v && map_[b] >= 0) return Filter(g_.nodes[map_[b]].inputs, v);
    }
    return candidates_[v];
  }

  // Whether conv `u` is among the first kMaxHorizontalSiblings convolutions reading `x`.
  bool AmongFirstSiblings(int x, int u) const {
    int rank = 0;
    for (int c : consumers_[x]) {
      if (c == u) return rank < kMaxHorizontalSiblings;
      if (g_.nodes[c].kind == OpKind::kConv) ++rank;
    }
    return false;
  }

  std::vector<int> Filter(const std::vector<int>& nodes, int v) const {
    std::vector<int> out;
    for (int u : nodes) {
      if (TypeMatches(q_.vertices[v].type, g_.nodes[u])) out.push_back(u);
    }
    return out;
  }

  // Matching: injective, every pattern edge to a matched vertex present in the graph, and the
  // symmetric convolutions of a horizontal pattern in ascending order (each set found once).
  bool Matches(int u, int v) const {
    if (std::find(map_.begin(), map_.end(), u) != map_.end()) return false;
    for (const auto& [a, b] : q_.edges) {
      if (a == v && map_[b] >= 0 && !HasEdge(u, map_[b])) return false;
      if (b == v && map_[a] >= 0 && !HasEdge(map_[a], u)) return false;
    }
    if (q_.ordered_convs && v >= 1) {
      if (v > 1 && map_[v - 1] >= 0 && map_[v - 1] >= u) return false;
      if (v + 1 < static_cast<int>(map_.size()) && map_[v + 1] >= 0 && map_[v + 1] <= u) {
        return false;
      }
    }
    return true;
  }

  void Search(size_t depth) {
    if (depth == order_.size()) {  // lines 11-12: |M| == |V(Q_i)|
      if (Accept()) groups_->insert(FusedNodes());
      return;
    }
    const int v = order_[depth];
    for (int u : Refine(v)) {  // lines 14-21
      if (!Matches(u, v)) continue;
      map_[v] = u;
      Search(depth + 1);
      map_[v] = -1;
    }
  }

  // The template's query requirements beyond types and edges.
  bool Accept() const {
    const auto single_consumer = [&](int n) { return consumers_[n].size() == 1; };
    switch (q_.kind) {
      case FusionKind::kConvPool:
      case FusionKind::kConvEltwise:
        return single_consumer(map_[0]);
      case FusionKind::kConvConv:
      case FusionKind::kPoolConv: {
        const Node& b = g_.nodes[map_[1]];
        return single_consumer(map_[0]) && b.inputs.size() == 1 && b.window.stride_h == 1 &&
               b.window.stride_w == 1;
      }
      case FusionKind::kHorizontal: {
        // The first convolution may be matched before its input (the search starts at the
        // rarest vertex type), so its rank is checked here; Refine bounds the others.
        if (!AmongFirstSiblings(map_[0], map_[1])) return false;
        const Node& first = g_.nodes[map_[1]];
        for (size_t i = 2; i < map_.size(); ++i) {
          const Node& n = g_.nodes[map_[i]];
          if (n.inputs.size() != 1 || !(n.out.h == first.out.h && n.out.w == first.out.w) ||
              n.window.stride_h != first.window.stride_h ||
              n.window.stride_w != first.window.stride_w) {
            return false;
          }
        }
        return first.inputs.size() == 1;
      }
      case FusionKind::kSingle:
        return false;
    }
    return false;
  }

  std::vector<int> FusedNodes() const {
    std::vector<int> nodes;
    for (size_t v = 0; v < map_.size(); ++v) {
      if (q_.vertices[v].fused) nodes.push_back(map_[v]);
    }
    std::sort(nodes.begin(), nodes.end());
    return nodes;
  }

  const Graph& g_;
  const std::vector<std::vector<int>>& consumers_;
  const Pattern& q_;
  std::vector<int> map_;  // M: query vertex -> graph node (-1: unmatched)
  std::vector<std::vector<int>> candidates_;
  std::vector<int> order_;
  std::set<std::vector<int>>* groups_ = nullptr;
};

}  // namespace

absl::string_view FusionKindName(FusionKind kind) {
  switch (kind) {
    case FusionKind::kSingle:
      return "single";
    case FusionKind::kConvPool:
      return "conv+pool";
    case FusionKind::kConvEltwise:
      return "conv+eltwise";
    case FusionKind::kConvConv:
      return "conv+conv";
    case FusionKind::kPoolConv:
      return "pool+conv";
    case FusionKind::kHorizontal:
      return "horizontal";
  }
  return "unknown";
}

std::vector<FusionGroup> EnumerateFusions(const Graph& graph) {
  const std::vector<std::vector<int>> consumers = graph.Consumers();
  std::vector<FusionGroup> out;
  for (const Pattern& q : Templates(kMaxHorizontalConvs)) {
    std::set<std::vector<int>> found;
    Matcher(graph, consumers, q).Run(&found);
    for (const std::vector<int>& nodes : found) out.push_back({q.kind, nodes});
  }
  std::stable_sort(out.begin(), out.end(), [](const FusionGroup& a, const FusionGroup& b) {
    return a.nodes.front() < b.nodes.front();
  });
  return out;
}

}  // namespace neupims::models::cnn
