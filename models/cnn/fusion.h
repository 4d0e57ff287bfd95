// DNNVM's kernel-fusion templates (paper 002, sec. 4.1.3) and Algorithm 1, which enumerates
// every match of every template in a graph by subgraph isomorphism (sec. 4.2).
//
// Templates (each a small pattern graph; `X` is matched but not fused):
//   Conv+Pool      conv -> pool            the conv has no other consumer
//   Conv+Eltwise   conv -> eltwise         the conv has no other consumer
//   Conv+Conv      conv A -> conv B        A has no other consumer, B no other input, B stride 1
//   Pool+Conv      pool -> conv            as Conv+Conv (GoogLeNet's pool projections); the
//                                          paper's vertical templates take any "injective"
//                                          operation, pooling included (sec. 4.1)
//   Horizontal-k   X -> conv_1 .. conv_k   k >= 2 convolutions reading X with one output size
//                                          and stride (their input is loaded once)
// Works on the canonical (XGraph) form. Hardware feasibility (buffers) is not checked here:
// the strategy search drops the matches its cost function cannot run.
#ifndef NEUPIMS_MODELS_CNN_FUSION_H_
#define NEUPIMS_MODELS_CNN_FUSION_H_

#include <vector>

#include "absl/strings/string_view.h"
#include "models/cnn/graph.h"

namespace neupims::models::cnn {

enum class FusionKind {
  kSingle,
  kConvPool,
  kConvEltwise,
  kConvConv,
  kPoolConv,
  kHorizontal,
};
absl::string_view FusionKindName(FusionKind kind);  // "single", "conv+pool", ...

// A set of nodes compiled into one instruction group.
struct FusionGroup {
  FusionKind kind = FusionKind::kSingle;
  std::vector<int> nodes;  // ascending (= execution order inside the group)
  friend bool operator==(const FusionGroup&, const FusionGroup&) = default;
};

// Largest horizontal group enumerated (GoogLeNet's inception inputs feed three convolutions).
inline constexpr int kMaxHorizontalConvs = 4;
// Horizontal groups are formed among a fork's first kMaxHorizontalSiblings convolution
// consumers (graph order) only. n siblings offer C(n, 2) + C(n, 3) + C(n, 4) groups (100,000
// for 40) and more disjoint choices still for Algorithm 2; the widest fork of a shipped network
// feeds four layers (GoogLeNet's inception inputs), so none of them is affected.
inline constexpr int kMaxHorizontalSiblings = 16;

// Algorithm 1: every match of every template, without duplicates, ordered by first node then
// template. Singletons are not listed.
std::vector<FusionGroup> EnumerateFusions(const Graph& graph);

}  // namespace neupims::models::cnn

#endif  // NEUPIMS_MODELS_CNN_FUSION_H_
