// Canonicalize (DNNVM sec. 4.1.1 / 4.1.2): BN / Scale / ReLU folded, Flatten / Dropout pruned,
// Concat kept; and Work (eq. 3 and the bytes) on the nodes.
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/cnn/graph.h"

namespace neupims::models::cnn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Graph MustParse(const std::string& layers) {
  absl::StatusOr<Graph> graph = ParseGraph(
      absl::StrCat(R"({"name": "t", "source": "test", "input": {"name": "data", "shape": [3, 8, 8]},
                       "layers": [)",
                   layers, "]}"),
      "t.json");
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? *graph : Graph{};
}

Graph MustCanonicalize(const Graph& graph) {
  absl::StatusOr<Graph> canonical = Canonicalize(graph);
  EXPECT_TRUE(canonical.ok()) << canonical.status();
  return canonical.ok() ? *canonical : Graph{};
}

std::map<OpKind, int> CountKinds(const Graph& graph) {
  std::map<OpKind, int> counts;
  for (const Node& node : graph.nodes) ++counts[node.kind];
  return counts;
}

TEST(Canonicalize, ResNet50FoldsToConvolutionsPoolsEltwisesAndTheClassifier) {
  absl::StatusOr<Graph> loaded = LoadGraph("resnet50");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->nodes.size(), 229u);  // input + 228 Caffe layers
  const Graph graph = MustCanonicalize(*loaded);
  const std::map<OpKind, int> expected = {{OpKind::kInput, 1},          {OpKind::kConv, 53},
                                          {OpKind::kPool, 2},           {OpKind::kEltwise, 16},
                                          {OpKind::kFullyConnected, 1}, {OpKind::kSoftmax, 1}};
  EXPECT_EQ(CountKinds(graph), expected);
  const Node& branch2a = graph.nodes[graph.Find("res2a_branch2a")];
  EXPECT_TRUE(branch2a.relu);
  EXPECT_TRUE(branch2a.bias);  // from BN / Scale, the Caffe conv has none
  EXPECT_THAT(branch2a.folded,
              ElementsAre("bn2a_branch2a", "scale2a_branch2a", "res2a_branch2a_relu"));
  const Node& branch1 = graph.nodes[graph.Find("res2a_branch1")];
  EXPECT_FALSE(branch1.relu);
  EXPECT_THAT(branch1.folded, ElementsAre("bn2a_branch1", "scale2a_branch1"));
  const Node& sum = graph.nodes[graph.Find("res2a")];
  EXPECT_TRUE(sum.relu);
  EXPECT_THAT(sum.folded, ElementsAre("res2a_relu"));
  // The eltwise reads the two convolutions directly; indices are renumbered and topological.
  EXPECT_THAT(sum.inputs, ElementsAre(graph.Find("res2a_branch1"), graph.Find("res2a_branch2c")));
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (int input : graph.nodes[i].inputs) EXPECT_LT(input, static_cast<int>(i));
  }
}

TEST(Canonicalize, Vgg16FoldsReluAndPrunesDropout) {
  absl::StatusOr<Graph> loaded = LoadGraph("vgg16");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Graph graph = MustCanonicalize(*loaded);
  EXPECT_EQ(graph.nodes.size(), 23u);  // input, 13 conv, 5 pool, 3 fc, softmax
  const Node& fc6 = graph.nodes[graph.Find("fc6")];
  EXPECT_TRUE(fc6.relu);
  EXPECT_THAT(fc6.folded, ElementsAre("relu6", "drop6"));
  EXPECT_THAT(graph.nodes[graph.Find("fc7")].inputs, ElementsAre(graph.Find("fc6")));
  EXPECT_EQ(graph.Find("drop7"), -1);
}

TEST(Canonicalize, GoogLeNetKeepsConcatAndLrn) {
  absl::StatusOr<Graph> loaded = LoadGraph("googlenet");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Graph graph = MustCanonicalize(*loaded);
  const std::map<OpKind, int> counts = CountKinds(graph);
  EXPECT_EQ(counts.at(OpKind::kConcat), 9);
  EXPECT_EQ(counts.at(OpKind::kLrn), 2);
  EXPECT_EQ(counts.at(OpKind::kConv), 57);
  EXPECT_EQ(counts.count(OpKind::kReLU), 0u);
  EXPECT_EQ(counts.count(OpKind::kDropout), 0u);
  const Node& concat = graph.nodes[graph.Find("inception_3a/output")];
  EXPECT_THAT(concat.inputs,
              ElementsAre(graph.Find("inception_3a/1x1"), graph.Find("inception_3a/3x3"),
                          graph.Find("inception_3a/5x5"), graph.Find("inception_3a/pool_proj")));
}

