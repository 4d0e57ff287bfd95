// `neupims hw attention|gemv|vector` through the built binary.
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

// --on: auto picks the PIM where the device has one and the NPU where it has none; pim on a
// device without one is an error naming the way out.
TEST(HwGemvCommand, OnChoosesTheUnitAndRefusesPimWithoutOne) {
  const std::string gemv = "hw gemv --level analytic --rows 64 --cols 64 --json";
  auto unit = [](const CliOutput& o) {
    const nlohmann::json j = nlohmann::json::parse(o.out, nullptr, /*allow_exceptions=*/false);
    return j.is_object() ? j.value("unit", std::string("?")) : o.out;
  };
  EXPECT_EQ(unit(RunCli(gemv)), "pim");
  EXPECT_EQ(unit(RunCli(gemv + " --on npu")), "npu");
  EXPECT_EQ(unit(RunCli(gemv + " --device npu-only")), "npu");
  const CliOutput no_pim = RunCli(gemv + " --device npu-only --on pim");
  EXPECT_NE(no_pim.status, 0);
  EXPECT_THAT(no_pim.out, ::testing::HasSubstr("has no PIM; use --on npu"));
}

TEST(HwCommands, EnumFlagsTakeTheirTablesNamesOnly) {
  const CliOutput random = RunCli(
      "hw attention --level analytic --seq-len 64 --mem-demand 0.5 --mem-pattern random --json");
  EXPECT_EQ(random.status, 0) << random.out;
  EXPECT_THAT(random.out, ::testing::HasSubstr("\"pattern\": \"random\""));
  const CliOutput gelu = RunCli("hw vector --op gelu --rows 4 --cols 8 --json");
  EXPECT_EQ(gelu.status, 0) << gelu.out;
  EXPECT_THAT(gelu.out, ::testing::HasSubstr("\"op\": \"gelu\""));
  for (const char* bad : {"hw vector --op matmul", "hw gemv --on gpu",
                          "hw attention --mem-pattern zigzag", "step --batch 4 --layers three"}) {
    const CliOutput o = RunCli(bad);
    EXPECT_NE(o.status, 0) << bad;
    EXPECT_THAT(o.out, ::testing::HasSubstr("not in {")) << bad;
  }
}

}  // namespace
}  // namespace neupims::cli
