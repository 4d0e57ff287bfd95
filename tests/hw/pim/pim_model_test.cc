// The two PIM model implementations behind one interface, checked against each other.
#include "hw/pim/pim_model.h"

#include <cmath>
#include <utility>
#include <vector>

#include "common/parallel.h"
#include "gtest/gtest.h"
#include "hw/dram/timing_checker.h"
#include "hw/pim/tile_cost.h"
#include "tests/hw/test_specs.h"

namespace neupims::hw {
namespace {

using testing::NeuPimsSpec;
using testing::NewtonSpec;
using testing::Spec;

struct SweepCase {
  RowBufferMode rb;
  double demand;
};

class AnalyticVsCommandLevel : public ::testing::TestWithParam<SweepCase> {};

// The analytic model must stay within 5% of the command-level one over sequence lengths 1 to
// 8192, 1 to 64 heads, head sizes 64 / 128 / 256 and GQA, both row-buffer modes, with and without
// MEM traffic. The analytic model returns the expectation over the refresh phase an op starts
// in; the command-level model is averaged over evenly spaced phases. That average is a sample:
// an op of a few hundred cycles meets a refresh (~300 cycles of stall) at one phase in five, so
// 4 phases can miss the expectation by 7% (`hw attention --heads 1 --head-dim 64 --seq-len 1`:
// 412 analytic vs 384 command cycles at 4 phases, 404 at 64). Shorter ops get more phases
// (they are cheap to simulate).
// The shapes are independent, so they are simulated in parallel (each with its own models: they
// are not thread-safe) and checked in order.
TEST_P(AnalyticVsCommandLevel, WithinFivePercent) {
  const SweepCase c = GetParam();
  const HbmSpec spec = c.rb == RowBufferMode::kDual ? NeuPimsSpec() : NewtonSpec();
  MemTraffic traffic;
  traffic.demand = c.demand;
  // (heads, kv heads): one head, a few, GPT3-7B/TP4, GPT3-175B/TP8, 64 heads, and GQA as in
  // LLaMA-2-70B/TP8 and at 32 and 64 query heads.
  const std::vector<std::pair<int, int>> heads = {{1, 1},   {3, 3}, {8, 8},  {12, 12},
                                                  {64, 64}, {8, 1}, {32, 8}, {64, 8}};
  std::vector<AttentionShape> shapes;
  for (auto [h, kv] : heads) {
    for (int head_dim : {64, 128, 256}) {
      if (head_dim != 128 && h != kv) continue;  // GQA at the common head size only
      for (int64_t seq : {1, 17, 100, 511, 1024, 2500, 8192}) {
        // Keep the runs short: MEM traffic makes the command level ~30x slower.
        if (c.demand > 0 && (seq > 1024 || h > 12 || head_dim > 128)) continue;
        if (int64_t{h} * head_dim * seq > int64_t{64} * 128 * 2500) continue;
        shapes.push_back({seq, h, kv, head_dim});
      }
    }
  }
  using Results = std::pair<absl::StatusOr<PimOpResult>, absl::StatusOr<PimOpResult>>;
  std::vector<Results> results(shapes.size());
  ParallelFor(static_cast<int>(shapes.size()), DefaultJobs(), [&](int i) {
    PimModelOptions opts;
    const int64_t size = shapes[i].seq_len * shapes[i].num_heads;
    opts.phases = size <= 256 ? 64 : size <= 8 * 1024 ? 16 : 4;
    results[i] = {CreateAnalyticPimModel(spec, opts)->Attention(shapes[i], traffic),
                  CreateCommandLevelPimModel(spec, opts)->Attention(shapes[i], traffic)};
  });
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int64_t seq = shapes[i].seq_len;
    const int h = shapes[i].num_heads, kv = shapes[i].num_kv_heads, d = shapes[i].head_dim;
    const auto& [a, m] = results[i];
    ASSERT_TRUE(a.ok() && m.ok());
    const double err = static_cast<double>(a->cycles) / static_cast<double>(m->cycles) - 1;
    EXPECT_LT(std::fabs(err), 0.05) << "seq " << seq << " heads " << h << "/" << kv << " x " << d
                                    << ": analytic " << a->cycles << " vs command " << m->cycles;
    // Both count the same PIM commands.
    for (CommandType t : {CommandType::kPimAct, CommandType::kPimGwrite, CommandType::kPimGemv,
                          CommandType::kPimDot, CommandType::kPimRdResult, CommandType::kPimPre}) {
      EXPECT_EQ(a->commands[static_cast<int>(t)], m->commands[static_cast<int>(t)])
          << CommandName(t) << " seq " << seq;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, AnalyticVsCommandLevel,
                         ::testing::Values(SweepCase{RowBufferMode::kSingle, 0.0},
                                           SweepCase{RowBufferMode::kDual, 0.0},
                                           SweepCase{RowBufferMode::kSingle, 0.6},
                                           SweepCase{RowBufferMode::kDual, 0.6}));

TEST(AnalyticPim, AttentionCyclesEqualsTheFullResult) {
  auto m = CreateAnalyticPimModel(NeuPimsSpec(), {});
  for (int64_t seq : {1, 300, 3000}) {
    AttentionShape s{seq, 8, 8, 128};
    EXPECT_EQ(*m->AttentionCycles(s), m->Attention(s)->cycles);
  }
}

TEST(AnalyticPim, WithoutRefreshTheLatencyIsTheSumOfClosedFormTilePeriods) {
  const HbmSpec spec = NeuPimsSpec();
  auto program = PlanAttention({200, 8, 8, 128}, PimGeometry::FromSpec(spec));
  ASSERT_TRUE(program.ok());
  TileCostModel tiles(spec);
  const Cycles busy = tiles.ProgramCycles(*program);
  const double refresh = tiles.ExpectedRefreshCycles(
      static_cast<double>(busy), static_cast<double>(busy) / static_cast<double>(program->tiles()));
  auto r = CreateAnalyticPimModel(spec, {})->Run(*program);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cycles, busy + std::llround(refresh));
  // Refresh costs about tRFC per tREFI of PIM work.
  EXPECT_NEAR(refresh / static_cast<double>(busy), 260.0 / (3900 - 260), 0.01);
}

TEST(CommandLevelPim, TraceOfAnAttentionPassesTheChecker) {
  PimModelOptions opts;
  opts.record_trace = true;
  opts.refresh_phase_cycles = 3000;  // a refresh falls inside the op
  for (const HbmSpec& spec : {NeuPimsSpec(), NewtonSpec()}) {
    auto r = CreateCommandLevelPimModel(spec, opts)->Attention({1500, 8, 8, 128});
    ASSERT_TRUE(r.ok());
    EXPECT_GT(r->trace.size(), 1000u);
    EXPECT_GE(r->refreshes, 1);
    EXPECT_TRUE(TimingChecker(spec).Check(r->trace).empty());
  }
}

// docs/hw.md's worked example ("What the models show"): GPT3-7B/TP4 heads (8 x 128) at 1024
// tokens on one channel, from refresh phase 0. Logit: 2 blocks of 32 key tiles; attend: 16
// blocks of 4 value tiles; 18 block-start tiles of 215 cycles and 110 tiles of 186 = 24,330.
// Six refresh events (both dies, their REFs a row-bus slot apart) cost tRFC each, and one cycle
// more when the block after one starts with a GWRITE on the die refreshed second (2 of the 6):
// 24,330 + 6 x 260 + 2 = 25,892.
TEST(CommandLevelPim, Gpt3HeadsAt1024TokensTakeTheirTilesPlusTheRefreshes) {
  auto r = CreateCommandLevelPimModel(NeuPimsSpec(), {})->Attention({1024, 8, 8, 128});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tiles, 128);
  EXPECT_EQ(r->refreshes, 12);
  EXPECT_EQ(r->cycles, 18 * 215 + 110 * 186 + 6 * 260 + 2);
}

TEST(CommandLevelPim, NoRefreshIsLateAtAnyPhase) {
  for (const HbmSpec& spec : {NeuPimsSpec(), NewtonSpec()}) {
    for (int phase = 0; phase < 3900; phase += 3900 / 13) {
      PimModelOptions opts;
      opts.record_trace = true;
      opts.refresh_phase_cycles = phase;
      for (int64_t seq : {40, 1024}) {
        auto r = CreateCommandLevelPimModel(spec, opts)->Attention({seq, 8, 8, 128});
        ASSERT_TRUE(r.ok());
        for (const Violation& v : TimingChecker(spec).Check(r->trace)) {
          ADD_FAILURE() << "phase " << phase << " seq " << seq << ": " << v.rule << " " << v.detail;
        }
      }
    }
  }
}

TEST(PimModels, DualRowBuffersLetTheNpuStreamDuringPim) {
  MemTraffic traffic;
  traffic.demand = 0.8;
  AttentionShape s{800, 8, 8, 128};
  auto single = CreateCommandLevelPimModel(NewtonSpec(), {})->Attention(s, traffic);
  auto dual = CreateCommandLevelPimModel(NeuPimsSpec(), {})->Attention(s, traffic);
  ASSERT_TRUE(single.ok() && dual.ok());
  EXPECT_EQ(single->mem_bytes_per_cycle, 0);  // blocked: the NPU waits for the PIM
  EXPECT_GT(dual->mem_bytes_per_cycle, 5);    // bytes per HBM cycle served meanwhile
  auto analytic = CreateAnalyticPimModel(NeuPimsSpec(), {})->Attention(s, traffic);
  EXPECT_NEAR(analytic->mem_bytes_per_cycle, dual->mem_bytes_per_cycle,
              0.15 * dual->mem_bytes_per_cycle);
}

TEST(PimModels, NeuPimsCommandSetIssuesFewerCommandsThanNewton) {
  AttentionShape s{1000, 8, 8, 128};
  auto newton =
      CreateAnalyticPimModel(Spec(RowBufferMode::kDual, PimCommandSet::kNewton), {})->Attention(s);
  auto neupims = CreateAnalyticPimModel(NeuPimsSpec(), {})->Attention(s);
  int64_t n_newton = 0, n_neupims = 0;
  for (int t = 0; t < kNumCommandTypes; ++t) {
    n_newton += newton->commands[t];
    n_neupims += neupims->commands[t];
  }
  EXPECT_LT(n_neupims * 3, n_newton);  // C/A traffic of Figure 9
  EXPECT_LT(neupims->cycles, newton->cycles);
}

TEST(PimModels, EnergyCountsPimCommandsAsMultiplesOfARead) {
  const HbmSpec spec = NeuPimsSpec();
  const DramEventEnergy e = ComputeEventEnergy(spec);
  // Micron model with the DRAMsim3 HBM2 currents: ACT = 1.2 V x (65x48 - 55x34 - 40x14) mA ns.
  EXPECT_NEAR(e.act_pj, 1.2 * (65 * 48 - 55 * 34 - 40 * 14), 1e-6);
  EXPECT_NEAR(e.rd_pj, 1.2 * (390 - 55) * 2, 1e-6);
  EXPECT_NEAR(e.pim_step_pj, 4 * e.rd_pj, 1e-6);
  EXPECT_NEAR(e.pim_act_pj, 4 * e.act_pj, 1e-6);
  auto r = CreateAnalyticPimModel(spec, {})->Attention({512, 8, 8, 128});
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->energy.pim_j,
              (r->commands[static_cast<int>(CommandType::kPimAct)] * e.pim_act_pj +
               r->commands[static_cast<int>(CommandType::kPimGwrite)] * e.gwrite_pj +
               r->column_steps * e.pim_step_pj + r->results * e.pim_result_pj) *
                  1e-12,
              1e-12);
  EXPECT_GT(r->energy.background_j, 0);
}

TEST(PimModels, RejectBadTrafficAndPimlessDevices) {
  MemTraffic bad;
  bad.demand = 1.5;
  auto m = CreateAnalyticPimModel(NeuPimsSpec(), {});
  EXPECT_EQ(m->Attention({10, 8, 8, 128}, bad).status().code(), absl::StatusCode::kInvalidArgument);
  HbmSpec no_pim = NeuPimsSpec();
  no_pim.pim.enabled = false;
  EXPECT_EQ(CreateAnalyticPimModel(no_pim, {})->Attention({10, 8, 8, 128}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace neupims::hw
