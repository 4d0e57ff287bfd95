// ParseGraph / LoadGraph: the Caffe-style JSON of configs/cnn/ into a validated Graph with
// inferred shapes (the front end of DNNVM, paper 002 sec. 3.2). Three passes, each only once the
// previous one is clean: (1) document fields, layer names and bottoms; (2) edges: duplicates,
// dangling bottoms and cycles; (3) per layer in file order: type, parameters, output shape.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"
#include "models/cnn/graph.h"

namespace neupims::models::cnn {
namespace {

constexpr OpKind kLayerKinds[] = {OpKind::kConv,      OpKind::kFullyConnected, OpKind::kPool,
                                  OpKind::kEltwise,   OpKind::kConcat,         OpKind::kReLU,
                                  OpKind::kBatchNorm, OpKind::kScale,          OpKind::kLrn,
                                  OpKind::kFlatten,   OpKind::kDropout,        OpKind::kSoftmax};

// Sizes above this are typos, not networks; keeps a tensor's element count inside int64.
constexpr int64_t kMaxSize = int64_t{1} << 20;

std::string ShapeText(const Shape& s) { return absl::StrCat(s.c, "x", s.h, "x", s.w); }

struct LayerHeader {
  std::string name;
  std::vector<std::string> bottom;
};

class GraphParser {
 public:
  explicit GraphParser(ConfigDocument& doc) : doc_(doc), root_(doc.Root()) {}
  absl::StatusOr<Graph> Parse();

 private:
  void ReadTop();
  absl::Status CheckNames();
  absl::Status CheckEdges();
  // The layers `from` reaches through bottoms; the path to `target` if it is among them.
  std::vector<std::string> PathTo(int from, int target) const;
  void ReadLayer(int i);
  void ReadLayerKind(ConfigObject& layer, absl::string_view label, Node& node,
                     const std::vector<Shape>& in, const std::vector<std::string>& bottoms);
  // Shape of node 0 and of every layer's node so far, by index.
  const Shape& ShapeOf(int node) const { return graph_.nodes[node].out; }
  std::string Label(int i, absl::string_view type) const {
    return absl::StrCat("layer '", headers_[i].name, "' (", type, "): ");
  }

