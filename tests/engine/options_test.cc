// The names tables of the engine's typed options: one table per enum, shared by the CLI, the
// server config, the experiments and the engine.
#include "engine/options.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "engine/system_mode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hw/registry.h"
#include "scheduler/scheduler.h"

namespace neupims::engine {
namespace {

using ::testing::HasSubstr;

template <typename E>
void ExpectRoundTrip(const EnumNames<E>& names, const std::vector<E>& values) {
  SCOPED_TRACE(names.what());
  std::vector<std::string> printed;
  for (E v : values) printed.emplace_back(names.ToString(v));
  // Every value has a name, listed once, in table order.
  EXPECT_EQ(printed, names.Names());
  for (const std::string& name : names.Names()) {
    absl::StatusOr<E> v = names.Parse(name);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(names.ToString(*v), name);
  }
}

template <typename E>
void ExpectUnknownListsChoices(const EnumNames<E>& names, const std::string& choices) {
  absl::StatusOr<E> v = names.Parse("no-such-choice");
  ASSERT_FALSE(v.ok()) << names.what();
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("'no-such-choice'"));
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("(choices: " + choices + ")"));
  EXPECT_EQ(absl::StrJoin(names.Names(), ", "), choices);
}

TEST(OptionNames, EveryNameParsesAndPrintsBack) {
  ExpectRoundTrip(SystemModeNames(),
                  {SystemModeKind::kNpuOnly, SystemModeKind::kNpuPim, SystemModeKind::kNeuPims});
  ExpectRoundTrip(PrefillPlacementNames(),
                  {PrefillPlacement::kStandalone, PrefillPlacement::kLocal});
  ExpectRoundTrip(MhaEstimatorNames(),
                  {MhaEstimatorKind::kAnalytic, MhaEstimatorKind::kAlgorithm1});
  ExpectRoundTrip(
      SubBatchInterleavingNames(),
      {SubBatchInterleaving::kOn, SubBatchInterleaving::kOff, SubBatchInterleaving::kAuto});
  ExpectRoundTrip(scheduler::ChannelPolicyNames(),
                  {scheduler::ChannelPolicy::kRoundRobin, scheduler::ChannelPolicy::kMinLoad});
  ExpectRoundTrip(hw::DetailLevelNames(), {hw::DetailLevel::kCommand, hw::DetailLevel::kAnalytic});
}

TEST(OptionNames, UnknownNameListsTheChoices) {
  ExpectUnknownListsChoices(SystemModeNames(), "npu-only, npu+pim, neupims");
  ExpectUnknownListsChoices(PrefillPlacementNames(), "standalone, local");
  ExpectUnknownListsChoices(MhaEstimatorNames(), "analytic, algorithm1");
  ExpectUnknownListsChoices(SubBatchInterleavingNames(), "on, off, auto");
  ExpectUnknownListsChoices(scheduler::ChannelPolicyNames(), "round_robin, min_load");
  ExpectUnknownListsChoices(hw::DetailLevelNames(), "command, analytic");
}

TEST(OptionNames, ErrorsNameTheOption) {
  EXPECT_THAT(std::string(SystemModeNames().Parse("x").status().message()),
              HasSubstr("unknown system mode 'x'"));
  EXPECT_THAT(std::string(PrefillPlacementNames().Parse("x").status().message()),
              HasSubstr("unknown prefill mode 'x'"));
  EXPECT_THAT(std::string(MhaEstimatorNames().Parse("x").status().message()),
              HasSubstr("unknown MHA estimator 'x'"));
  EXPECT_THAT(std::string(scheduler::ChannelPolicyNames().Parse("x").status().message()),
              HasSubstr("unknown channel policy 'x'"));
  EXPECT_THAT(std::string(hw::DetailLevelNames().Parse("x").status().message()),
              HasSubstr("unknown level of detail 'x'"));
}

TEST(OptionNames, ChannelPolicyKeepsItsShortAliases) {
  EXPECT_EQ(
      scheduler::ChannelPolicyNames().Parse("rr").value_or(scheduler::ChannelPolicy::kMinLoad),
      scheduler::ChannelPolicy::kRoundRobin);
  EXPECT_EQ(scheduler::ChannelPolicyNames().Parse("minload").value_or(
                scheduler::ChannelPolicy::kRoundRobin),
            scheduler::ChannelPolicy::kMinLoad);
  EXPECT_STREQ(scheduler::ToString(scheduler::ChannelPolicy::kRoundRobin), "round_robin");
}

TEST(OptionNames, SystemModeForKeepsTheTableName) {
  for (SystemModeKind k :
       {SystemModeKind::kNpuOnly, SystemModeKind::kNpuPim, SystemModeKind::kNeuPims}) {
    const SystemMode m = SystemModeFor(k);
    EXPECT_EQ(m.kind, k);
    EXPECT_EQ(m.name, ToString(k));
  }
}

TEST(OptionNames, DetailLevelsPickTheRegisteredModels) {
  const hw::DetailModels command = hw::DetailModelsFor(hw::DetailLevel::kCommand);
  EXPECT_EQ(command.pim, "command");
  EXPECT_EQ(command.npu, "tiled");
  const hw::DetailModels analytic = hw::DetailModelsFor(hw::DetailLevel::kAnalytic);
  EXPECT_EQ(analytic.pim, "analytic");
  EXPECT_EQ(analytic.npu, "analytic");
  EXPECT_THAT(hw::PimModelNames(), testing::IsSupersetOf({command.pim, analytic.pim}));
  EXPECT_THAT(hw::NpuModelNames(), testing::IsSupersetOf({command.npu, analytic.npu}));
}

}  // namespace
}  // namespace neupims::engine
