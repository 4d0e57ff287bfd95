// `neupims serve` with the CNN flags (issue 13): bad values are refused before anything listens,
// with an error naming the flag, the config key or the model.
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/neupims/cli_runner.h"

namespace neupims::cli {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kServe[] = "serve --port 0 --metrics-port -1 --http-port -1 ";

TEST(ServeCnnFlags, AnUnknownModelIsRefusedNamingIt) {
  const CliOutput o = RunCli(absl::StrCat(kServe, "--cnn-model resnet50,resnet51"));
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_THAT(o.out, HasSubstr("CNN model 'resnet51'"));
}

// CLI11's ->delimiter(',') dropped an empty item in silence ("a,,b" served a and b).
TEST(ServeCnnFlags, AnEmptyModelInTheListIsRefusedNamingTheFlag) {
  for (const char* models : {"resnet50,,vgg16", "resnet50,", ",resnet50"}) {
    const CliOutput o = RunCli(absl::StrCat(kServe, "--cnn-model ", models));
    EXPECT_EQ(o.status, 2) << models << ": " << o.out;
    EXPECT_THAT(o.out, HasSubstr("--cnn-model: empty item in '")) << models;
  }
}

TEST(ServeCnnFlags, BadPolicyAlphaAndBatchNameTheFlag) {
  CliOutput o = RunCli(absl::StrCat(kServe, "--cnn-model resnet50 --cnn-policy hyper"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, AllOf(HasSubstr("--cnn-policy"), HasSubstr("donna-exact")));
  // hype is a policy, but the default cluster (donna-hetero) has no FPGA for it.
  o = RunCli(absl::StrCat(kServe, "--cnn-model resnet50 --cnn-policy hype"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("partition policy hype: the cluster has no fpga device"));
  o = RunCli(absl::StrCat(kServe, "--cnn-model resnet50 --cnn-alpha 1.5"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("--cnn-alpha"));
  o = RunCli(absl::StrCat(kServe, "--cnn-model resnet50 --cnn-max-batch 0"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("--cnn-max-batch"));
}

TEST(ServeCnnFlags, APolicyThatCannotPlaceTheModelSaysWhy) {
  const CliOutput o = RunCli(
      absl::StrCat(kServe, "--cnn-model resnet50 --cnn-cluster fpga-gpu --cnn-policy fpga-only"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, AllOf(HasSubstr("CNN model 'resnet50'"), HasSubstr("fpga-only"),
                           HasSubstr("fully-connected")));
}

TEST(ServeCnnFlags, ConfigFieldsAreCheckedByName) {
  const std::string path = ::testing::TempDir() + "cnn_server.json";
  std::ofstream(path) << R"({"cnn_models": ["resnet50"], "cnn_alpha": 2})";
  const CliOutput o = RunCli(absl::StrCat(kServe, "--config ", path));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, AllOf(HasSubstr("cnn_alpha"), HasSubstr(path)));
}

}  // namespace
}  // namespace neupims::cli
