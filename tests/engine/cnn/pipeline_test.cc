#include "engine/cnn/pipeline.h"

#include <string>
#include <vector>

#include "engine/cnn/plan.h"
#include "engine/cnn/profiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::engine::cnn {
namespace {

using scheduler::partition::Plan;
using scheduler::partition::Profile;
using scheduler::partition::Stage;

// Three stages: a (2 s compute, 1 s link), b (3 s compute, 0.5 s link), c (1 s compute).
struct Fixture {
  Profile profile;
  Plan plan;
  Fixture() {
    for (const char* n : {"a", "b", "c"}) profile.devices.push_back({.name = n, .kind = "cpu"});
    plan.stages = {Stage{.device = 0,
                         .compute_s = 2,
                         .compute_energy_j = 10,
                         .transfer_s = 1,
                         .transfer_energy_j = 1},
                   Stage{.device = 1,
                         .compute_s = 3,
                         .compute_energy_j = 20,
                         .transfer_s = 0.5,
                         .transfer_energy_j = 2},
                   Stage{.device = 2, .compute_s = 1, .compute_energy_j = 5}};
    plan.bottleneck_s = 3;
    plan.energy_j = 38;
  }
};

Pipeline Make(const Profile& p, const Plan& plan) {
  absl::StatusOr<Pipeline> pipe = Pipeline::Create(p, plan);
  EXPECT_TRUE(pipe.ok()) << pipe.status();
  return *std::move(pipe);
}

TEST(PipelineTest, ResourcesAreStagesAndLinksInPathOrder) {
  Fixture f;
  Pipeline pipe = Make(f.profile, f.plan);
  std::vector<std::string> names;
  for (const auto& r : pipe.resources()) names.push_back(r.name);
  EXPECT_THAT(names, ::testing::ElementsAre("a", "a->b", "b", "b->c", "c"));
  EXPECT_DOUBLE_EQ(pipe.latency_s(), 7.5);
  EXPECT_DOUBLE_EQ(pipe.bottleneck_s(), 3);
  EXPECT_DOUBLE_EQ(pipe.energy_per_request_j(), 38);
}

TEST(PipelineTest, OneRequestTakesTheSumOfComputeAndTransfers) {
  Fixture f;
  Pipeline pipe = Make(f.profile, f.plan);
  absl::StatusOr<PipelineCompletion> c = pipe.Submit(1, 10);
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->completion_s, 10 + 2 + 1 + 3 + 0.5 + 1);
  EXPECT_DOUBLE_EQ(c->queue_s, 0);
  EXPECT_DOUBLE_EQ(c->energy_j, f.plan.energy_j);
}

TEST(PipelineTest, BackToBackRequestsCompleteOnePerBottleneck) {
  Fixture f;
  Pipeline pipe = Make(f.profile, f.plan);
  constexpr int kN = 50;
  std::vector<double> done;
  for (int i = 0; i < kN; ++i) done.push_back(pipe.Submit(i, 0)->completion_s);
  for (int i = 1; i < kN; ++i) EXPECT_DOUBLE_EQ(done[i] - done[i - 1], f.plan.bottleneck_s) << i;
  // Whatever the last one waited for shows up as queue time, nothing else.
  const PipelineCompletion last = pipe.AdvanceTo(1e9).back();
  EXPECT_DOUBLE_EQ(last.latency_s(), pipe.latency_s() + last.queue_s);
  EXPECT_EQ(last.id, kN - 1);
}

TEST(PipelineTest, AdvanceToDeliversInOrderAndChargesBusyTimeAndEnergy) {
  Fixture f;
  Pipeline pipe = Make(f.profile, f.plan);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pipe.Submit(i, 0).ok());
  EXPECT_EQ(pipe.in_flight(), 3);
  EXPECT_DOUBLE_EQ(pipe.next_completion_s(), 7.5);
  EXPECT_TRUE(pipe.AdvanceTo(7.4).empty());
  std::vector<PipelineCompletion> got = pipe.AdvanceTo(10.5);
  ASSERT_EQ(got.size(), 2u);  // 7.5 and 10.5
  EXPECT_EQ(got[0].id, 0);
  EXPECT_EQ(got[1].id, 1);
  EXPECT_DOUBLE_EQ(pipe.now_s(), 10.5);
  EXPECT_DOUBLE_EQ(pipe.resources()[2].busy_s, 6);  // stage b, two images
  double energy = 0;
  for (const auto& r : pipe.resources()) energy += r.total_energy_j;
  EXPECT_DOUBLE_EQ(energy, 2 * f.plan.energy_j);
}

TEST(PipelineTest, EarliestUnqueuedArrivalWaitsForNoResource) {
  Fixture f;
  Pipeline pipe = Make(f.profile, f.plan);
  ASSERT_TRUE(pipe.Submit(0, 0).ok());
  const double t = pipe.EarliestUnqueuedArrival(0);
  EXPECT_DOUBLE_EQ(t, 3);  // b is free at 6 and is reached 3 s after entry
  absl::StatusOr<PipelineCompletion> c = pipe.Submit(1, t);
  EXPECT_DOUBLE_EQ(c->queue_s, 0);
  EXPECT_DOUBLE_EQ(c->completion_s - t, pipe.latency_s());
}

