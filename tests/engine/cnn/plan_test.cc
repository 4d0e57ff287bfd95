#include "engine/cnn/plan.h"

#include <string>

#include "engine/cnn/profiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::engine::cnn {
namespace {

using scheduler::partition::Plan;
using scheduler::partition::Profile;
using ::testing::HasSubstr;

Profile Build(const std::string& model, const std::string& cluster) {
  absl::StatusOr<models::cnn::Graph> g = models::cnn::LoadGraph(model);
  EXPECT_TRUE(g.ok()) << g.status();
  absl::StatusOr<hw::cluster::Cluster> c = hw::cluster::LoadCluster(cluster);
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<Profile> p = BuildProfile(*g, *c);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.value_or(Profile{});
}

TEST(PlanTest, PolicyNamesRoundTrip) {
  for (const char* name :
       {"donna", "donna-exact", "cpu-only", "gpu-only", "cim-only", "fpga-only", "hpim-only"}) {
    absl::StatusOr<PlanPolicy> p = PlanPolicyNames().Parse(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_STREQ(PlanPolicyNames().ToString(*p), name);
  }
  EXPECT_THAT(PlanPolicyNames().Parse("hype").status().message(), HasSubstr("donna-exact"));
}

TEST(PlanTest, SingleKindPolicyUsesOnlyThatKindInClusterNumbering) {
  const Profile p = Build("resnet50", "fpga-gpu");
  absl::StatusOr<Plan> plan = SolvePlan(p, PlanPolicy::kGpuOnly, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->stages.size(), 1u);
  EXPECT_EQ(p.devices[plan->stages[0].device].kind, "gpu");
  EXPECT_EQ(PartitionString(p, *plan),
            "gpu0:" + p.layers.front().name + "-" + p.layers.back().name);
}

TEST(PlanTest, DonnaExactIsNoWorseThanPublished) {
  const Profile p = Build("resnet50", "donna-hetero");
  for (double alpha : {0.0, 0.5, 0.8, 1.0}) {
    absl::StatusOr<Plan> exact = SolvePlan(p, PlanPolicy::kDonnaExact, alpha);
    absl::StatusOr<Plan> published = SolvePlan(p, PlanPolicy::kDonna, alpha);
    ASSERT_TRUE(exact.ok() && published.ok());
    EXPECT_LE(exact->objective, published->objective + 1e-12) << alpha;
  }
}

TEST(PlanTest, MissingKindAndUnrunnableLayersAreNamed) {
  const Profile p = Build("resnet50", "fpga-gpu");
  absl::StatusOr<Plan> cim = SolvePlan(p, PlanPolicy::kCimOnly, 1.0);
  EXPECT_EQ(cim.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cim.status().message(), HasSubstr("no cim device"));
  absl::StatusOr<Plan> fpga = SolvePlan(p, PlanPolicy::kFpgaOnly, 1.0);
  EXPECT_EQ(fpga.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(fpga.status().message(), HasSubstr("fully-connected"));
}

}  // namespace
}  // namespace neupims::engine::cnn
