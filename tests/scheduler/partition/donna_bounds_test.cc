#include "scheduler/partition/donna_bounds.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/partition/donna.h"
#include "tests/scheduler/partition/random_profile.h"

namespace neupims::scheduler::partition {
namespace {

// Used-states as bitmasks of used devices (every device its own class): state s leaves free
// the devices not in s.
std::vector<std::vector<int>> FreeColumnsByMask(int devices) {
  std::vector<std::vector<int>> columns(1 << devices);
  for (int s = 0; s < (1 << devices); ++s) {
    for (int d = 0; d < devices; ++d) {
      if (!(s >> d & 1)) columns[s].push_back(d);
    }
  }
  return columns;
}

// A random problem at a random alpha, with its weights and bounds.
struct Problem {
  Profile p;
  double alpha = 0;
  double w_t = 0, w_e = 0;
  std::unique_ptr<RestBounds> bounds;
  double C(const Plan& plan) const { return w_t * plan.bottleneck_s + w_e * plan.energy_j; }
};
Problem RandomProblem(std::mt19937_64& rng, int trial) {
  const int devices = 1 + trial % 4;
  Problem pr;
  pr.p = RandomProfile(rng, 1 + trial % 7, devices);
  // Alpha 0 and 1 (one of the two weights is 0) in one trial of five each.
  const double drawn = std::uniform_real_distribution<double>(0, 1)(rng);
  pr.alpha = trial % 5 == 0 ? 0.0 : trial % 5 == 1 ? 1.0 : drawn;
  const Normalisation n = NormalisationOf(pr.p);
  pr.w_t = pr.alpha / n.time_s;
  pr.w_e = (1 - pr.alpha) / n.energy_j;
  pr.bounds = std::make_unique<RestBounds>(pr.p, pr.w_t, pr.w_e, FreeColumnsByMask(devices));
  return pr;
}

// The property the searches' exactness rests on: at every point of every complete plan (after
// its first k stages and the cut to stage k+1, with those k devices used), the floor of what
// the rest costs is no more than the plan's C.
TEST(RestBoundsTest, TheFloorOfEveryPartialPlanIsAtMostItsCompletionsCost) {
  std::mt19937_64 rng(11);
  int checked = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const Problem pr = RandomProblem(rng, trial);
    const RestBounds& bounds = *pr.bounds;
    ForEachPlan(pr.p, pr.alpha, [&](const Plan& plan) {
      const double c = pr.C(plan);
      EXPECT_LE(bounds.Of(0).Floor(0, 0, 0), c * (1 + 1e-12)) << "trial " << trial;
      double t = 0, e = 0;
      int used = 0;
      for (size_t k = 0; k + 1 < plan.stages.size(); ++k) {
        const Stage& s = plan.stages[k];
        t = std::max(t, s.time_s());
        e += s.compute_energy_j + s.transfer_energy_j;
        used |= 1 << s.device;
        EXPECT_LE(bounds.Of(used).Floor(t, e, s.last_layer + 1), c * (1 + 1e-12))
            << "trial " << trial << " after stage " << k;
        EXPECT_FALSE(bounds.Of(used).Reaches(t, e, s.last_layer + 1, c * (1 + 1e-9)));
        ++checked;
      }
    });
  }
  EXPECT_GT(checked, 1000);
}

// The floors also hold stage by stage (the searches stop growing a stage once they reach the
// best plan): for a stage [i, j) on a free device, C >= w_e (e + stage_e) + w_t stage / free +
// JointAfter(j) and C >= w_t max(t, stage) + w_e (e + stage_e + EnergyAfter(j)).
TEST(RestBoundsTest, TheStageFloorsAreAtMostTheCostOfEveryPlanThroughTheStage) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 120; ++trial) {
    const Problem pr = RandomProblem(rng, trial);
    const RestBounds& bounds = *pr.bounds;
    ForEachPlan(pr.p, pr.alpha, [&](const Plan& plan) {
      const double c = pr.C(plan);
      double t = 0, e = 0;
      int used = 0;
      for (const Stage& s : plan.stages) {
        const RestBounds::State floors = bounds.Of(used);
        const int j = s.last_layer + 1;
        const double stage_t = std::max(t, s.compute_s);
        const double stage_e = e + s.compute_energy_j;
        EXPECT_LE(pr.w_t * stage_t + pr.w_e * (stage_e + floors.EnergyAfter(j)), c * (1 + 1e-12));
        EXPECT_LE(pr.w_e * stage_e + pr.w_t * s.compute_s / floors.free() + floors.JointAfter(j),
                  c * (1 + 1e-12))
            << "trial " << trial;
        t = std::max(t, s.time_s());
        e += s.compute_energy_j + s.transfer_energy_j;
        used |= 1 << s.device;
      }
    });
  }
}

