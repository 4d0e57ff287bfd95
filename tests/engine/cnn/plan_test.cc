#include "engine/cnn/plan.h"

#include <string>
#include <vector>

#include "engine/cnn/hype_plan.h"
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
  for (const char* name : {"donna", "donna-exact", "cpu-only", "gpu-only", "cim-only", "fpga-only",
                           "hpim-only", "hype"}) {
    absl::StatusOr<PlanPolicy> p = PlanPolicyNames().Parse(name);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_STREQ(PlanPolicyNames().ToString(*p), name);
  }
  EXPECT_THAT(PlanPolicyNames().Parse("hyper").status().message(), HasSubstr("donna-exact"));
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

// The front is taken on the priced plans' figures as `cnn pareto` reports them: no point may be
// beaten on one axis and tied on the other. ResNet152 on edge-cloud had four such ties, energies
// one ulp apart (prefix sums) or equal, when the front came from the search's own sums.
TEST(PlanTest, ParetoFrontHasNoPointTiedOnOneAxisAndBeatenOnTheOther) {
  const Profile p = Build("resnet152", "edge-cloud");
  absl::StatusOr<std::vector<Plan>> front = scheduler::partition::ParetoFront(p);
  ASSERT_TRUE(front.ok()) << front.status();
  const double tol_t = 1e-12 * front->front().throughput_per_s();
  const double tol_e = 1e-12 * front->front().energy_j;
  for (const Plan& a : *front) {
    for (const Plan& b : *front) {
      if (&a == &b) continue;
      const bool no_worse =
          b.throughput_per_s() >= a.throughput_per_s() - tol_t && b.energy_j <= a.energy_j + tol_e;
      EXPECT_FALSE(no_worse) << a.throughput_per_s() << "/s at " << a.energy_j
                             << " J is matched by " << b.throughput_per_s() << "/s at "
                             << b.energy_j << " J";
    }
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

// Four layers on {gpu0, fpga0, cpu0}, times in ms, cuts of 1 MB over a 1 GB/s link (1 ms):
//   l0: gpu 10, fpga 20  -> gpu  (the FPGA is slower and l0 is on the critical path: filtered)
//   l1: gpu 10, fpga 2   -> fpga (no slower, passes the filter; its 1 ms input transfer hides
//                                 behind l0's 10 ms and the chain gets shorter)
//   l2: gpu 1,  fpga 5   -> gpu  (filtered: slower on the FPGA)
//   l3: gpu 3,  fpga --  -> gpu  (no FPGA kernel)
Profile HypeToyProfile() {
  Profile p;
  p.model = "toy";
  for (const char* n : {"l0", "l1", "l2", "l3"})
    p.layers.push_back({.name = n, .output_bytes = 1'000'000});
  p.devices = {{.name = "gpu0", .kind = "gpu", .memory_bytes = 1 << 30},
               {.name = "fpga0", .kind = "fpga", .memory_bytes = 1 << 30},
               {.name = "cpu0", .kind = "cpu", .memory_bytes = 1 << 30}};
  const double kNo = scheduler::partition::kCannotRun;
  p.time_s = {{10e-3, 20e-3, 50e-3}, {10e-3, 2e-3, 50e-3}, {1e-3, 5e-3, 50e-3}, {3e-3, kNo, 50e-3}};
  p.energy_j = {{1, 0.2, 5}, {1, 0.02, 5}, {0.1, 0.05, 5}, {0.3, kNo, 5}};
  p.cut_bytes = {1'000'000, 1'000'000, 1'000'000};
  p.input_bytes = 1'000'000;
  p.link.assign(
      3, std::vector<scheduler::partition::LinkCost>(3, {.medium = "toy", .bytes_per_s = 1e9}));
  return p;
}

TEST(PlanTest, HypeOffloadsOnlyWhatTheFpgaDoesNoSlowerAndSharesTheGpu) {
  const Profile p = HypeToyProfile();
  absl::StatusOr<Plan> plan = SolvePlan(p, PlanPolicy::kHype, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(PartitionString(p, *plan), "gpu0:l0-l0,fpga0:l1-l1,gpu0:l2-l3");
  // The GPU hosts two stages: its busy time per image (10 + 1 + 3 ms) is the bottleneck.
  EXPECT_NEAR(plan->bottleneck_s, 14e-3, 1e-12);
  EXPECT_NEAR(plan->energy_j, 1 + 0.02 + 0.1 + 0.3, 1e-12);
  double latency = 0;
  for (const auto& s : plan->stages) latency += s.compute_s + s.transfer_s;
  EXPECT_NEAR(latency, (10 + 1 + 2 + 1 + 1 + 3) * 1e-3, 1e-12);
}

TEST(PlanTest, HypeWorkloadStatesItsDerivedInputs) {
  const Profile p = HypeToyProfile();
  absl::StatusOr<HypeDevices> d = FindHypeDevices(p);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->gpu, 0);
  EXPECT_EQ(d->fpga, 1);
  absl::StatusOr<scheduler::partition::HypeWorkload> w = HypeWorkloadFromProfile(p, *d);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->ops.size(), 4u);
  EXPECT_THAT(w->threshold_kinds, ::testing::ElementsAre("l1"));
  EXPECT_THAT(w->ops[2].deps, ::testing::ElementsAre(1));
  EXPECT_EQ(w->ops[2].transfer_bytes, 1'000'000);
  EXPECT_NEAR(w->system.TransferS(1'000'000), 1e-3, 1e-15);
  EXPECT_FALSE(w->profiles[3].fpga.has_value());
  // l1 moves 1 MB in, 1 MB out in 10 ms on the GPU.
  EXPECT_NEAR(w->profiles[1].gpu.mem_bw_bytes_per_s, 2e6 / 10e-3, 1e-3);
  EXPECT_NEAR(w->profiles[1].gpu.avg_power_w, 100, 1e-9);
}

TEST(PlanTest, HypeOnFpgaGpuUsesOnlyTheGpuAndTheFpga) {
  const Profile p = Build("resnet50", "fpga-gpu");
  absl::StatusOr<Plan> plan = SolvePlan(p, PlanPolicy::kHype, 1.0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const auto& s : plan->stages) {
    const std::string& kind = p.devices[s.device].kind;
    EXPECT_TRUE(kind == "gpu" || kind == "fpga") << kind;
    // A layer the FPGA runs slower than the GPU is on the critical path of the chain: GPU.
    for (int l = s.first_layer; l <= s.last_layer; ++l) {
      if (p.time_s[l][s.device] > p.time_s[l][1 - s.device] && kind == "fpga") {
        ADD_FAILURE() << p.layers[l].name << " is slower on the FPGA but placed there";
      }
    }
  }
}

TEST(PlanTest, HypeWithoutAnFpgaOrAGpuIsRefusedNamingWhatIsMissing) {
  absl::StatusOr<Plan> plan = SolvePlan(Build("resnet50", "donna-hetero"), PlanPolicy::kHype, 1.0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("partition policy hype"));
  EXPECT_THAT(plan.status().message(), HasSubstr("no fpga device"));
  Profile p = HypeToyProfile();
  p.devices[0].kind = "cpu";
  plan = SolvePlan(p, PlanPolicy::kHype, 1.0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("no gpu device"));
}

TEST(PlanTest, HypeRefusesAnInputThatArrivesElsewhere) {
  Profile p = HypeToyProfile();
  p.input_device = 2;
  absl::StatusOr<Plan> plan = SolvePlan(p, PlanPolicy::kHype, 1.0);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("input arrives on cpu0"));
}

TEST(PlanTest, SharedDevicePricingIsOnlyForHype) {
  const Profile p = HypeToyProfile();
  const std::vector<scheduler::partition::Stage> stages = {{.device = 0, .last_layer = 0},
                                                           {.device = 1, .last_layer = 1},
                                                           {.device = 0, .last_layer = 3}};
  EXPECT_THAT(scheduler::partition::PricePlan(p, stages, 1.0).status().message(),
              HasSubstr("its own device"));
  EXPECT_TRUE(
      scheduler::partition::PricePlan(p, stages, 1.0, scheduler::partition::DeviceReuse::kShared)
          .ok());
}

}  // namespace
}  // namespace neupims::engine::cnn
