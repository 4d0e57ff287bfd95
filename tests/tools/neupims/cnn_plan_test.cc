// `neupims cnn plan` and `neupims cnn pareto` run through the built binary.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/neupims/cli_runner.h"

namespace neupims::cli {
namespace {

using ::testing::HasSubstr;

TEST(CnnPlanTest, JsonPlanCoversEveryLayerWithOneStagePerDevice) {
  const CliOutput o = RunCli("cnn plan --model resnet50 --cluster donna-hetero --alpha 1 --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  ASSERT_FALSE(j["stages"].empty());
  int layers = 0;
  std::set<std::string> devices;
  double slowest = 0;
  for (const auto& s : j["stages"]) {
    layers += s["layers"].get<int>();
    EXPECT_TRUE(devices.insert(s["device"].get<std::string>()).second);
    slowest = std::max({slowest, s["compute_s"].get<double>(), s["transfer_s"].get<double>()});
  }
  EXPECT_GT(layers, 50);
  EXPECT_DOUBLE_EQ(j["bottleneck_s"].get<double>(), slowest);
  EXPECT_NEAR(j["throughput_per_s"].get<double>(), 1 / slowest, 1e-9);
}

TEST(CnnPlanTest, ExactIsNeverWorseThanPublished) {
  for (const char* alpha : {"0.3", "0.8"}) {
    const CliOutput a =
        RunCli(absl::StrCat("cnn plan --model vgg19 --policy donna --alpha ", alpha, " --json"));
    const CliOutput b = RunCli(
        absl::StrCat("cnn plan --model vgg19 --policy donna-exact --alpha ", alpha, " --json"));
    ASSERT_EQ(a.status, 0) << a.out;
    ASSERT_EQ(b.status, 0) << b.out;
    EXPECT_LE(nlohmann::json::parse(b.out)["objective"].get<double>(),
              nlohmann::json::parse(a.out)["objective"].get<double>() * (1 + 1e-12));
  }
}

TEST(CnnPlanTest, ParetoPrintsTheSweepAndTheFront) {
  const CliOutput o = RunCli("cnn pareto --model vgg8 --cluster donna-hetero");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("alpha sweep"));
  EXPECT_THAT(o.out, HasSubstr("Pareto front"));
  // Alpha 0: the whole model on the most energy-efficient device, the CIM (DONNA sec. IV).
  EXPECT_THAT(o.out, HasSubstr("   0.0       1"));
  EXPECT_THAT(o.out, HasSubstr("cim0\n"));
}

TEST(CnnPlanTest, HypePolicyPrintsAPlanOnTheGpuAndFpgaOrSaysWhatIsMissing) {
  CliOutput o = RunCli("cnn plan --model resnet50 --cluster fpga-gpu --policy hype --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["policy"], "hype");
  ASSERT_FALSE(j["stages"].empty());
  for (const auto& s : j["stages"]) {
    const std::string device = s["device"].get<std::string>();
    EXPECT_TRUE(device == "gpu0" || device == "fpga0") << device;
  }
  o = RunCli("cnn plan --model resnet50 --cluster fpga-gpu --policy hype");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("resnet50 on fpga-gpu, hype"));
  EXPECT_THAT(o.out, ::testing::ContainsRegex("partition +gpu0:conv1-prob"));
  EXPECT_THAT(o.out, HasSubstr("busiest device"));
  EXPECT_THAT(o.out, HasSubstr("energy per inference"));
  o = RunCli("cnn plan --model resnet50 --cluster donna-hetero --policy hype");
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("partition policy hype: the cluster has no fpga device"));
}

TEST(CnnPlanTest, BadInputsAreClearErrors) {
  CliOutput o = RunCli("cnn plan --cluster nosuch");
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.out, HasSubstr("edge-cloud"));
  o = RunCli("cnn plan --cluster fpga-gpu --policy cim-only");
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("no cim device"));
  o = RunCli("cnn plan --model resnet50 --cluster fpga-gpu --policy fpga-only");
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("fc1000"));
  o = RunCli("cnn plan --alpha 1.5");
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("alpha"));
}

}  // namespace
}  // namespace neupims::cli