TEST(Canonicalize, PrunesFlattenAndRewiresItsConsumer) {
  const Graph graph = MustCanonicalize(MustParse(
      R"({"name": "c", "type": "Convolution", "bottom": ["data"], "num_output": 4, "kernel": 3},
         {"name": "flat", "type": "Flatten", "bottom": ["c"]},
         {"name": "fc", "type": "InnerProduct", "bottom": ["flat"], "num_output": 10})"));
  ASSERT_EQ(graph.nodes.size(), 3u);
  EXPECT_THAT(graph.nodes[2].inputs, ElementsAre(1));
  EXPECT_THAT(graph.nodes[1].folded, ElementsAre("flat"));
  EXPECT_EQ(Work(graph, 2).macs, 4 * 6 * 6 * 10);  // the FC still reads 144 values
}

TEST(Canonicalize, ReluStaysANodeWhenTheProducerHasAnotherReader) {
  const Graph graph = MustCanonicalize(MustParse(
      R"({"name": "c", "type": "Convolution", "bottom": ["data"], "num_output": 4, "kernel": 3},
         {"name": "r", "type": "ReLU", "bottom": ["c"]},
         {"name": "s", "type": "Eltwise", "bottom": ["c", "r"]},
         {"name": "cat", "type": "Concat", "bottom": ["s", "c"]},
         {"name": "r2", "type": "ReLU", "bottom": ["cat"]})"));
  ASSERT_EQ(graph.nodes.size(), 6u);
  EXPECT_EQ(graph.nodes[graph.Find("r")].kind, OpKind::kReLU);  // c is also read by s
  EXPECT_FALSE(graph.nodes[graph.Find("c")].relu);
  EXPECT_EQ(graph.nodes[graph.Find("r2")].kind, OpKind::kReLU);  // nothing to fold into
}

TEST(Canonicalize, BatchNormWithoutAPrecedingConvolutionIsAnError) {
  absl::StatusOr<Graph> graph = Canonicalize(MustParse(
      R"({"name": "p", "type": "Pooling", "bottom": ["data"], "pool": "max", "kernel": 2,
          "stride": 2},
         {"name": "bn", "type": "BatchNorm", "bottom": ["p"]})"));
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(),
              HasSubstr("BatchNorm 'bn' cannot be folded into a preceding convolution"));
  EXPECT_THAT(graph.status().message(), HasSubstr("its input 'p' is not a Convolution"));
}

TEST(Canonicalize, BatchNormAfterAConvolutionReadElsewhereIsAnError) {
  absl::StatusOr<Graph> graph = Canonicalize(MustParse(
      R"({"name": "c", "type": "Convolution", "bottom": ["data"], "num_output": 4, "kernel": 3},
         {"name": "bn", "type": "BatchNorm", "bottom": ["c"]},
         {"name": "s", "type": "Eltwise", "bottom": ["c", "bn"]})"));
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("the output of 'c' has other readers"));
}

TEST(Canonicalize, RefusesANonTopologicalGraphBuiltInCode) {
  Graph graph;
  graph.name = "handmade";
  graph.nodes.push_back({.name = "data", .kind = OpKind::kInput, .out = {1, 2, 2}});
  graph.nodes.push_back({.name = "r", .kind = OpKind::kReLU, .inputs = {1}, .out = {1, 2, 2}});
  absl::StatusOr<Graph> canonical = Canonicalize(graph);
  ASSERT_FALSE(canonical.ok());
  EXPECT_THAT(canonical.status().message(), HasSubstr("node 'r' reads node 1"));
}

TEST(Work, ConvolutionFollowsEquation3WithGroupsBatchAndBias) {
  Graph graph = MustParse(
      R"({"name": "c", "type": "Convolution", "bottom": ["data"], "num_output": 6, "kernel": 3,
          "pad": 1, "group": 3},
         {"name": "p", "type": "Pooling", "bottom": ["c"], "pool": "max", "kernel": 2,
          "stride": 2},
         {"name": "fc", "type": "InnerProduct", "bottom": ["p"], "num_output": 10,
          "bias": false})");
  graph.batch = 2;
  const NodeWork conv = Work(graph, 1, /*bytes_per_element=*/2);
  EXPECT_EQ(conv.macs, 3 * 3 * (3 / 3) * 6 * 8 * 8 * 2);
  EXPECT_DOUBLE_EQ(conv.ops, 2.0 * conv.macs);
  EXPECT_EQ(conv.weight_bytes, (3 * 3 * 1 * 6 + 6) * 2);
  EXPECT_EQ(conv.input_bytes, 3 * 8 * 8 * 2 * 2);
  EXPECT_EQ(conv.output_bytes, 6 * 8 * 8 * 2 * 2);
  const NodeWork pool = Work(graph, 2);
  EXPECT_EQ(pool.macs, 0);
  EXPECT_EQ(pool.ops, 0);
  EXPECT_EQ(pool.weight_bytes, 0);
  EXPECT_EQ(pool.input_bytes, 6 * 8 * 8 * 2);
  EXPECT_EQ(pool.output_bytes, 6 * 4 * 4 * 2);
  const NodeWork fc = Work(graph, 3);
  EXPECT_EQ(fc.macs, 6 * 4 * 4 * 10 * 2);
  EXPECT_EQ(fc.weight_bytes, 6 * 4 * 4 * 10);
  EXPECT_DOUBLE_EQ(ConvGops(graph), 2.0 * conv.macs * 1e-9);
}

TEST(Work, Vgg16FirstConvolutionAndFc6Bytes) {
  absl::StatusOr<Graph> graph = LoadGraph("vgg16");
  ASSERT_TRUE(graph.ok()) << graph.status();
  const NodeWork conv1 = Work(*graph, graph->Find("conv1_1"));
  EXPECT_EQ(conv1.weight_bytes, 3 * 3 * 3 * 64 + 64);
  EXPECT_EQ(conv1.input_bytes, 3 * 224 * 224);
  EXPECT_EQ(conv1.output_bytes, 64 * 224 * 224);
  const NodeWork fc6 = Work(*graph, graph->Find("fc6"));
  EXPECT_EQ(fc6.weight_bytes, int64_t{512} * 7 * 7 * 4096 + 4096);
  EXPECT_DOUBLE_EQ(fc6.ops, 2.0 * 512 * 7 * 7 * 4096);
}

}  // namespace
}  // namespace neupims::models::cnn
