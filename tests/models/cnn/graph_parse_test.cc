// ParseGraph: shape inference on small graphs, and every kind of bad input refused with an error
// naming the source, the layer and the field.
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/cnn/graph.h"

namespace neupims::models::cnn {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A graph with a 3x8x8 input named "data" and the given layers (a JSON array body).
std::string Net(const std::string& layers) {
  return absl::StrCat(
      R"({"name": "t", "source": "test", "input": {"name": "data", "shape": [3, 8, 8]},
                          "layers": [)",
      layers, "]}");
}

absl::StatusOr<Graph> Parse(const std::string& layers) { return ParseGraph(Net(layers), "t.json"); }

// The error message of parsing `layers` (empty, with a test failure, if it parsed).
std::string ErrorOf(const std::string& layers) {
  absl::StatusOr<Graph> graph = Parse(layers);
  EXPECT_FALSE(graph.ok());
  if (graph.ok()) return "";
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(graph.status().message());
}

constexpr char kConv[] =
    R"({"name": "c", "type": "Convolution", "bottom": ["data"], "num_output": 4, "kernel": 3})";

TEST(GraphParse, InfersConvolutionShapesWithFloorRounding) {
  absl::StatusOr<Graph> graph = Parse(
      R"({"name": "c", "type": "Convolution", "bottom": ["data"], "num_output": 16,
          "kernel": 3, "stride": 2, "pad": 1, "group": 1, "bias": false})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->nodes.size(), 2u);
  EXPECT_EQ(graph->nodes[0].kind, OpKind::kInput);
  EXPECT_EQ(graph->nodes[0].out, (Shape{3, 8, 8}));
  const Node& conv = graph->nodes[1];
  EXPECT_EQ(conv.kind, OpKind::kConv);
  EXPECT_EQ(conv.out, (Shape{16, 4, 4}));  // floor((8 + 2 - 3) / 2) + 1
  EXPECT_FALSE(conv.bias);
  EXPECT_EQ(conv.inputs, std::vector<int>{0});
}

TEST(GraphParse, ReadsRectangularKernelsStridesAndPads) {
  absl::StatusOr<Graph> graph = Parse(
      R"({"name": "c", "type": "Convolution", "bottom": ["data"], "num_output": 4,
          "kernel_h": 1, "kernel_w": 3, "stride_h": 1, "stride_w": 2, "pad_h": 0, "pad_w": 1})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->nodes[1].out, (Shape{4, 8, 4}));
  EXPECT_EQ(graph->nodes[1].window.kernel_w, 3);
}

TEST(GraphParse, PoolingUsesCaffeCeilRoundingAndDropsAWindowStartingInThePadding) {
  absl::StatusOr<Graph> graph = Parse(
      R"({"name": "p1", "type": "Pooling", "bottom": ["data"], "pool": "max", "kernel": 3,
          "stride": 2},
         {"name": "p2", "type": "Pooling", "bottom": ["data"], "pool": "ave", "kernel": 2,
          "stride": 2, "pad": 1, "expect_shape": [3, 5, 5]},
         {"name": "g", "type": "Pooling", "bottom": ["data"], "pool": "ave", "global": true})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->nodes[1].out, (Shape{3, 4, 4}));  // ceil((8 - 3) / 2) + 1 (floor gives 3)
  // ceil((8 + 2 - 2) / 2) + 1 = 5; the 5th window starts at 8 < H + pad = 9: kept.
  EXPECT_EQ(graph->nodes[2].pool, PoolMethod::kAverage);
  EXPECT_EQ(graph->nodes[3].out, (Shape{3, 1, 1}));
  EXPECT_TRUE(graph->nodes[3].global_pool);
  EXPECT_EQ(graph->nodes[3].window.kernel_h, 8);
}

TEST(GraphParse, PoolingClipsTheLastWindowWhenItStartsInThePadding) {
  // 7x7, kernel 2, stride 2, pad 1: ceil((7 + 2 - 2) / 2) + 1 = 5, but the 5th window would start
  // at 8 >= H + pad = 8, so Caffe drops it: 4.
  absl::StatusOr<Graph> graph = ParseGraph(
      R"({"name": "t", "source": "test", "input": {"name": "data", "shape": [1, 7, 7]},
          "layers": [{"name": "p", "type": "Pooling", "bottom": ["data"], "pool": "max",
                      "kernel": 2, "stride": 2, "pad": 1}]})",
      "t.json");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->nodes[1].out, (Shape{1, 4, 4}));
}

