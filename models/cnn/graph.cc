// Graph accessors and the per-node work model (DNNVM eq. 3, paper 002 sec. 4.3).
#include "models/cnn/graph.h"

#include "common/check.h"

namespace neupims::models::cnn {

absl::string_view OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kInput:
      return "Input";
    case OpKind::kConv:
      return "Convolution";
    case OpKind::kFullyConnected:
      return "InnerProduct";
    case OpKind::kPool:
      return "Pooling";
    case OpKind::kEltwise:
      return "Eltwise";
    case OpKind::kConcat:
      return "Concat";
    case OpKind::kReLU:
      return "ReLU";
    case OpKind::kBatchNorm:
      return "BatchNorm";
    case OpKind::kScale:
      return "Scale";
    case OpKind::kLrn:
      return "LRN";
    case OpKind::kFlatten:
      return "Flatten";
    case OpKind::kDropout:
      return "Dropout";
    case OpKind::kSoftmax:
      return "Softmax";
  }
  return "?";
}

int Graph::Find(absl::string_view name) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::vector<int>> Graph::Consumers() const {
  std::vector<std::vector<int>> consumers(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int input : nodes[i].inputs) consumers[input].push_back(static_cast<int>(i));
  }
  return consumers;
}

namespace {

// Multiply-accumulates per image and weight count of a convolution / fully-connected node.
struct MacsAndWeights {
  int64_t macs_per_image = 0;
  int64_t weights = 0;
};

MacsAndWeights ConvMacs(const Node& node, const Shape& in) {
  // Eq. 3 with IC / groups: a grouped convolution sees only its group's input channels.
  const int64_t per_output = node.window.kernel_h * node.window.kernel_w * (in.c / node.groups);
  return {.macs_per_image = per_output * node.out.elements(),
          .weights = per_output * node.out.c + (node.bias ? node.out.c : 0)};
}

MacsAndWeights FullyConnectedMacs(const Node& node, const Shape& in) {
  // The input is flattened (Caffe's InnerProduct reads C*H*W values).
  const int64_t per_output = in.elements();
  return {.macs_per_image = per_output * node.out.c,
          .weights = per_output * node.out.c + (node.bias ? node.out.c : 0)};
}

}  // namespace

NodeWork Work(const Graph& graph, int node, int64_t bytes_per_element) {
  NEUPIMS_CHECK(node >= 0 && node < static_cast<int>(graph.nodes.size()));
  const Node& n = graph.nodes[node];
  const int64_t images = graph.batch;
  NodeWork work;
  for (int input : n.inputs) {
    work.input_bytes += graph.nodes[input].out.elements() * images * bytes_per_element;
  }
  work.output_bytes = n.out.elements() * images * bytes_per_element;
  MacsAndWeights mw;
  if (n.kind == OpKind::kConv) mw = ConvMacs(n, graph.nodes[n.inputs[0]].out);
  if (n.kind == OpKind::kFullyConnected) mw = FullyConnectedMacs(n, graph.nodes[n.inputs[0]].out);
  // Pooling, eltwise, LRN, ... count no operations: eq. 3 is the figure the paper's GOP/s use.
  work.macs = mw.macs_per_image * images;
  work.ops = 2.0 * static_cast<double>(work.macs);
  work.weight_bytes = mw.weights * bytes_per_element;
  return work;
}

double ConvGops(const Graph& graph) {
  double ops = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].kind == OpKind::kConv) ops += Work(graph, static_cast<int>(i)).ops;
  }
  return ops * 1e-9;
}

}  // namespace neupims::models::cnn
