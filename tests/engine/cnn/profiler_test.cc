#include "engine/cnn/profiler.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "engine/cnn/fpga_compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::engine::cnn {
namespace {

using models::cnn::Graph;
using scheduler::partition::kCannotRun;
using scheduler::partition::Profile;
using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

Graph Load(const std::string& name) {
  absl::StatusOr<Graph> g = models::cnn::LoadGraph(name);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.value_or(Graph{});
}

hw::cluster::Cluster Cluster(const std::string& name) {
  absl::StatusOr<hw::cluster::Cluster> c = hw::cluster::LoadCluster(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.value_or(hw::cluster::Cluster{});
}

Profile Build(const std::string& model, const std::string& cluster) {
  absl::StatusOr<Profile> p = BuildProfile(Load(model), Cluster(cluster));
  EXPECT_TRUE(p.ok()) << p.status();
  return p.value_or(Profile{});
}

int Layer(const Profile& p, const std::string& name) {
  for (size_t i = 0; i < p.layers.size(); ++i) {
    if (p.layers[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no layer " << name;
  return 0;
}

// The sizes every partitioner relies on (what Profile::Validate will check).
void ExpectConsistent(const Profile& p) {
  const size_t layers = p.layers.size(), devices = p.devices.size();
  ASSERT_EQ(p.time_s.size(), layers);
  ASSERT_EQ(p.energy_j.size(), layers);
  ASSERT_EQ(p.cut_bytes.size(), layers - 1);
  ASSERT_EQ(p.link.size(), devices);
  for (size_t l = 0; l < layers; ++l) {
    ASSERT_EQ(p.time_s[l].size(), devices);
    for (size_t d = 0; d < devices; ++d) {
      EXPECT_GE(p.time_s[l][d], 0);
      EXPECT_GE(p.energy_j[l][d], 0);
    }
  }
  for (size_t d = 0; d < devices; ++d) {
    ASSERT_EQ(p.link[d].size(), devices);
    for (size_t e = 0; e < devices; ++e) EXPECT_GT(p.link[d][e].bytes_per_s, 0);
  }
}

TEST(ProfilerTest, LayersAreTheCanonicalNodesThatDoWork) {
  const Profile p = Build("vgg19", "donna-hetero");
  ExpectConsistent(p);
  // 16 convolutions (ReLU folded), 5 pools, 3 FC, softmax.
  EXPECT_EQ(p.layers.size(), 25u);
  EXPECT_EQ(p.layers.front().name, "conv1_1");
  EXPECT_EQ(p.layers.back().name, "prob");
  EXPECT_EQ(p.input_bytes, 3 * 224 * 224 * 4);
  EXPECT_EQ(p.layers.front().output_bytes, 12'845'056);  // DONNA's example tensor
  EXPECT_EQ(p.layers[Layer(p, "fc6")].weight_bytes, (25088LL * 4096 + 4096) * 4);
  EXPECT_EQ(p.devices[3].kind, "cim");
}

TEST(ProfilerTest, ChainCutsCarryOnlyTheLastOutput) {
  const Profile p = Build("vgg19", "donna-hetero");
  for (size_t i = 0; i + 1 < p.layers.size(); ++i) {
    EXPECT_EQ(p.cut_bytes[i], p.layers[i].output_bytes) << p.layers[i].name;
  }
}

TEST(ProfilerTest, ResNetCutsCarryTheSkipConnection) {
  const Profile p = Build("resnet50", "donna-hetero");
  ExpectConsistent(p);
  const int64_t branch1 = 256 * 56 * 56 * 4, inner = 64 * 56 * 56 * 4;
  ASSERT_LT(Layer(p, "res2a_branch1"), Layer(p, "res2a_branch2a"));
  // Inside the block the projection shortcut waits for the add.
  EXPECT_EQ(p.cut_bytes[Layer(p, "res2a_branch2a")], branch1 + inner);
  EXPECT_EQ(p.cut_bytes[Layer(p, "res2a_branch2b")], branch1 + inner);
  EXPECT_EQ(p.cut_bytes[Layer(p, "res2a_branch2c")], 2 * branch1);
  // After the add only its output is live; the identity block then carries it to res2b.
  EXPECT_EQ(p.cut_bytes[Layer(p, "res2a")], branch1);
  EXPECT_EQ(p.cut_bytes[Layer(p, "res2b_branch2a")], branch1 + inner);
}

TEST(ProfilerTest, ConcatIsFreeAndItsProducersStayLiveUntilItsReaders) {
  const Profile p = Build("googlenet", "donna-hetero");
  ExpectConsistent(p);
  for (const auto& l : p.layers) EXPECT_THAT(l.name, ::testing::Not(HasSubstr("output")));
  // Before inception_3b's first layer, the four branches of 3a (the concat, 256x28x28) are live.
  const int first_3b = Layer(p, "inception_3b/1x1");
  EXPECT_EQ(p.cut_bytes[first_3b - 1], 256 * 28 * 28 * 4);
  // Inside 3b the concat of 3a is still read by the remaining branches.
  EXPECT_GT(p.cut_bytes[first_3b], 256 * 28 * 28 * 4);
}

// DONNA sec. IV-A (Fig. 2a-b): "the CIM device is the slowest in computations, except for the
// last one or two layers of each model" (the fully-connected ones) and "the most efficient
// compute device in terms of energy consumption". Against the datasheet-roofline CPU that holds
// for every convolution of VGG19 and ResNet152; VGG8's last convolution stays faster on the CIM
// than on the ideal CPU (docs/offload.md, "Where this differs"), and this test pins exactly that.
TEST(ProfilerTest, DonnaFindingCimSlowOnConvolutionsFastOnFcAndCheapest) {
  const std::map<std::string, std::set<std::string>> cim_beats_cpu = {
      {"vgg8", {"conv6"}}, {"vgg19", {}}, {"resnet152", {}}};
  for (const auto& [model, exceptions] : cim_beats_cpu) {
    const Profile p = Build(model, "donna-hetero");
    const int cpu = 0, gpu = 2, cim = 3;
    double energy[4] = {0, 0, 0, 0};
    std::set<std::string> faster_than_cpu;
    for (size_t l = 0; l < p.layers.size(); ++l) {
      for (int d = 0; d < 4; ++d) energy[d] += p.energy_j[l][d];
      const std::string& name = p.layers[l].name;
      if (name.rfind("fc", 0) == 0) {
        EXPECT_LT(p.time_s[l][cim], p.time_s[l][gpu]) << model << " " << name;
        EXPECT_LT(p.time_s[l][cim], p.time_s[l][cpu]) << model << " " << name;
      } else if (p.layers[l].weight_bytes > 0) {  // convolutions
        EXPECT_GT(p.time_s[l][cim], p.time_s[l][gpu]) << model << " " << name;
        if (p.time_s[l][cim] <= p.time_s[l][cpu]) faster_than_cpu.insert(name);
      }
    }
    EXPECT_EQ(faster_than_cpu, exceptions) << model;
    EXPECT_LT(energy[cim] * 10, energy[gpu]) << model;
    EXPECT_LT(energy[cim] * 10, energy[cpu]) << model;
  }
}

// NeuroSim sizes one chip to the whole network (Chip.cpp) and a layer is costed on it. VGG19's
// chip: 3x3 layers on 512 x 512 PEs, the rest on 1024 x 1024 tiles, 524 tiles of which conv5_4
// holds 4 (share 131); the bus sums 15 * 1728 + 4 * 1152 = 30528 bits, halved to 1908.
TEST(ProfilerTest, CimLayerIsCostedOnItsNetworksChip) {
  const Profile p = Build("vgg19", "donna-hetero");
  const hw::cluster::Cluster c = Cluster("donna-hetero");
  const hw::cim::CimModel model(std::get<hw::cim::CimSpec>(c.devices[3].spec));
  absl::StatusOr<hw::cim::CimCost> conv = model.Mvm({.in_channels = 512,
                                                     .out_channels = 512,
                                                     .kernel_h = 3,
                                                     .kernel_w = 3,
                                                     .out_pixels = 14 * 14,
                                                     .novel_mapping = true,
                                                     .buffer_share = 131,
                                                     .bus_bits = 1908});
  ASSERT_TRUE(conv.ok()) << conv.status();
  const hw::cim::CimCost relu = model.Digital(512.0 * 14 * 14);
  EXPECT_DOUBLE_EQ(p.time_s[Layer(p, "conv5_4")][3], conv->time_s + relu.time_s);
  EXPECT_DOUBLE_EQ(p.energy_j[Layer(p, "conv5_4")][3], conv->energy_j + relu.energy_j);
}

TEST(ProfilerTest, FpgaCostsASingletonGroupAndCannotRunFullyConnected) {
  const Graph g = Load("vgg16");
  const hw::cluster::Cluster c = Cluster("fpga-gpu");
  absl::StatusOr<Profile> p = BuildProfile(g, c);
  ASSERT_TRUE(p.ok()) << p.status();
  ExpectConsistent(*p);
  EXPECT_EQ(p->time_s[Layer(*p, "fc6")][0], kCannotRun);
  EXPECT_LT(p->time_s[Layer(*p, "fc6")][1], kCannotRun);

  absl::StatusOr<Graph> canonical = models::cnn::Canonicalize(g);
  ASSERT_TRUE(canonical.ok());
  const int node = canonical->Find("conv3_1");
  absl::StatusOr<hw::fpga::Group> group = LowerGroup(*canonical, {.nodes = {node}});
  ASSERT_TRUE(group.ok());
  const auto& spec = std::get<hw::fpga::FpgaSpec>(c.devices[0].spec);
  absl::StatusOr<hw::fpga::GroupCost> cost = hw::fpga::FpgaModel(spec).Cost(*group, 1);
  ASSERT_TRUE(cost.ok());
  EXPECT_DOUBLE_EQ(p->time_s[Layer(*p, "conv3_1")][0], cost->time_s);
  EXPECT_EQ(p->devices[0].memory_bytes, (int64_t{4} << 30) * 4);  // INT8 board, FP32 bytes
}

TEST(ProfilerTest, ModelThatFitsOnNoDeviceIsRefusedNamingModelAndMemories) {
  absl::StatusOr<hw::cluster::Cluster> c = hw::cluster::ParseCluster(
      R"({"name": "f", "description": "d",
          "devices": [{"name": "fpga0", "kind": "fpga", "config": "zu2", "memory_bytes": 1000}],
          "links": {"default": {"medium": "pcie5"}}})",
      "f.json");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Profile> p = BuildProfile(Load("vgg16"), *c);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("model 'vgg16' fits on no device"));
  EXPECT_THAT(p.status().message(), HasSubstr("fpga0 (fpga): memory 4000 bytes"));
  EXPECT_THAT(p.status().message(), HasSubstr("'fc6' 411058176 bytes"));
}

TEST(ProfilerTest, LayerLargerThanEveryMemoryIsRefused) {
  std::ifstream in(std::string(NEUPIMS_SOURCE_DIR) + "/configs/gpu/v100.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string key = "\"memory_bytes\": 17179869184";
  text.replace(text.find(key), key.size(), "\"memory_bytes\": 100000000");
  const std::string gpu = WriteTemp("small_gpu.json", text);
  absl::StatusOr<hw::cluster::Cluster> c = hw::cluster::ParseCluster(
      R"({"name": "s", "description": "d",
          "devices": [{"name": "g", "kind": "gpu", "config": ")" +
          gpu + R"("}], "links": {"default": {"medium": "pcie5"}}})",
      "s.json");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Profile> p = BuildProfile(Load("vgg19"), *c);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("layer 'fc6' runs nowhere"));
  EXPECT_THAT(p.status().message(), HasSubstr("g (gpu): memory 100000000 bytes"));
}

