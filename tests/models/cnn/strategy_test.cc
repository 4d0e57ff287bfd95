#include "models/cnn/strategy.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/cnn/fusion.h"

namespace neupims::models::cnn {
namespace {

using ::testing::Contains;
using ::testing::Not;

// Builds graphs node by node; every tensor is 16x8x8 so only topology and strides matter.
class Builder {
 public:
  Builder() { Add("data", OpKind::kInput, {}); }
  int Add(const std::string& name, OpKind kind, std::vector<int> inputs, int64_t stride = 1) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.inputs = std::move(inputs);
    n.out = {16, 8, 8};
    n.window.stride_h = n.window.stride_w = stride;
    g_.nodes.push_back(n);
    return static_cast<int>(g_.nodes.size()) - 1;
  }
  Graph graph() const { return g_; }

 private:
  Graph g_;
};

FusionGroup Group(FusionKind kind, std::vector<int> nodes) { return {kind, std::move(nodes)}; }

// DNNVM Fig. 4(b): fusing 3 with 4 (what greedy does first) loses the better 4 + 5.
TEST(StrategyTest, AlgorithmOneFindsTheFusionGreedyMisses) {
  Builder b;
  const int c3 = b.Add("conv3", OpKind::kConv, {0});
  const int c4 = b.Add("conv4", OpKind::kConv, {c3});
  const int p5 = b.Add("pool5", OpKind::kPool, {c4});
  const Graph g = b.graph();
  const std::vector<FusionGroup> found = EnumerateFusions(g);
  EXPECT_THAT(found, Contains(Group(FusionKind::kConvConv, {c3, c4})));
  EXPECT_THAT(found, Contains(Group(FusionKind::kConvPool, {c4, p5})));

  // Singletons cost 10; conv3+conv4 saves 3, conv4+pool5 saves 8.
  auto cost = [&](const FusionGroup& f) -> std::optional<double> {
    if (f.nodes.size() == 1) return f.nodes[0] == 0 ? 0.0 : 10.0;
    return f.kind == FusionKind::kConvConv ? 17.0 : 12.0;
  };
  absl::StatusOr<Strategy> greedy = ChooseStrategy(g, found, StrategyKind::kGreedy, cost);
  absl::StatusOr<Strategy> optimal = ChooseStrategy(g, found, StrategyKind::kOptimal, cost);
  absl::StatusOr<Strategy> none = ChooseStrategy(g, found, StrategyKind::kNone, cost);
  ASSERT_TRUE(greedy.ok() && optimal.ok() && none.ok());
  EXPECT_THAT(greedy->groups, Not(Contains(Group(FusionKind::kConvPool, {c4, p5}))));
  EXPECT_THAT(optimal->groups, Contains(Group(FusionKind::kConvPool, {c4, p5})));
  EXPECT_DOUBLE_EQ(none->cost, 30);
  EXPECT_DOUBLE_EQ(greedy->cost, 27);
  EXPECT_DOUBLE_EQ(optimal->cost, 22);
}

TEST(StrategyTest, TemplatesRespectTheirQueryRequirements) {
  Builder b;
  const int c1 = b.Add("c1", OpKind::kConv, {0});
  const int c2 = b.Add("c2", OpKind::kConv, {c1}, /*stride=*/2);  // Conv+Conv needs stride 1
  const int p = b.Add("p", OpKind::kPool, {c1});                  // c1 has two consumers
  const int e = b.Add("e", OpKind::kEltwise, {c2, p});
  const int h1 = b.Add("h1", OpKind::kConv, {e});
  const int h2 = b.Add("h2", OpKind::kConv, {e});
  const int h3 = b.Add("h3", OpKind::kConv, {e});
  const std::vector<FusionGroup> found = EnumerateFusions(b.graph());
  EXPECT_THAT(found, Not(Contains(Group(FusionKind::kConvConv, {c1, c2}))));
  EXPECT_THAT(found, Not(Contains(Group(FusionKind::kConvPool, {c1, p}))));
  EXPECT_THAT(found, Contains(Group(FusionKind::kConvEltwise, {c2, e})));
  EXPECT_THAT(found, Not(Contains(Group(FusionKind::kPoolConv, {p, e}))));  // e is no conv
  for (const std::vector<int>& h :
       std::vector<std::vector<int>>{{h1, h2}, {h1, h3}, {h2, h3}, {h1, h2, h3}}) {
    EXPECT_THAT(found, Contains(Group(FusionKind::kHorizontal, h)));
  }
  EXPECT_EQ(std::count_if(found.begin(), found.end(),
                          [](const FusionGroup& f) { return f.kind == FusionKind::kHorizontal; }),
            4);  // each set once, not once per ordering
}

TEST(StrategyTest, UnrunnableSingletonIsAnErrorNamingTheNode) {
  Builder b;
  b.Add("too_big", OpKind::kConv, {0});
  auto cost = [](const FusionGroup& f) -> std::optional<double> {
    if (f.nodes == std::vector<int>{1}) return std::nullopt;
    return 1.0;
  };
  absl::StatusOr<Strategy> s = ChooseStrategy(b.graph(), {}, StrategyKind::kOptimal, cost);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), testing::HasSubstr("too_big"));
}

