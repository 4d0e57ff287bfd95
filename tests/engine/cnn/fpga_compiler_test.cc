#include "engine/cnn/fpga_compiler.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/fpga/fpga_spec.h"
#include "models/cnn/graph.h"

namespace neupims::engine::cnn {
namespace {

using models::cnn::StrategyKind;

FpgaCompilation Compile(const std::string& model, const std::string& device,
                        StrategyKind strategy) {
  absl::StatusOr<models::cnn::Graph> g = models::cnn::LoadGraph(model);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<hw::fpga::FpgaSpec> spec = hw::fpga::LoadFpgaSpec(device);
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<FpgaCompilation> c = CompileForFpga(*g, *spec, strategy);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(FpgaCompilerTest, EveryNetworkCompilesWithEveryStrategyOnEveryDevice) {
  for (const std::string& model : models::cnn::BuiltinGraphNames()) {
    for (const std::string& device : hw::fpga::BuiltinFpgaNames()) {
      double previous = 0;
      for (StrategyKind s : {StrategyKind::kNone, StrategyKind::kGreedy, StrategyKind::kOptimal}) {
        const FpgaCompilation c = Compile(model, device, s);
        EXPECT_GT(c.gops_per_s, 0) << model << " " << device;
        // Peak is an upper bound; fusion never makes a network slower.
        EXPECT_LE(c.gops_per_s * 1e9,
                  hw::fpga::LoadFpgaSpec(device)->peak_ops_per_s() * (1 + 1e-9));
        EXPECT_GE(c.gops_per_s, previous * (1 - 1e-12)) << model << " " << device;
        previous = c.gops_per_s;
      }
    }
  }
}

TEST(FpgaCompilerTest, FullyConnectedLayersRunOnTheHost) {
  const FpgaCompilation c = Compile("vgg16", "zu2", StrategyKind::kNone);
  EXPECT_THAT(c.host_nodes, testing::IsSupersetOf({"fc6", "fc7", "fc8"}));
  for (const CompiledGroup& g : c.groups)
    EXPECT_THAT(g.label, testing::Not(testing::StartsWith("fc")));
}

TEST(FpgaCompilerTest, EveryFpgaNodeRunsExactlyOnce) {
  const FpgaCompilation c = Compile("googlenet", "zu2", StrategyKind::kOptimal);
  absl::StatusOr<models::cnn::Graph> g =
      models::cnn::Canonicalize(*models::cnn::LoadGraph("googlenet"));
  ASSERT_TRUE(g.ok());
  std::multiset<int> seen;
  for (const CompiledGroup& cg : c.groups)
    seen.insert(cg.group.nodes.begin(), cg.group.nodes.end());
  for (int n = 0; n < static_cast<int>(g->nodes.size()); ++n) {
    EXPECT_EQ(seen.count(n), PlacementOf(g->nodes[n]) == Placement::kFpga ? 1u : 0u)
        << g->nodes[n].name;
  }
  EXPECT_GT(c.fused_groups, 0);
}

TEST(FpgaCompilerTest, ThroughputIsConvWorkOverTimeAndEnergyIsPowerTimesTime) {
  const FpgaCompilation c = Compile("resnet50", "zu2", StrategyKind::kOptimal);
  EXPECT_NEAR(c.gops_per_s, c.conv_gop / c.time_s, 1e-6);
  EXPECT_NEAR(c.energy_j, 7.5 * c.time_s, 1e-12);
  EXPECT_NEAR(c.gops_per_w, c.gops_per_s / 7.5, 1e-9);
  double sum = 0;
  for (const CompiledGroup& g : c.groups) sum += g.cost.time_s;
  EXPECT_NEAR(sum, c.time_s, 1e-12);
}

TEST(FpgaCompilerTest, BatchRunsInWavesOfCores) {
  absl::StatusOr<models::cnn::Graph> g = models::cnn::LoadGraph("vgg16");
  ASSERT_TRUE(g.ok());
  const hw::fpga::FpgaSpec zu9 = *hw::fpga::LoadFpgaSpec("zu9");
  g->batch = 3;
  absl::StatusOr<FpgaCompilation> three = CompileForFpga(*g, zu9, StrategyKind::kOptimal);
  g->batch = 6;
  absl::StatusOr<FpgaCompilation> six = CompileForFpga(*g, zu9, StrategyKind::kOptimal);
  ASSERT_TRUE(three.ok() && six.ok());
  EXPECT_EQ(three->active_cores, 3);
  EXPECT_NEAR(six->time_s, 2 * three->time_s, 1e-12);
  EXPECT_NEAR(six->gops_per_s, three->gops_per_s, 1e-6);
}

TEST(FpgaCompilerTest, ALayerThatCannotRunIsNamedWithTheLimitItExceeds) {
  absl::StatusOr<models::cnn::Graph> g = models::cnn::LoadGraph("vgg16");
  ASSERT_TRUE(g.ok());
  hw::fpga::FpgaSpec spec = *hw::fpga::LoadFpgaSpec("zu2");
  spec.weight_buffer_bytes = 1;  // no weight tile fits
  absl::StatusOr<FpgaCompilation> c = CompileForFpga(*g, spec, StrategyKind::kOptimal);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), testing::HasSubstr("cannot run on its own"));
  EXPECT_THAT(c.status().message(), testing::HasSubstr("does not fit B_weights (1 bytes)"));
}

}  // namespace
}  // namespace neupims::engine::cnn