// A hype-style plan: gpu (1 s), fpga (1 s), gpu again (1 s), free transfers. The GPU is one
// resource serving both its stages: 2 s of each image.
struct SharedGpu {
  Profile profile;
  Plan plan;
  SharedGpu() {
    profile.devices = {{.name = "gpu0", .kind = "gpu"}, {.name = "fpga0", .kind = "fpga"}};
    plan.stages = {Stage{.device = 0, .compute_s = 1, .compute_energy_j = 1},
                   Stage{.device = 1, .compute_s = 1, .compute_energy_j = 2},
                   Stage{.device = 0, .compute_s = 1, .compute_energy_j = 3}};
  }
};

TEST(PipelineTest, ADeviceHostingTwoStagesIsOneResourceAndTheBottleneck) {
  SharedGpu f;
  Pipeline pipe = Make(f.profile, f.plan);
  std::vector<std::string> names;
  for (const auto& r : pipe.resources()) names.push_back(r.name);
  EXPECT_THAT(names, ::testing::ElementsAre("gpu0", "gpu0->fpga0", "fpga0", "fpga0->gpu0"));
  EXPECT_DOUBLE_EQ(pipe.resources()[0].service_s, 2);
  EXPECT_DOUBLE_EQ(pipe.bottleneck_s(), 2);
  EXPECT_DOUBLE_EQ(pipe.latency_s(), 3);
  EXPECT_DOUBLE_EQ(pipe.energy_per_request_j(), 6);

  // Back to back: image i+1's first GPU stage fills the GPU's gap while image i is on the FPGA,
  // so images complete at 3, 4, 7, 8, 11, 12, ...: one per 2 s (the GPU's busy time) on average.
  constexpr int kN = 20;
  std::vector<double> done;
  for (int i = 0; i < kN; ++i) done.push_back(pipe.Submit(i, 0)->completion_s);
  EXPECT_DOUBLE_EQ(done[0], 3);
  EXPECT_DOUBLE_EQ(done[1], 4);
  for (int i = 2; i < kN; ++i) EXPECT_DOUBLE_EQ(done[i] - done[i - 2], 4) << i;
  pipe.AdvanceTo(1e9);
  EXPECT_DOUBLE_EQ(pipe.resources()[0].busy_s, 2 * kN);  // both GPU stages, every image
  EXPECT_DOUBLE_EQ(pipe.resources()[2].busy_s, kN);
  EXPECT_DOUBLE_EQ(pipe.resources()[0].total_energy_j, 4 * kN);
}

TEST(PipelineTest, ASharedDeviceNeverRunsTwoStagesAtOnce) {
  SharedGpu f;
  f.plan.stages[2].compute_s = 3;  // the gap the FPGA leaves (1 s) cannot hold it
  Pipeline pipe = Make(f.profile, f.plan);
  // Image 0 holds the GPU over [0, 1] and [2, 5]; image 1's first stage fits [1, 2].
  EXPECT_DOUBLE_EQ(pipe.Submit(0, 0)->completion_s, 5);
  absl::StatusOr<PipelineCompletion> c = pipe.Submit(1, 0);
  EXPECT_DOUBLE_EQ(c->completion_s, 8);  // [1, 2] GPU, [2, 3] FPGA, [5, 8] GPU
  EXPECT_DOUBLE_EQ(c->queue_s, 1 + 2);
  EXPECT_DOUBLE_EQ(pipe.EarliestUnqueuedArrival(0), 8);  // the GPU is busy without a gap till 8
}

TEST(PipelineTest, ArrivalsOutOfOrderAndEmptyPlansAreRefused) {
  Fixture f;
  Pipeline pipe = Make(f.profile, f.plan);
  ASSERT_TRUE(pipe.Submit(0, 5).ok());
  EXPECT_EQ(pipe.Submit(1, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Pipeline::Create(f.profile, Plan{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineTest, RealPlanMatchesThePlansFigures) {
  absl::StatusOr<models::cnn::Graph> g = models::cnn::LoadGraph("resnet50");
  absl::StatusOr<hw::cluster::Cluster> c = hw::cluster::LoadCluster("donna-hetero");
  ASSERT_TRUE(g.ok() && c.ok());
  absl::StatusOr<Profile> p = BuildProfile(*g, *c);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<Plan> plan = SolvePlan(*p, PlanPolicy::kDonnaExact, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  Pipeline pipe = Make(*p, *plan);
  EXPECT_DOUBLE_EQ(pipe.bottleneck_s(), plan->bottleneck_s);
  EXPECT_NEAR(pipe.energy_per_request_j(), plan->energy_j, 1e-9 * plan->energy_j);
  double last = 0;
  for (int i = 0; i < 20; ++i) last = pipe.Submit(i, 0)->completion_s;
  EXPECT_NEAR(last, pipe.latency_s() + 19 * plan->bottleneck_s, 1e-9 * last);
}

}  // namespace
}  // namespace neupims::engine::cnn
