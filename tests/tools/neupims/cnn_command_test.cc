// `neupims cnn` and `neupims experiments --offload` run through the built binary.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/neupims/cli_runner.h"

namespace neupims::cli {
namespace {

using ::testing::HasSubstr;

TEST(CnnCommandTest, CompileJsonReportsThroughputFusionsAndEnergy) {
  const CliOutput o = RunCli("cnn compile --model resnet50 --device zu2 --strategy optimal --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["model"], "resnet50");
  EXPECT_EQ(j["strategy"], "optimal");
  EXPECT_GT(j["gops_per_s"].get<double>(), 100);
  EXPECT_NEAR(j["energy_j"].get<double>(), 7.5 * j["time_s"].get<double>(), 1e-9);
  EXPECT_GT(j["fused_groups"].get<int>(), 0);
  bool eltwise_fused = false;
  for (const auto& g : j["groups"]) eltwise_fused |= g["fusion"] == "conv+eltwise";
  EXPECT_TRUE(eltwise_fused);
}

TEST(CnnCommandTest, CompileTextListsGroupsAndSummary) {
  const CliOutput o = RunCli("cnn compile --model vgg16 --strategy greedy");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("conv+pool"));
  EXPECT_THAT(o.out, HasSubstr("GOP/s"));
  EXPECT_THAT(o.out, HasSubstr("fc6"));  // on the host
}

TEST(CnnCommandTest, BadInputsAreClearErrors) {
  CliOutput o = RunCli("cnn compile --model nosuchnet");
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.out, HasSubstr("resnet50"));  // the choices are listed
  o = RunCli("cnn compile --device zu3");
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.out, HasSubstr("zu9-500"));
  o = RunCli("cnn compile --strategy best");
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("optimal"));
}

TEST(CnnCommandTest, ModelsListsEveryNetwork) {
  const CliOutput o = RunCli("cnn models");
  ASSERT_EQ(o.status, 0) << o.out;
  for (const char* m :
       {"alexnet", "googlenet", "resnet152", "resnet50", "vgg16", "vgg19", "vgg8"}) {
    EXPECT_THAT(o.out, HasSubstr(m));
  }
}

TEST(CnnCommandTest, OffloadExperimentsReplaceOnlyTheirSection) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "offload_results.md";
  std::ofstream(path) << "# Results\n\nLLM part stays.\n";
  ASSERT_EQ(RunCli(absl::StrCat("experiments --offload --out ", path.string())).status, 0);
  ASSERT_EQ(RunCli(absl::StrCat("experiments --offload --out ", path.string())).status, 0);
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  const std::string text = s.str();
  EXPECT_THAT(text, HasSubstr("LLM part stays."));
  EXPECT_THAT(text, HasSubstr("Table 3: fusion on ZU2"));
  EXPECT_THAT(text, HasSubstr("| resnet50 |"));
  // Run twice, present once.
  const std::string begin = "<!-- offload-results:begin -->";
  EXPECT_EQ(text.find(begin), text.rfind(begin));
  EXPECT_LT(text.find("LLM part stays."), text.find(begin));
}

}  // namespace
}  // namespace neupims::cli