TEST(GraphParse, ConcatAddsChannelsEltwiseKeepsTheShapeFlattenAndFcAreVectors) {
  absl::StatusOr<Graph> graph = Parse(absl::StrCat(
      kConv, R"(, {"name": "d", "type": "Convolution", "bottom": ["data"], "num_output": 2,
                   "kernel": 3},
               {"name": "cat", "type": "Concat", "bottom": ["c", "d"]},
               {"name": "sum", "type": "Eltwise", "bottom": ["cat", "cat"]},
               {"name": "flat", "type": "Flatten", "bottom": ["sum"]},
               {"name": "fc", "type": "InnerProduct", "bottom": ["flat"], "num_output": 10},
               {"name": "prob", "type": "Softmax", "bottom": ["fc"]})"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->nodes[graph->Find("cat")].out, (Shape{6, 6, 6}));
  EXPECT_EQ(graph->nodes[graph->Find("sum")].out, (Shape{6, 6, 6}));
  EXPECT_EQ(graph->nodes[graph->Find("flat")].out, (Shape{216, 1, 1}));
  EXPECT_EQ(graph->nodes[graph->Find("fc")].out, (Shape{10, 1, 1}));
  EXPECT_EQ(graph->nodes[graph->Find("prob")].kind, OpKind::kSoftmax);
  EXPECT_EQ(graph->Find("nope"), -1);
  EXPECT_EQ(graph->Consumers()[graph->Find("cat")], (std::vector<int>{4, 4}));
}

TEST(GraphParse, OpKindNamesAreTheCaffeTypeNames) {
  EXPECT_EQ(OpKindName(OpKind::kConv), "Convolution");
  EXPECT_EQ(OpKindName(OpKind::kFullyConnected), "InnerProduct");
  EXPECT_EQ(OpKindName(OpKind::kLrn), "LRN");
  EXPECT_EQ(OpKindName(OpKind::kInput), "Input");
}

// --- Bad input: each error names the source, the layer and the field. ---

TEST(GraphParseBadInput, CycleIsReportedAsACycle) {
  const std::string message = ErrorOf(
      R"({"name": "a", "type": "ReLU", "bottom": ["b"]},
         {"name": "b", "type": "ReLU", "bottom": ["a"]})");
  EXPECT_THAT(message, AllOf(HasSubstr("t.json: field 'layers[a].bottom'"),
                             HasSubstr("closes a cycle: a reads b reads a")));
}

TEST(GraphParseBadInput, ForwardReferenceWithoutCycleAsksForTopologicalOrder) {
  const std::string message = ErrorOf(
      R"({"name": "a", "type": "ReLU", "bottom": ["b"]},
         {"name": "b", "type": "ReLU", "bottom": ["data"]})");
  EXPECT_THAT(message, AllOf(HasSubstr("field 'layers[a].bottom'"),
                             HasSubstr("'b' is defined later"), HasSubstr("topological order")));
}

TEST(GraphParseBadInput, DanglingBottom) {
  EXPECT_THAT(ErrorOf(R"({"name": "r", "type": "ReLU", "bottom": ["nope"]})"),
              AllOf(HasSubstr("t.json: field 'layers[r].bottom'"),
                    HasSubstr("bottom 'nope' names no earlier layer (dangling edge)")));
}

TEST(GraphParseBadInput, UnknownTypeListsTheChoices) {
  EXPECT_THAT(ErrorOf(R"({"name": "x", "type": "Deconvolution", "bottom": ["data"]})"),
              AllOf(HasSubstr("t.json: field 'layers[x].type'"),
                    HasSubstr("layer 'x' (Deconvolution): unknown layer type"),
                    HasSubstr("Convolution, InnerProduct, Pooling, Eltwise, Concat")));
}

TEST(GraphParseBadInput, EltwiseShapeMismatch) {
  EXPECT_THAT(ErrorOf(absl::StrCat(kConv, R"(, {"name": "s", "type": "Eltwise",
                                               "bottom": ["data", "c"]})")),
              AllOf(HasSubstr("field 'layers[s].bottom'"),
                    HasSubstr("layer 's' (Eltwise): shape mismatch: 'data' is 3x8x8 but 'c' is "
                              "4x6x6")));
}

TEST(GraphParseBadInput, ConcatNeedsEqualHeightAndWidth) {
  EXPECT_THAT(ErrorOf(absl::StrCat(kConv, R"(, {"name": "cat", "type": "Concat",
                                               "bottom": ["c", "data"]})")),
              AllOf(HasSubstr("field 'layers[cat].bottom'"),
                    HasSubstr("layer 'cat' (Concat): shape mismatch"),
                    HasSubstr("Concat needs equal H and W")));
}

TEST(GraphParseBadInput, KernelLargerThanThePaddedInput) {
  EXPECT_THAT(
      ErrorOf(R"({"name": "c", "type": "Convolution", "bottom": ["data"],
                          "num_output": 4, "kernel": 11, "pad": 1})"),
      AllOf(HasSubstr("t.json: field 'layers[c].kernel'"),
            HasSubstr("kernel height 11 is larger than the padded input 10 (8 + 2 * pad 1)")));
  EXPECT_THAT(ErrorOf(R"({"name": "p", "type": "Pooling", "bottom": ["data"], "pool": "max",
                          "kernel": 9, "stride": 1})"),
              HasSubstr("field 'layers[p].kernel'"));
}

