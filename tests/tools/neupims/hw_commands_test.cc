// `neupims hw attention` through the built binary.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/tools/neupims/cli_runner.h"

namespace neupims::cli {
namespace {

// The count issue 14 pins for the reference simulator: 285 (Newton) vs 29 (NeuPIMs)
// instructions per head of 128 at L = 512; four heads share a row (hw/pim/issue_limit.h).
int64_t InstructionsForFourHeadsAt512(const std::string& device) {
  const CliOutput o = RunCli(absl::StrCat("hw attention --device ", device,
                                          " --level analytic --heads 4 --seq-len 512 --json"));
  EXPECT_EQ(o.status, 0) << o.out;
  const nlohmann::json j = nlohmann::json::parse(o.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << o.out;
  return j.is_object() ? j.value("pim_instructions", int64_t{-1}) : -1;
}

TEST(HwAttentionCommand, ReportsPimInstructionsOfBothCommandSets) {
  EXPECT_EQ(InstructionsForFourHeadsAt512("newton"), 1141);
  EXPECT_EQ(InstructionsForFourHeadsAt512("neupims"), 117);
}

TEST(HwAttentionCommand, TableShowsPimInstructions) {
  const CliOutput o = RunCli("hw attention --device newton --level analytic --seq-len 64");
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_THAT(o.out, ::testing::HasSubstr("PIM instructions"));
}

}  // namespace
}  // namespace neupims::cli