// What makes DonnaPublished's pruning between alpha 0 and 1 leave the plain sweep's plan alone
// (donna.cc, OverLimit): the key C + w_e EnergyAfter never decreases along a plan, neither as a
// stage grows layer by layer (with the floors of the devices free before it, as StageEnds uses
// them) nor across the cut to the next stage (with the floors after it, as the offers use them),
// and it ends at the plan's C.
TEST(RestBoundsTest, TheOwnCostKeyNeverDecreasesAlongAPlan) {
  std::mt19937_64 rng(19);
  int steps = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const Problem pr = RandomProblem(rng, trial);
    const RestBounds& bounds = *pr.bounds;
    const int layers = static_cast<int>(pr.p.layers.size());
    ForEachPlan(pr.p, pr.alpha, [&](const Plan& plan) {
      double t = 0, e = 0, key = 0;
      int used = 0;
      auto step = [&](double next) {
        EXPECT_GE(next, key * (1 - 1e-12)) << "trial " << trial;
        key = next;
        ++steps;
      };
      for (const Stage& s : plan.stages) {
        const RestBounds::State before = bounds.Of(used);
        double stage_t = 0, stage_e = 0;
        for (int l = s.first_layer; l <= s.last_layer; ++l) {
          stage_t += pr.p.time_s[l][s.device];
          stage_e += pr.p.energy_j[l][s.device];
          step(pr.w_t * std::max(t, stage_t) + pr.w_e * (e + stage_e + before.EnergyAfter(l + 1)));
        }
        t = std::max(t, s.time_s());
        e += s.compute_energy_j + s.transfer_energy_j;
        used |= 1 << s.device;
        if (s.last_layer + 1 < layers) {
          step(pr.w_t * t + pr.w_e * (e + bounds.Of(used).EnergyAfter(s.last_layer + 1)));
        }
      }
      EXPECT_NEAR(key, pr.C(plan), 1e-12 * pr.C(plan) + 1e-300) << "trial " << trial;
    });
  }
  EXPECT_GT(steps, 10000);
}

TEST(RestBoundsTest, ALayerNoFreeDeviceRunsMakesTheFloorInfinite) {
  std::mt19937_64 rng(17);
  Profile p = RandomProfile(rng, 4, 2);
  for (int l = 0; l < 4; ++l) {
    for (int d = 0; d < 2; ++d) p.time_s[l][d] = p.energy_j[l][d] = 1e-3;
  }
  p.time_s[2][1] = p.energy_j[2][1] = kCannotRun;  // layer 2 runs on device 0 only
  const RestBounds bounds(p, 0.5, 0.5, FreeColumnsByMask(2));
  EXPECT_TRUE(std::isinf(bounds.Of(0b01).Floor(0, 0, 1)));  // device 0 used: layer 2 stranded
  EXPECT_TRUE(bounds.Of(0b01).Reaches(0, 0, 1, 1e300));
  EXPECT_FALSE(std::isinf(bounds.Of(0b10).Floor(0, 0, 1)));
  EXPECT_TRUE(std::isfinite(bounds.Of(0b01).Floor(0, 0, 3)));  // past layer 2: device 1 runs it
}

}  // namespace
}  // namespace neupims::scheduler::partition