  ConfigDocument& doc_;
  ConfigObject root_;
  std::vector<ConfigObject> layers_;
  std::vector<LayerHeader> headers_;
  std::map<std::string, int, std::less<>> node_of_;  // name -> node index (layer i is node i+1)
  Graph graph_;
};

void GraphParser::ReadTop() {
  graph_.name = root_.String("name");
  graph_.source = root_.String("source");
  graph_.batch = root_.OptionalInt("batch", 1, {.min = 1, .max = kMaxSize});
  ConfigObject input = root_.Child("input");
  Node data{.name = input.String("name"), .kind = OpKind::kInput};
  const std::vector<int64_t> shape = input.IntList("shape", {.min = 1, .max = kMaxSize});
  if (shape.size() == 3) {
    data.out = {.c = shape[0], .h = shape[1], .w = shape[2]};
  } else if (input.Has("shape")) {
    input.Error("shape", absl::StrCat("expected [C, H, W], got ", shape.size(), " values"));
  }
  input.Finish();
  graph_.nodes.push_back(std::move(data));
  layers_ = root_.Objects("layers", "name");
  root_.Finish();
  for (ConfigObject& layer : layers_) {
    headers_.push_back({.name = layer.String("name"), .bottom = layer.StringList("bottom")});
  }
}

absl::Status GraphParser::CheckNames() {
  node_of_.emplace(graph_.nodes[0].name, 0);
  for (size_t i = 0; i < headers_.size(); ++i) {
    const std::string& name = headers_[i].name;
    if (name.empty()) {
      layers_[i].Error("name", "must not be empty");
      continue;
    }
    auto [it, inserted] = node_of_.emplace(name, static_cast<int>(i) + 1);
    if (!inserted) {
      layers_[i].Error("name",
                       absl::StrCat("duplicate layer name '", name, "' (also ",
                                    it->second == 0 ? std::string("the input")
                                                    : absl::StrCat("layers[", it->second - 1, "]"),
                                    ")"));
    }
  }
  return doc_.status();
}

std::vector<std::string> GraphParser::PathTo(int from, int target) const {
  // Depth-first over bottoms (layer indices); returns from -> ... -> target, or empty.
  std::vector<int> parent(headers_.size(), -2);
  std::vector<int> stack = {from};
  parent[from] = -1;
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    if (at == target) {
      std::vector<std::string> path;
      for (int k = at; k != -1; k = parent[k]) path.push_back(headers_[k].name);
      std::reverse(path.begin(), path.end());
      return path;
    }
    for (const std::string& bottom : headers_[at].bottom) {
      auto it = node_of_.find(bottom);
      if (it == node_of_.end() || it->second == 0) continue;
      const int next = it->second - 1;
      if (parent[next] == -2) {
        parent[next] = at;
        stack.push_back(next);
      }
    }
  }
  return {};
}

absl::Status GraphParser::CheckEdges() {
  for (size_t i = 0; i < headers_.size(); ++i) {
    for (const std::string& bottom : headers_[i].bottom) {
      auto it = node_of_.find(bottom);
      const std::string who = absl::StrCat("layer '", headers_[i].name, "': bottom '", bottom, "'");
      if (it == node_of_.end()) {
        layers_[i].Error("bottom", absl::StrCat(who, " names no earlier layer (dangling edge)"));
        continue;
      }
      const int layer = it->second - 1;
      if (layer < static_cast<int>(i)) continue;
      // Bottoms must name earlier layers, so a cycle always shows up as a forward reference.
      std::vector<std::string> cycle = PathTo(layer, static_cast<int>(i));
      if (!cycle.empty()) {
        cycle.insert(cycle.begin(), headers_[i].name);
        layers_[i].Error("bottom",
                         absl::StrCat(who, " closes a cycle: ", absl::StrJoin(cycle, " reads ")));
      } else {
        layers_[i].Error("bottom", absl::StrCat(who, " is defined later in the file (layers[",
                                                layer, "]); layers must be in topological order"));
      }
    }
  }
  return doc_.status();
}

// A (min, max) bottom count per kind: Eltwise and Concat join two or more tensors.
std::pair<size_t, size_t> BottomCount(OpKind kind) {
  if (kind == OpKind::kEltwise || kind == OpKind::kConcat) return {2, 64};
  return {1, 1};
}

// Reads `base` (square) or `base_h` and `base_w`; `fallback` when all are absent and not
// `required`.
std::pair<int64_t, int64_t> ReadHw(ConfigObject& layer, absl::string_view base, bool required,
                                   int64_t fallback, IntRange range) {
  const std::string key_h = absl::StrCat(base, "_h"), key_w = absl::StrCat(base, "_w");
  const bool split = layer.Has(key_h) || layer.Has(key_w);
  if (split) {
    if (layer.Has(base)) {
      layer.Int(base, range);
      layer.Error(base, absl::StrCat("give either '", base, "' or '", key_h, "' and '", key_w,
                                     "', not both"));
    }
    return {layer.Int(key_h, range), layer.Int(key_w, range)};
  }
  const int64_t v = required ? layer.Int(base, range) : layer.OptionalInt(base, fallback, range);
  return {v, v};
}

Window ReadWindow(ConfigObject& layer) {
  Window w;
  std::tie(w.kernel_h, w.kernel_w) = ReadHw(layer, "kernel", true, 1, {.min = 1, .max = kMaxSize});
  std::tie(w.stride_h, w.stride_w) = ReadHw(layer, "stride", false, 1, {.min = 1, .max = kMaxSize});
  std::tie(w.pad_h, w.pad_w) = ReadHw(layer, "pad", false, 0, {.min = 0, .max = kMaxSize});
  return w;
}

// Output size along one axis; convolution floors, Caffe's pooling ceils and then drops a last
// window that would start in the padding. Records an error when the kernel does not fit.
int64_t OutputSize(ConfigObject& layer, absl::string_view label, absl::string_view axis, int64_t in,
                   int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t padded = in + 2 * pad;
  if (kernel > padded) {
    layer.Error("kernel", absl::StrCat(label, "kernel ", axis, " ", kernel,
                                       " is larger than the padded input ", padded, " (", in,
                                       " + 2 * pad ", pad, ")"));
    return 1;
  }
  int64_t out = (padded - kernel) / stride + 1;
  if (ceil_mode) {
    out = (padded - kernel + stride - 1) / stride + 1;
    if (pad > 0 && (out - 1) * stride >= in + pad) --out;
  }
  return out;
}

Shape SpatialOut(ConfigObject& layer, absl::string_view label, const Shape& in, const Window& w,
                 int64_t channels, bool ceil_mode) {
  return {.c = channels,
          .h = OutputSize(layer, label, "height", in.h, w.kernel_h, w.stride_h, w.pad_h, ceil_mode),
          .w = OutputSize(layer, label, "width", in.w, w.kernel_w, w.stride_w, w.pad_w, ceil_mode)};
}

void ReadConv(ConfigObject& layer, absl::string_view label, Node& node, const Shape& in) {
  const int64_t outputs = layer.Int("num_output", {.min = 1, .max = kMaxSize});
  node.window = ReadWindow(layer);
  node.groups = layer.OptionalInt("group", 1, {.min = 1, .max = kMaxSize});
  node.bias = layer.OptionalBool("bias", true);
  if (in.c % node.groups != 0 || outputs % node.groups != 0) {
    layer.Error("group", absl::StrCat(label, "group ", node.groups, " does not divide the ", in.c,
                                      " input and ", outputs, " output channels"));
    node.groups = 1;
  }
  node.out = SpatialOut(layer, label, in, node.window, outputs, /*ceil_mode=*/false);
}

void ReadPool(ConfigObject& layer, absl::string_view label, Node& node, const Shape& in) {
  node.pool = layer.Enum("pool", {"max", "ave"}) == "max" ? PoolMethod::kMax : PoolMethod::kAverage;
  node.global_pool = layer.OptionalBool("global", false);
  if (node.global_pool) {
    for (absl::string_view key : {"kernel", "stride", "pad"}) {
      if (layer.Has(key)) layer.Error(key, absl::StrCat(label, "a global pooling takes no ", key));
    }
    node.window = {.kernel_h = in.h, .kernel_w = in.w};
    node.out = {.c = in.c, .h = 1, .w = 1};
    return;
  }
  node.window = ReadWindow(layer);
  if (node.window.pad_h >= node.window.kernel_h || node.window.pad_w >= node.window.kernel_w) {
    layer.Error("pad", absl::StrCat(label, "pad must be smaller than the kernel (as in Caffe)"));
  }
  node.out = SpatialOut(layer, label, in, node.window, in.c, /*ceil_mode=*/true);
}

void ReadJoin(ConfigObject& layer, absl::string_view label, Node& node,
              const std::vector<Shape>& in, const std::vector<std::string>& bottoms) {
  node.out = in[0];
  for (size_t k = 1; k < in.size(); ++k) {
    const bool concat = node.kind == OpKind::kConcat;
    const bool match = concat ? in[k].h == in[0].h && in[k].w == in[0].w : in[k] == in[0];
    if (!match) {
      layer.Error("bottom",
                  absl::StrCat(label, "shape mismatch: '", bottoms[0], "' is ", ShapeText(in[0]),
                               " but '", bottoms[k], "' is ", ShapeText(in[k]),
                               concat ? " (Concat needs equal H and W)" : ""));
    }
    if (concat) node.out.c += in[k].c;
  }
}

// Parameters that change nothing in the IR (LRN, Dropout) are still read and range-checked, so
// a typo is an error rather than silently ignored.
void ReadPointwise(ConfigObject& layer, absl::string_view label, Node& node, const Shape& in) {
  node.out = in;
  if (node.kind == OpKind::kLrn) {
    const int64_t size = layer.OptionalInt("local_size", 5, {.min = 1, .max = 1025});
    if (size % 2 == 0) layer.Error("local_size", absl::StrCat(label, "must be odd, got ", size));
    layer.OptionalDouble("alpha", 1.0, {.min = 0});
    layer.OptionalDouble("beta", 0.75, {.min = 0});
  } else if (node.kind == OpKind::kDropout) {
    layer.OptionalDouble("ratio", 0.5, {.min = 0, .max = 1});
  } else if (node.kind == OpKind::kFlatten) {
    node.out = {.c = in.elements(), .h = 1, .w = 1};
  }
}

void GraphParser::ReadLayerKind(ConfigObject& layer, absl::string_view label, Node& node,
                                const std::vector<Shape>& in,
                                const std::vector<std::string>& bottoms) {
  switch (node.kind) {
    case OpKind::kConv:
      ReadConv(layer, label, node, in[0]);
      break;
    case OpKind::kFullyConnected:
      node.out = {.c = layer.Int("num_output", {.min = 1, .max = kMaxSize}), .h = 1, .w = 1};
      node.bias = layer.OptionalBool("bias", true);
      break;
    case OpKind::kPool:
      ReadPool(layer, label, node, in[0]);
      break;
    case OpKind::kEltwise:
    case OpKind::kConcat:
      ReadJoin(layer, label, node, in, bottoms);
      break;
    default:
      ReadPointwise(layer, label, node, in[0]);
      break;
  }
}

void GraphParser::ReadLayer(int i) {
  ConfigObject& layer = layers_[i];
  const LayerHeader& header = headers_[i];
  const std::string type = layer.String("type");
  std::vector<std::string> choices;
  Node node{.name = header.name};
  bool known = false;
  for (OpKind kind : kLayerKinds) {
    choices.emplace_back(OpKindName(kind));
    if (OpKindName(kind) != type) continue;
    node.kind = kind;
    known = true;
  }
  if (!known) {
    layer.Error("type", absl::StrCat(Label(i, type), "unknown layer type (choices: ",
                                     absl::StrJoin(choices, ", "), ")"));
    return;
  }
  const auto [min_bottoms, max_bottoms] = BottomCount(node.kind);
  if (header.bottom.size() < min_bottoms || header.bottom.size() > max_bottoms) {
    layer.Error("bottom", absl::StrCat(Label(i, type), "expected ", min_bottoms,
                                       min_bottoms == max_bottoms ? "" : " or more",
                                       " bottom(s), got ", header.bottom.size()));
    return;
  }
  std::vector<Shape> in;
  for (const std::string& bottom : header.bottom) {
    node.inputs.push_back(node_of_.find(bottom)->second);
    in.push_back(ShapeOf(node.inputs.back()));
  }
  graph_.nodes.push_back(std::move(node));
  Node& added = graph_.nodes.back();
  ReadLayerKind(layer, Label(i, type), added, in, header.bottom);
  if (layer.Has("expect_shape")) {
    const std::vector<int64_t> want = layer.IntList("expect_shape", {.min = 1, .max = kMaxSize});
    const Shape expected = want.size() == 3 ? Shape{want[0], want[1], want[2]} : Shape{};
    if (!(expected == added.out)) {
      layer.Error("expect_shape",
                  absl::StrCat(Label(i, type), "shape mismatch: inferred ", ShapeText(added.out),
                               ", expected [", absl::StrJoin(want, ", "), "]"));
    }
  }
  layer.Finish();
}

absl::StatusOr<Graph> GraphParser::Parse() {
  ReadTop();
  RETURN_IF_ERROR(doc_.status());
  RETURN_IF_ERROR(CheckNames());
  RETURN_IF_ERROR(CheckEdges());
  for (size_t i = 0; i < layers_.size(); ++i) {
    // Later shapes depend on this one: stop at the first layer with an error.
    ReadLayer(static_cast<int>(i));
    RETURN_IF_ERROR(doc_.status());
  }
  return std::move(graph_);
}

}  // namespace

absl::StatusOr<Graph> ParseGraph(absl::string_view json_text, absl::string_view source) {
  ASSIGN_OR_RETURN(auto doc, ConfigDocument::FromString(json_text, std::string(source)));
  return GraphParser(*doc).Parse();
}

absl::StatusOr<Graph> LoadGraph(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("cnn", name_or_path));
  return GraphParser(*doc).Parse();
}

std::vector<std::string> BuiltinGraphNames() {
  std::vector<std::string> names = BuiltinConfigNames("cnn");
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace neupims::models::cnn
