// Choosing an execution strategy: which fusion candidates to apply so that every node runs in
// exactly one group and the summed group cost is smallest (paper 002, sec. 5.2, Algorithm 2).
//
//  - kNone:    every node alone (the paper's "baseline").
//  - kGreedy:  nodes in topological order; at each unfused node the first profitable template
//              match starting there is taken (the greedy fusion of Table 3).
//  - kOptimal: Algorithm 2. The graph is cut at barriers (nodes with several inputs or several
//              consumers) into chains; fusions inside a chain are extra edges of a shortest
//              path along it (the Floyd pass of lines 17-25, here a DAG shortest path), and the
//              fusions that touch a barrier (Conv+Eltwise, horizontal) are enumerated with the
//              chains they cut (lines 5-12). Exact within kMaxSearchSteps (tests compare it
//              with BruteForceStrategy); beyond, the best seen, never worse than kGreedy.
// Groups run one after another on the device, so a strategy's cost is the sum of its groups'.
#ifndef NEUPIMS_MODELS_CNN_STRATEGY_H_
#define NEUPIMS_MODELS_CNN_STRATEGY_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/enum_names.h"
#include "models/cnn/fusion.h"
#include "models/cnn/graph.h"

namespace neupims::models::cnn {

enum class StrategyKind { kNone, kGreedy, kOptimal };
const EnumNames<StrategyKind>& StrategyKindNames();  // "none", "greedy", "optimal"

// Cost of running one group (e.g. seconds on the device), or std::nullopt when the group cannot
// run there (its working set does not fit). Called once per singleton and per candidate.
using GroupCostFn = absl::FunctionRef<std::optional<double>(const FusionGroup&)>;

struct Strategy {
  std::vector<FusionGroup> groups;  // execution order: every group after the groups it reads
  double cost = 0;
  // kOptimal: false when the exact search stopped at its budget somewhere (kMaxSearchSteps) and
  // the cover there is the best seen, not a proven optimum. Always true for kNone and kGreedy.
  bool proven_optimal = true;
};

// Budget of the exact search's enumeration of barrier fusions (Algorithm 2, lines 5-12), in
// choices visited per group of fusions decided together. Beyond it, that group takes the
// cheapest of: the best cover seen, a greedy cover by gain (largest saving first, disjoint);
// and the whole strategy is never worse than kGreedy's. A group of more than kMaxSearchDepth
// fusions is not enumerated at all (the enumeration recurses once per fusion).
inline constexpr int64_t kMaxSearchSteps = int64_t{1} << 21;
inline constexpr int kMaxSearchDepth = 4096;

// Covers every node of `graph` with singletons and a disjoint subset of `candidates` (usually
// EnumerateFusions(graph)). FailedPrecondition naming the node if a singleton cannot run.
absl::StatusOr<Strategy> ChooseStrategy(const Graph& graph,
                                        const std::vector<FusionGroup>& candidates,
                                        StrategyKind kind, GroupCostFn cost);

// Exhaustive search over every disjoint subset of the candidates: the oracle for tests.
absl::StatusOr<Strategy> BruteForceStrategy(const Graph& graph,
                                            const std::vector<FusionGroup>& candidates,
                                            GroupCostFn cost);

}  // namespace neupims::models::cnn

#endif  // NEUPIMS_MODELS_CNN_STRATEGY_H_