TEST(ProfilerTest, MeasuredCsvOverridesTheRooflineForItsLayers) {
  const std::string csv = WriteTemp("gpu.csv", "layer,time_s,energy_j\nconv1_1,0.125,2.5\n");
  absl::StatusOr<hw::cluster::Cluster> c = hw::cluster::ParseCluster(
      R"({"name": "m", "description": "d",
          "devices": [{"name": "g", "kind": "gpu", "config": "rtx3070ti", "profile": ")" +
          csv + R"("}], "links": {"default": {"medium": "pcie5"}}})",
      "m.json");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Profile> p = BuildProfile(Load("vgg19"), *c);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->time_s[0][0], 0.125);
  EXPECT_DOUBLE_EQ(p->energy_j[0][0], 2.5);
  EXPECT_NE(p->time_s[1][0], 0.125);
}

TEST(ProfilerTest, LinksComeFromTheCluster) {
  const Profile p = Build("vgg8", "edge-cloud");
  ExpectConsistent(p);
  EXPECT_EQ(p.link[0][1].medium, "hb-wcc");
  EXPECT_EQ(p.link[0][4].medium, "lb-wcc");
  EXPECT_NEAR(p.link[0][4].TimeS(12'845'056), 3.670, 0.001);
}

TEST(ProfilerTest, HeterogeneousPimRunsEveryLayer) {
  absl::StatusOr<hw::cluster::Cluster> c = hw::cluster::ParseCluster(
      R"({"name": "h", "description": "d",
          "devices": [{"name": "pim0", "kind": "hpim", "config": "hmc"}],
          "links": {"default": {"medium": "pcie5"}}})",
      "h.json");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Profile> p = BuildProfile(Load("alexnet"), *c);
  ASSERT_TRUE(p.ok()) << p.status();
  for (size_t l = 0; l < p->layers.size(); ++l) EXPECT_LT(p->time_s[l][0], kCannotRun);
}

}  // namespace
}  // namespace neupims::engine::cnn