// A random DAG of convs, pools and eltwise adds over one input, up to `max_nodes` nodes.
Graph RandomGraph(std::mt19937_64& rng, int max_nodes) {
  Builder b;
  std::uniform_int_distribution<int> size(2, max_nodes);
  const int n = size(rng);
  for (int i = 1; i < n; ++i) {
    std::uniform_int_distribution<int> pick(0, i - 1);
    const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
    const std::string name = "n" + std::to_string(i);
    if (kind < 6 || i < 3) {
      b.Add(name, OpKind::kConv, {pick(rng)}, kind == 5 ? 2 : 1);
    } else if (kind < 8) {
      b.Add(name, OpKind::kPool, {pick(rng)});
    } else {
      int x = pick(rng), y = pick(rng);
      while (y == x) y = pick(rng);
      b.Add(name, OpKind::kEltwise, {x, y});
    }
  }
  return b.graph();
}

// Deterministic random costs: singletons in [1, 10]; a fusion costs 50%-120% of its members
// alone, and one in five cannot run (does not fit).
class RandomCosts {
 public:
  explicit RandomCosts(uint64_t seed) : rng_(seed) {}
  std::optional<double> operator()(const FusionGroup& f) {
    auto it = memo_.find(f.nodes);
    if (it != memo_.end()) return it->second;
    std::optional<double> v;
    if (f.nodes.size() == 1) {
      v = std::uniform_real_distribution<double>(1, 10)(rng_);
    } else if (std::uniform_int_distribution<int>(0, 4)(rng_) != 0) {
      double alone = 0;
      for (int n : f.nodes) alone += *(*this)(FusionGroup{FusionKind::kSingle, {n}});
      v = alone * std::uniform_real_distribution<double>(0.5, 1.2)(rng_);
    }
    memo_[f.nodes] = v;
    return v;
  }

 private:
  std::mt19937_64 rng_;
  std::map<std::vector<int>, std::optional<double>> memo_;
};

void ExpectValidCover(const Graph& g, const Strategy& s) {
  std::vector<int> seen(g.nodes.size(), 0);
  std::vector<int> done_at(g.nodes.size(), -1);
  for (size_t i = 0; i < s.groups.size(); ++i) {
    for (int n : s.groups[i].nodes) {
      ++seen[n];
      done_at[n] = static_cast<int>(i);
    }
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) ASSERT_EQ(seen[n], 1) << "node " << n;
  for (size_t i = 0; i < s.groups.size(); ++i) {
    for (int n : s.groups[i].nodes) {
      for (int in : g.nodes[n].inputs) {
        EXPECT_LE(done_at[in], static_cast<int>(i)) << "group " << i << " runs before its input";
      }
    }
  }
}

