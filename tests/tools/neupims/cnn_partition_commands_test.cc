// `neupims cnn select` and `neupims cnn hype` run through the built binary.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/neupims/cli_runner.h"

namespace neupims::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CnnSelectCommand, Vgg19TextNamesTheSelectionAndItsShare) {
  const CliOutput o = RunCli("cnn select --model vgg19");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("Conv2DBackpropFilter, Conv2DBackpropInput, BiasAddGrad, "
                               "MaxPoolGrad, Conv2D"));
  EXPECT_THAT(o.out, HasSubstr("96.58%"));
}

TEST(CnnSelectCommand, AlexNetJsonListsTheSelectionAndTheRanking) {
  const CliOutput o = RunCli("cnn select --model alexnet --coverage 0.9 --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["selected"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"Conv2DBackpropFilter", "Conv2DBackpropInput", "BiasAddGrad",
                                      "MatMul", "Conv2D"}));
  EXPECT_NEAR(j["covered_time_share"].get<double>(), 0.9574, 1e-9);
  EXPECT_EQ(j["ranking"].size(), 6u);
}

TEST(CnnSelectCommand, UnknownModelListsTheChoices) {
  const CliOutput o = RunCli("cnn select --model resnet50");
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.out, HasSubstr("vgg19, alexnet, dcgan"));
  EXPECT_NE(RunCli("cnn select --coverage 1.5").status, 0);
}

TEST(CnnHypeCommand, JsonReportsPlacementMakespanAndPeakPowerUnderTheCap) {
  const CliOutput o = RunCli("cnn hype --workload cnn-step --power-cap-w 230 --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["workload"], "cnn-step");
  EXPECT_LE(j["peak_power_w"].get<double>(), 230);
  EXPECT_GT(j["makespan_s"].get<double>(), 0);
  EXPECT_FALSE(j["offloaded"].empty());
  for (const auto& op : j["ops"])
    EXPECT_TRUE(op["placement"] == "gpu" || op["placement"] == "fpga");
}

TEST(CnnHypeCommand, TextPrintsTheOffloadedSetAndTheKernelChoice) {
  const CliOutput o = RunCli("cnn hype");
  ASSERT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, HasSubstr("offloaded:"));
  EXPECT_THAT(o.out, HasSubstr("makespan:"));
  EXPECT_THAT(o.out, HasSubstr("peak power:"));
  EXPECT_THAT(o.out, HasSubstr("LI 81.81"));
}

TEST(CnnHypeCommand, BadInputsAreClearErrors) {
  CliOutput o = RunCli("cnn hype --workload nosuch");
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.out, HasSubstr("cnn-step"));
  o = RunCli("cnn hype --power-cap-w 40");
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.out, HasSubstr("idle"));
  // Not a power: refused when the flags are parsed, naming the flag and the range (it was
  // SimulateHype's check, naming "power_cap_w"), never the scheduler's internal "made no
  // progress" (a NaN compares false with every power, so no op would start).
  for (const char* cap : {"nan", "inf", "-5"}) {
    o = RunCli(absl::StrCat("cnn hype --power-cap-w ", cap));
    EXPECT_EQ(o.status, 2) << cap;
    EXPECT_THAT(o.out, HasSubstr(absl::StrCat("--power-cap-w: value ", cap, " must be"))) << cap;
    EXPECT_THAT(o.out, Not(HasSubstr("no progress"))) << cap;
  }
}

// The coverage was checked by SelectPimOffload, whose "coverage must be in (0, 1]" named no flag.
TEST(CnnSelectCommand, ACoverageOutsideItsRangeNamesTheFlag) {
  for (const char* coverage : {"0", "1.5", "nan"}) {
    const CliOutput o = RunCli(absl::StrCat("cnn select --coverage ", coverage));
    EXPECT_EQ(o.status, 2) << coverage;
    EXPECT_THAT(o.out,
                HasSubstr(absl::StrCat("--coverage: value ", coverage, " must be in (0, 1]")))
        << o.out;
  }
}

}  // namespace
}  // namespace neupims::cli
