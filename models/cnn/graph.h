// The CNN graph IR: a DAG of typed operations with shapes, in the spirit of DNNVM's XGraph
// (paper 002, sec. 3.2). Hardware-agnostic: the FPGA / CIM / CPU / GPU / PIM models cost the
// nodes, the compiler passes (fusion, strategy) rewrite and group them, and the partitioners
// place them; none of them is known here.
//
// Two forms of the same type:
//  - as loaded ("framework form"): one node per Caffe layer, including BatchNorm, Scale, ReLU,
//    Flatten, Dropout, LRN, Softmax;
//  - after Canonicalize() ("XGraph form", sec. 3.1 / 4.1): BN/Scale/bias/ReLU folded into the
//    convolution (intrinsic and point-wise fusion), Flatten and Dropout pruned, Concat kept as a
//    zero-compute node whose inputs are written with a strided SAVE.
//
// Layout: nodes are stored in topological order; node 0 is the graph input. `inputs` hold
// indices of earlier nodes. Shapes are per image (C x H x W); `batch` multiplies work and bytes.
//
//        data(0) -> conv1(1) -> pool1(2) -> conv2a(3) ----------> add(5) -> ...
//                                    \---> conv2b(4) -------------/
//
// JSON (configs/cnn/<name>.json), one entry per layer, each producing the tensor named after it:
//   {"name": "resnet50", "source": "...", "batch": 1,
//    "input": {"name": "data", "shape": [3, 224, 224]},
//    "layers": [{"name": "conv1", "type": "Convolution", "bottom": ["data"],
//                "num_output": 64, "kernel": 7, "stride": 2, "pad": 3, "bias": false}, ...]}
// Errors name the source, the layer and the field; a graph with a cycle, a dangling edge, an
// unknown type, mismatched shapes or a kernel larger than its (padded) input is refused.
#ifndef NEUPIMS_MODELS_CNN_GRAPH_H_
#define NEUPIMS_MODELS_CNN_GRAPH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::models::cnn {

enum class OpKind {
  kInput,
  kConv,            // Caffe Convolution (groups allowed)
  kFullyConnected,  // Caffe InnerProduct
  kPool,            // Caffe Pooling (max / average, optionally global)
  kEltwise,         // element-wise sum of inputs of one shape
  kConcat,          // channel concat; after Canonicalize a strided SAVE of its producers
  kReLU,
  kBatchNorm,
  kScale,
  kLrn,
  kFlatten,
  kDropout,
  kSoftmax,
};

// Caffe type name <-> OpKind (the names the JSON uses: "Convolution", "InnerProduct", ...).
absl::string_view OpKindName(OpKind kind);

struct Shape {
  int64_t c = 0;
  int64_t h = 0;
  int64_t w = 0;
  int64_t elements() const { return c * h * w; }
  friend bool operator==(const Shape&, const Shape&) = default;
};

enum class PoolMethod { kMax, kAverage };

// Kernel geometry shared by convolution and pooling.
struct Window {
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
};

struct Node {
  std::string name;
  OpKind kind = OpKind::kInput;
  std::vector<int> inputs;  // indices of earlier nodes
  Shape out;                // output shape per image

  // kConv / kPool geometry; kConv / kFullyConnected: out.c is the number of outputs.
  Window window;
  int64_t groups = 1;                  // kConv
  bool bias = false;                   // kConv / kFullyConnected
  PoolMethod pool = PoolMethod::kMax;  // kPool
  bool global_pool = false;            // kPool

  // Set by Canonicalize() on kConv / kFullyConnected / kEltwise / kPool: the folded operations.
  bool relu = false;                // point-wise fusion (sec. 4.1.2)
  std::vector<std::string> folded;  // names of the BN / Scale / ReLU / Flatten / Dropout nodes
};

struct Graph {
  std::string name;
  std::string source;  // where the topology comes from (paper, prototxt)
  int64_t batch = 1;
  std::vector<Node> nodes;

  // Index of the node called `name`, or -1.
  int Find(absl::string_view name) const;
  // consumers()[i]: the nodes reading node i, in order.
  std::vector<std::vector<int>> Consumers() const;
};

// Parses and validates a graph; `source` names the file in errors.
absl::StatusOr<Graph> ParseGraph(absl::string_view json_text, absl::string_view source);
// A built-in name ("resnet50": configs/cnn/resnet50.json) or a path to a JSON file.
absl::StatusOr<Graph> LoadGraph(absl::string_view name_or_path);
// The built-in network names, sorted.
std::vector<std::string> BuiltinGraphNames();

// DNNVM's XGraph generation (sec. 3.2 front end, 4.1.1-4.1.2): folds BatchNorm, Scale and ReLU
// into the preceding convolution / fully-connected / eltwise node, prunes Flatten and Dropout,
// keeps Concat as a zero-work node. LRN and Softmax stay (they run on MISC or the host).
// Refuses a BN/Scale that does not follow a convolution.
absl::StatusOr<Graph> Canonicalize(const Graph& graph);

// Work and data of one node for `batch` images and `bytes_per_element` (1 for INT8).
struct NodeWork {
  double ops = 0;            // eq. 3: 2*Kw*Kh*(IC/groups)*OC*H*W for conv; 2*IC*OC for FC
  int64_t macs = 0;          // ops / 2 for conv and FC; 0 otherwise
  int64_t weight_bytes = 0;  // weights + bias
  int64_t input_bytes = 0;   // every input tensor
  int64_t output_bytes = 0;
};
NodeWork Work(const Graph& graph, int node, int64_t bytes_per_element = 1);

// Sum of eq. 3 over the convolution nodes (GOP, batch included): the "convolution work" the
// DNNVM throughput figures divide by.
double ConvGops(const Graph& graph);

}  // namespace neupims::models::cnn

#endif  // NEUPIMS_MODELS_CNN_GRAPH_H_
