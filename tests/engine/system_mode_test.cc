#include "engine/system_mode.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"

namespace neupims::engine {
namespace {

using ::testing::HasSubstr;

TEST(ParseSystemMode, NeuPims) {
  absl::StatusOr<SystemMode> m = ParseSystemMode("neupims");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "neupims");
  EXPECT_TRUE(m->pim_attention);
  EXPECT_TRUE(m->dual_row_buffers);
  EXPECT_EQ(m->channel_policy, scheduler::ChannelPolicy::kMinLoad);
  EXPECT_TRUE(m->sub_batch_interleaving);
  EXPECT_TRUE(m->softmax_overlap());
  EXPECT_EQ(m->default_device(), "neupims");
}

TEST(ParseSystemMode, NpuPlusPimIsTheBlockedNewtonBaseline) {
  absl::StatusOr<SystemMode> m = ParseSystemMode("npu+pim");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "npu+pim");
  EXPECT_TRUE(m->pim_attention);
  EXPECT_FALSE(m->dual_row_buffers);
  EXPECT_EQ(m->channel_policy, scheduler::ChannelPolicy::kRoundRobin);
  EXPECT_FALSE(m->sub_batch_interleaving);
  EXPECT_FALSE(m->softmax_overlap());
  EXPECT_EQ(m->default_device(), "newton");
}

TEST(ParseSystemMode, NpuOnlyRunsAttentionOnTheNpu) {
  absl::StatusOr<SystemMode> m = ParseSystemMode("npu-only");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "npu-only");
  EXPECT_FALSE(m->pim_attention);
  EXPECT_FALSE(m->dual_row_buffers);
  EXPECT_EQ(m->channel_policy, scheduler::ChannelPolicy::kRoundRobin);
  EXPECT_FALSE(m->sub_batch_interleaving);
  EXPECT_FALSE(m->softmax_overlap());
  EXPECT_EQ(m->default_device(), "npu-only");
}

TEST(ParseSystemMode, UnknownNamesAreErrorsListingTheChoices) {
  for (const char* name : {"", "newton", "NeuPIMs", "npu", "npu+pim ", "pim"}) {
    absl::StatusOr<SystemMode> m = ParseSystemMode(name);
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("choices: npu-only, npu+pim, neupims"))
        << name;
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(std::string("'") + name + "'"));
  }
}

// npu-only has no PIM banks to give a second row buffer: "on" is refused naming both options
// (it used to reach the NPU model as a zero bandwidth share), "off" and auto are what it is.
TEST(CheckDualRowBuffers, OnIsRefusedOnlyForNpuOnly) {
  const absl::Status s = CheckDualRowBuffers(SystemModeKind::kNpuOnly, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--dual-row-buffers"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("--mode npu-only"));
  EXPECT_TRUE(CheckDualRowBuffers(SystemModeKind::kNpuOnly, false).ok());
  EXPECT_TRUE(CheckDualRowBuffers(SystemModeKind::kNpuOnly, std::nullopt).ok());
  EXPECT_TRUE(CheckDualRowBuffers(SystemModeKind::kNpuPim, true).ok());
  EXPECT_TRUE(CheckDualRowBuffers(SystemModeKind::kNeuPims, false).ok());
}

}  // namespace
}  // namespace neupims::engine
