// Canonicalize: the framework graph into DNNVM's coarse-grained XGraph (paper 002 sec. 3.2,
// 4.1.1 intrinsic fusion, 4.1.2 point-wise fusion; sec. 3.1 / Fig. 2(c) for pruning Flatten).
//
// One pass in topological order. Every old node either becomes a new node ("kept") or is an
// alias of the kept node whose tensor it transforms in place:
//  - BatchNorm / Scale after a convolution or fully-connected node: their per-channel affine
//    transform is pre-computed into the weights and a bias (intrinsic fusion), so the producer
//    gains a bias. Anywhere else they are refused: the accelerator has no BN engine.
//  - ReLU after a convolution / fully-connected / eltwise / pooling node: the CONV instruction's
//    nonlinear bit (point-wise fusion). It only folds when the producer's tensor has no other
//    reader, since those readers need the values before the ReLU; otherwise (and after Concat,
//    LRN, ...) it stays a node of its own.
//  - Flatten and Dropout (inference) change no value in DNNVM's channel-first layout: pruned, and
//    their consumers read the producer directly. Consumers keep their own inferred shapes.
// Concat, LRN and Softmax stay nodes.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "models/cnn/graph.h"

namespace neupims::models::cnn {
namespace {

class Canonicalizer {
 public:
  explicit Canonicalizer(const Graph& graph)
      : old_(graph),
        consumers_(graph.Consumers()),
        alias_(graph.nodes.size(), -1),
        kept_(graph.nodes.size(), false) {
    new_.name = graph.name;
    new_.source = graph.source;
    new_.batch = graph.batch;
  }

  absl::StatusOr<Graph> Run() {
    for (size_t i = 0; i < old_.nodes.size(); ++i) {
      RETURN_IF_ERROR(CheckInputs(static_cast<int>(i)));
      RETURN_IF_ERROR(Visit(static_cast<int>(i)));
    }
    return std::move(new_);
  }

 private:
  absl::Status CheckInputs(int i) const;
  absl::Status Visit(int i);
  absl::Status FoldAffine(int i);
  bool TryFoldRelu(int i);
  void Prune(int i);
  void Keep(int i);
  // True when every tensor from the kept producer of `old` up to `old` itself has exactly one
  // reader, i.e. folding into the producer changes what nobody else sees.
  bool SoleReaderChain(int old) const;
  Node& ProducerOf(int i) { return new_.nodes[alias_[old_.nodes[i].inputs[0]]]; }

  const Graph& old_;
  const std::vector<std::vector<int>> consumers_;
  std::vector<int> alias_;  // old index -> new index
  std::vector<bool> kept_;  // old node became a new node
  Graph new_;
};

absl::Status Canonicalizer::CheckInputs(int i) const {
  // A graph built in code (not by ParseGraph) must still be topological.
  const Node& node = old_.nodes[i];
  for (int input : node.inputs) {
    if (input < 0 || input >= i) {
      return absl::InvalidArgumentError(absl::StrCat(old_.name, ": node '", node.name,
                                                     "' reads node ", input,
                                                     ", which is not an earlier node"));
    }
  }
  const bool needs_input = node.kind != OpKind::kInput;
  if (needs_input && node.inputs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(old_.name, ": ", OpKindName(node.kind), " '", node.name, "' has no input"));
  }
  return absl::OkStatus();
}

absl::Status Canonicalizer::Visit(int i) {
  switch (old_.nodes[i].kind) {
    case OpKind::kBatchNorm:
    case OpKind::kScale:
      return FoldAffine(i);
    case OpKind::kReLU:
      if (!TryFoldRelu(i)) Keep(i);
      return absl::OkStatus();
    case OpKind::kFlatten:
    case OpKind::kDropout:
      Prune(i);
      return absl::OkStatus();
    default:
      Keep(i);
      return absl::OkStatus();
  }
}

bool Canonicalizer::SoleReaderChain(int old) const {
  for (int k = old;; k = old_.nodes[k].inputs[0]) {
    if (consumers_[k].size() != 1) return false;
    if (kept_[k]) return true;
  }
}

absl::Status Canonicalizer::FoldAffine(int i) {
  const Node& node = old_.nodes[i];
  const int input = node.inputs[0];
  const Node& producer = ProducerOf(i);
  const bool after_weights =
      producer.kind == OpKind::kConv || producer.kind == OpKind::kFullyConnected;
  std::string problem;
  if (!after_weights) {
    problem =
        absl::StrCat("its input '", old_.nodes[input].name, "' is not a Convolution or ",
                     "InnerProduct (it is ", OpKindName(producer.kind), " '", producer.name, "')");
  } else if (producer.relu) {
    problem = absl::StrCat("'", producer.name, "' already applies a ReLU before it");
  } else if (!SoleReaderChain(input)) {
    problem = absl::StrCat("the output of '", producer.name, "' has other readers");
  }
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(old_.name, ": ", OpKindName(node.kind), " '", node.name,
                     "' cannot be folded into a preceding convolution (sec. 4.1.1): ", problem));
  }
  Node& target = ProducerOf(i);
  target.folded.push_back(node.name);
  target.bias = true;  // BN's mean / Scale's shift end up as a per-channel bias
  alias_[i] = alias_[input];
  return absl::OkStatus();
}

bool Canonicalizer::TryFoldRelu(int i) {
  const int input = old_.nodes[i].inputs[0];
  Node& target = ProducerOf(i);
  const bool foldable = target.kind == OpKind::kConv || target.kind == OpKind::kFullyConnected ||
                        target.kind == OpKind::kEltwise || target.kind == OpKind::kPool;
  if (!foldable || target.relu || !SoleReaderChain(input)) return false;
  target.relu = true;
  target.folded.push_back(old_.nodes[i].name);
  alias_[i] = alias_[input];
  return true;
}

void Canonicalizer::Prune(int i) {
  ProducerOf(i).folded.push_back(old_.nodes[i].name);
  alias_[i] = alias_[old_.nodes[i].inputs[0]];
}

void Canonicalizer::Keep(int i) {
  Node node = old_.nodes[i];
  for (int& input : node.inputs) input = alias_[input];
  alias_[i] = static_cast<int>(new_.nodes.size());
  kept_[i] = true;
  new_.nodes.push_back(std::move(node));
}

}  // namespace

absl::StatusOr<Graph> Canonicalize(const Graph& graph) { return Canonicalizer(graph).Run(); }

}  // namespace neupims::models::cnn
