#include "scheduler/partition/pim_selection.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::scheduler::partition {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

PimOpProfile Table1(const std::string& model) {
  absl::StatusOr<std::vector<PimOpProfile>> tables = LoadPimOpProfiles("hpim_table1");
  EXPECT_TRUE(tables.ok()) << tables.status();
  absl::StatusOr<PimOpProfile> t = FindPimOpProfile(*tables, model);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// ---------------------------------------------------------------------------------------------
// Step 1 on the paper's Table I (sec. III-C, x = 90).

TEST(PimSelection, Vgg19SelectsTheFivePublishedOperationsCovering96_58Percent) {
  absl::StatusOr<PimSelection> s = SelectPimOffload(Table1("vgg19"));
  ASSERT_TRUE(s.ok()) << s.status();
  // Global indices: BackpropFilter 1+1, BackpropInput 2+3, BiasAddGrad 3+2, MaxPoolGrad 5+4,
  // Conv2D 4+6 (not in the memory top five), Relu 6+5. 84.75% after three, 86.24% after
  // MaxPoolGrad, 96.58% after Conv2D.
  EXPECT_THAT(s->selected, ElementsAre("Conv2DBackpropFilter", "Conv2DBackpropInput", "BiasAddGrad",
                                       "MaxPoolGrad", "Conv2D"));
  EXPECT_NEAR(s->covered_time_share, 0.9658, 1e-9);
  EXPECT_TRUE(s->target_reached);
}

TEST(PimSelection, AlexNetSelectsTheFivePublishedOperationsCovering95_74Percent) {
  absl::StatusOr<PimSelection> s = SelectPimOffload(Table1("alexnet"));
  ASSERT_TRUE(s.ok()) << s.status();
  // BackpropFilter 1+3 and BackpropInput 2+2 tie at 4 (lower time rank first); BiasAddGrad 5+1;
  // MatMul 3+6 and Conv2D 4+5 tie at 9.
  EXPECT_THAT(s->selected, ElementsAre("Conv2DBackpropFilter", "Conv2DBackpropInput", "BiasAddGrad",
                                       "MatMul", "Conv2D"));
  EXPECT_NEAR(s->covered_time_share, 0.9574, 1e-9);
}

TEST(PimSelection, GlobalIndexIsTheSumOfBothRanksAndUnlistedOpsRankLast) {
  absl::StatusOr<PimSelection> s = SelectPimOffload(Table1("vgg19"));
  ASSERT_TRUE(s.ok());
  const RankedPimOp& relu = s->global_list.back();
  EXPECT_EQ(relu.name, "Relu");
  EXPECT_EQ(relu.time_rank, 6);
  EXPECT_EQ(relu.memory_rank, 5);
  EXPECT_EQ(relu.global_index, 11);
  EXPECT_EQ(s->global_list[4].name, "Conv2D");
  EXPECT_EQ(s->global_list[4].memory_rank, 6);
}

TEST(PimSelection, SmallerCoverageStopsAtTheFirstPrefixReachingIt) {
  absl::StatusOr<PimSelection> s = SelectPimOffload(Table1("vgg19"), 0.5);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(s->selected, ElementsAre("Conv2DBackpropFilter", "Conv2DBackpropInput"));
  EXPECT_NEAR(s->covered_time_share, 0.7283, 1e-9);
}

TEST(PimSelection, UnreachableCoverageSelectsEverythingAndSaysSo) {
  // DCGAN's listed operations cover 71.86% of the time ("Other 47 ops" hold 28.14%).
  absl::StatusOr<PimSelection> s = SelectPimOffload(Table1("dcgan"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->selected.size(), 6u);
  EXPECT_NEAR(s->covered_time_share, 0.7186, 1e-9);
  EXPECT_FALSE(s->target_reached);
}

TEST(PimSelection, BadInputsAreRefused) {
  EXPECT_FALSE(SelectPimOffload(Table1("vgg19"), 0).ok());
  EXPECT_FALSE(SelectPimOffload(Table1("vgg19"), 1.5).ok());
  PimOpProfile dup = Table1("vgg19");
  dup.ops.push_back(dup.ops[0]);
  EXPECT_THAT(std::string(SelectPimOffload(dup).status().message()), HasSubstr("duplicate"));
  absl::StatusOr<std::vector<PimOpProfile>> tables = LoadPimOpProfiles("hpim_table1");
  ASSERT_TRUE(tables.ok());
  absl::StatusOr<PimOpProfile> none = FindPimOpProfile(*tables, "resnet50");
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("vgg19, alexnet, dcgan"));
}

// ---------------------------------------------------------------------------------------------
// Step 2: the three scheduling principles.

TEST(PimSchedule, CandidatesPreferFixedFunctionThenProgrammableThenCpu) {
  // Three independent candidates, one unit of each kind: the first takes the fixed-function
  // unit, the second the programmable PIM, the third the CPU (all PIMs busy).
  std::vector<PimTask> tasks = {
      {.name = "a", .candidate = true, .fixed_function_s = 1, .programmable_s = 2, .cpu_s = 4},
      {.name = "b", .candidate = true, .fixed_function_s = 1, .programmable_s = 2, .cpu_s = 4},
      {.name = "c", .candidate = true, .fixed_function_s = 1, .programmable_s = 2, .cpu_s = 4}};
  absl::StatusOr<PimSchedule> s = SchedulePimTasks(tasks, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->tasks[0].unit, PimUnit::kFixedFunction);
  EXPECT_EQ(s->tasks[1].unit, PimUnit::kProgrammable);
  EXPECT_EQ(s->tasks[2].unit, PimUnit::kCpu);
  EXPECT_DOUBLE_EQ(s->makespan_s, 4);
}

TEST(PimSchedule, NonFixedFunctionOpsAndNonCandidatesSkipTheUnitsTheyCannotUse) {
  std::vector<PimTask> tasks = {
      {.name = "relu", .candidate = true, .programmable_s = 2, .cpu_s = 3},
      {.name = "other",
       .candidate = false,
       .fixed_function_s = 1,
       .programmable_s = 1,
       .cpu_s = 5}};
  absl::StatusOr<PimSchedule> s = SchedulePimTasks(tasks, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tasks[0].unit, PimUnit::kProgrammable);
  EXPECT_EQ(s->tasks[1].unit, PimUnit::kCpu);
}

TEST(PimSchedule, DependenciesAreRespected) {
  std::vector<PimTask> tasks = {
      {.name = "conv", .candidate = true, .fixed_function_s = 3, .cpu_s = 9},
      {.name = "bias", .deps = {0}, .candidate = true, .fixed_function_s = 1, .cpu_s = 2},
      {.name = "loss", .deps = {0, 1}, .candidate = false, .cpu_s = 1},
      {.name = "free", .candidate = false, .cpu_s = 2}};
  absl::StatusOr<PimSchedule> s = SchedulePimTasks(tasks, {});
  ASSERT_TRUE(s.ok());
  for (size_t i = 0; i < tasks.size(); ++i) {
    for (int d : tasks[i].deps) EXPECT_GE(s->tasks[i].start_s, s->tasks[d].end_s) << i;
  }
  EXPECT_EQ(s->tasks[1].unit, PimUnit::kFixedFunction);  // the unit conv frees
  EXPECT_DOUBLE_EQ(s->tasks[1].start_s, 3);
  EXPECT_DOUBLE_EQ(s->tasks[3].start_s, 0);  // the CPU runs independent work meanwhile
  EXPECT_DOUBLE_EQ(s->makespan_s, 5);
}

TEST(PimSchedule, RefusesDependenciesOutOfTopologicalOrder) {
  std::vector<PimTask> tasks = {{.name = "a", .deps = {1}, .cpu_s = 1}, {.name = "b", .cpu_s = 1}};
  EXPECT_FALSE(SchedulePimTasks(tasks, {}).ok());
}

}  // namespace
}  // namespace neupims::scheduler::partition