TEST(StrategyTest, AlgorithmTwoEqualsBruteForceOnRandomGraphs) {
  std::mt19937_64 rng(20261125);
  int fused_somewhere = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const Graph g = RandomGraph(rng, 12);
    const std::vector<FusionGroup> candidates = EnumerateFusions(g);
    RandomCosts costs(trial);
    auto fn = [&](const FusionGroup& f) { return costs(f); };
    absl::StatusOr<Strategy> optimal = ChooseStrategy(g, candidates, StrategyKind::kOptimal, fn);
    absl::StatusOr<Strategy> greedy = ChooseStrategy(g, candidates, StrategyKind::kGreedy, fn);
    absl::StatusOr<Strategy> none = ChooseStrategy(g, candidates, StrategyKind::kNone, fn);
    absl::StatusOr<Strategy> brute = BruteForceStrategy(g, candidates, fn);
    ASSERT_TRUE(optimal.ok() && greedy.ok() && none.ok() && brute.ok()) << trial;
    EXPECT_NEAR(optimal->cost, brute->cost, 1e-9) << "trial " << trial;
    EXPECT_LE(optimal->cost, greedy->cost + 1e-9);
    EXPECT_LE(greedy->cost, none->cost + 1e-9);
    ExpectValidCover(g, *optimal);
    ExpectValidCover(g, *greedy);
    if (optimal->cost < none->cost) ++fused_somewhere;
  }
  EXPECT_GT(fused_somewhere, 100);  // the comparison is not vacuous
}

// A graph file may fork one tensor into many convolutions (a ResNeXt written out branch by
// branch). Horizontal groups of 2-4 of n siblings are C(n, 2) + C(n, 3) + C(n, 4): 100,000 for
// 40, which overflowed the stack of the exact search (recursion one level per candidate), and
// the disjoint choices among them grow faster still (12 siblings took 10 s, 14 over 30 s).
// Algorithm 1 offers horizontal groups among a fork's first kMaxHorizontalSiblings convolutions.
TEST(StrategyTest, AWideForkOffersHorizontalGroupsAmongItsFirstSiblingsOnly) {
  Builder b;
  std::vector<int> convs;
  for (int i = 0; i < 40; ++i) convs.push_back(b.Add("c" + std::to_string(i), OpKind::kConv, {0}));
  const std::vector<FusionGroup> found = EnumerateFusions(b.graph());
  const int k = kMaxHorizontalSiblings;
  EXPECT_EQ(found.size(), static_cast<size_t>(k * (k - 1) / 2 + k * (k - 1) * (k - 2) / 6 +
                                              k * (k - 1) * (k - 2) * (k - 3) / 24));
  for (const FusionGroup& f : found) {
    EXPECT_EQ(f.kind, FusionKind::kHorizontal);
    EXPECT_LE(f.nodes.back(), convs[k - 1]);
  }
}

// Sixteen siblings are still 2,500 candidates with more disjoint choices than can be tried: the
// exact search stops at its budget and takes the best cover it has seen, a greedy cover by gain
// or the greedy strategy, whichever is cheapest, and says it is not proven optimal.
TEST(StrategyTest, AnExplodingChoiceStopsAtTheBudgetNoWorseThanGreedy) {
  Builder b;
  std::vector<int> convs;
  for (int i = 0; i < 16; ++i) convs.push_back(b.Add("c" + std::to_string(i), OpKind::kConv, {0}));
  b.Add("cat", OpKind::kConcat, convs);
  const Graph g = b.graph();
  const std::vector<FusionGroup> candidates = EnumerateFusions(g);
  // A group of k siblings saves 2 per sibling beyond the first.
  auto cost = [](const FusionGroup& f) -> std::optional<double> {
    if (f.nodes.size() == 1) return f.nodes[0] == 0 ? 0.0 : 10.0;
    return 10.0 * f.nodes.size() - 2.0 * (f.nodes.size() - 1);
  };
  absl::StatusOr<Strategy> optimal = ChooseStrategy(g, candidates, StrategyKind::kOptimal, cost);
  absl::StatusOr<Strategy> greedy = ChooseStrategy(g, candidates, StrategyKind::kGreedy, cost);
  ASSERT_TRUE(optimal.ok() && greedy.ok());
  EXPECT_FALSE(optimal->proven_optimal);
  EXPECT_TRUE(greedy->proven_optimal);  // not a search: nothing to prove
  EXPECT_LE(optimal->cost, greedy->cost + 1e-9);
  // 16 siblings and the concat cost 170 alone; four groups of four siblings save 4 x 6 = 24, the
  // most any cover saves, and the greedy cover by gain finds it.
  EXPECT_DOUBLE_EQ(optimal->cost, 170 - 24);
  ExpectValidCover(g, *optimal);
}

}  // namespace
}  // namespace neupims::models::cnn