TEST(GraphParseBadInput, ExpectShapeMismatch) {
  EXPECT_THAT(ErrorOf(R"({"name": "c", "type": "Convolution", "bottom": ["data"],
                          "num_output": 4, "kernel": 3, "expect_shape": [4, 8, 8]})"),
              AllOf(HasSubstr("field 'layers[c].expect_shape'"),
                    HasSubstr("shape mismatch: inferred 4x6x6, expected [4, 8, 8]")));
}

TEST(GraphParseBadInput, DuplicateName) {
  EXPECT_THAT(ErrorOf(absl::StrCat(kConv, ", ", kConv)),
              AllOf(HasSubstr("field 'layers[c].name'"),
                    HasSubstr("duplicate layer name 'c' (also layers[0])")));
  EXPECT_THAT(ErrorOf(R"({"name": "data", "type": "ReLU", "bottom": ["data"]})"),
              HasSubstr("duplicate layer name 'data' (also the input)"));
}

TEST(GraphParseBadInput, UnknownFieldIsRefused) {
  EXPECT_THAT(ErrorOf(R"({"name": "c", "type": "Convolution", "bottom": ["data"],
                          "num_output": 4, "kernel": 3, "kernal": 3})"),
              HasSubstr("t.json: unknown field 'layers[c].kernal'"));
  // A field of another type is unknown too: pooling has no num_output.
  EXPECT_THAT(ErrorOf(R"({"name": "p", "type": "Pooling", "bottom": ["data"], "pool": "max",
                          "kernel": 2, "stride": 2, "num_output": 4})"),
              HasSubstr("unknown field 'layers[p].num_output'"));
}

TEST(GraphParseBadInput, WrongNumberOfBottoms) {
  EXPECT_THAT(ErrorOf(R"({"name": "s", "type": "Eltwise", "bottom": ["data"]})"),
              AllOf(HasSubstr("field 'layers[s].bottom'"),
                    HasSubstr("expected 2 or more bottom(s), got 1")));
  EXPECT_THAT(ErrorOf(R"({"name": "r", "type": "ReLU", "bottom": []})"),
              HasSubstr("layer 'r' (ReLU): expected 1 bottom(s), got 0"));
}

TEST(GraphParseBadInput, NonPositiveSizesAndZeroStride) {
  EXPECT_THAT(ErrorOf(R"({"name": "c", "type": "Convolution", "bottom": ["data"],
                          "num_output": 4, "kernel": 3, "stride": 0})"),
              HasSubstr("field 'layers[c].stride': expected an integer >= 1 <= 1048576, got 0"));
  EXPECT_THAT(
      ErrorOf(R"({"name": "c", "type": "Convolution", "bottom": ["data"],
                          "num_output": 0, "kernel": 3})"),
      HasSubstr("field 'layers[c].num_output': expected an integer >= 1 <= 1048576, got 0"));
  absl::StatusOr<Graph> graph = ParseGraph(
      R"({"name": "t", "source": "s", "input": {"name": "data", "shape": [3, 0, 8]},
          "layers": []})",
      "t.json");
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("field 'input.shape[1]'"));
}

TEST(GraphParseBadInput, GroupsMustDivideTheChannels) {
  EXPECT_THAT(ErrorOf(R"({"name": "c", "type": "Convolution", "bottom": ["data"],
                          "num_output": 4, "kernel": 3, "group": 2})"),
              AllOf(HasSubstr("field 'layers[c].group'"),
                    HasSubstr("group 2 does not divide the 3 input and 4 output channels")));
}

TEST(GraphParseBadInput, InvalidJsonAndMissingFieldsNameTheSource) {
  absl::StatusOr<Graph> graph = ParseGraph("{", "broken.json");
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), HasSubstr("broken.json: invalid JSON"));
  graph = ParseGraph(R"({"name": "t", "layers": []})", "t.json");
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(graph.status().message(), AllOf(HasSubstr("missing required field 'source'"),
                                              HasSubstr("missing required field 'input'")));
}

TEST(GraphLoad, UnknownBuiltinListsTheNetworks) {
  absl::StatusOr<Graph> graph = LoadGraph("resnet51");
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(graph.status().message(), HasSubstr("resnet50"));
}

TEST(GraphLoad, ReadsAFileByPath) {
  absl::StatusOr<Graph> graph =
      LoadGraph(absl::StrCat(NEUPIMS_SOURCE_DIR, "/configs/cnn/vgg8.json"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->name, "vgg8");
}

}  // namespace
}  // namespace neupims::models::cnn
