// The command-level controller: tile timing against the closed form, refresh safety, blocked
// vs dual row-buffer behaviour under MEM traffic, and randomized traces through the checker.
#include "hw/pim/channel_controller.h"

#include <random>

#include "gtest/gtest.h"
#include "hw/dram/timing_checker.h"
#include "hw/pim/mem_traffic.h"
#include "hw/pim/tile_cost.h"
#include "tests/hw/test_specs.h"

namespace neupims::hw {
namespace {

using testing::NeuPimsSpec;
using testing::NewtonSpec;
using testing::Spec;

GemvProgram OneBlock(int64_t tiles, int groups, int dots, int steps, bool load) {
  GemvProgram p;
  GemvBlock b;
  b.repeat = 1;
  b.load_vector = load;
  b.runs.push_back({tiles, groups, dots, steps});
  p.blocks.push_back(b);
  return p;
}

PimJobRecord RunJob(const HbmSpec& spec, const GemvProgram& p, ControllerOptions opts = {},
                    std::vector<IssuedCommand>* trace = nullptr, ControllerStats* stats = nullptr) {
  opts.record_trace = trace != nullptr;
  ChannelController c(spec, opts);
  c.SubmitPim(1, p);
  c.RunUntilPimDone();
  if (trace) *trace = c.trace();
  if (stats) *stats = c.stats();
  EXPECT_EQ(c.pim_jobs().size(), 1u);
  return c.pim_jobs().front();
}

class TileTimingTest
    : public ::testing::TestWithParam<std::tuple<RowBufferMode, PimCommandSet, TileRun, bool>> {};

TEST_P(TileTimingTest, JobOccupancyEqualsClosedFormTilePeriods) {
  auto [rb, cs, run, load] = GetParam();
  const HbmSpec spec = Spec(rb, cs);
  const GemvProgram p = OneBlock(run.count, run.groups, run.dots, run.steps_per_dot, load);
  const PimJobRecord job = RunJob(spec, p);  // starts right after a refresh: none inside
  TileCostModel model(spec);
  EXPECT_EQ(job.end - job.start, model.ProgramCycles(p));
}

INSTANTIATE_TEST_SUITE_P(
    AllShapes, TileTimingTest,
    ::testing::Combine(::testing::Values(RowBufferMode::kSingle, RowBufferMode::kDual),
                       ::testing::Values(PimCommandSet::kNewton, PimCommandSet::kNeuPims),
                       ::testing::Values(TileRun{3, 8, 4, 8}, TileRun{5, 8, 1, 32},
                                         TileRun{2, 3, 4, 8}, TileRun{4, 1, 1, 1},
                                         TileRun{6, 8, 2, 16}, TileRun{1, 5, 1, 7}),
                       ::testing::Bool()));

TEST(PimController, KeyTileOfGpt3TakesTheHandDerivedPeriod) {
  // 8 groups over 2 ranks: activations at 0,1,30,31,60,61,90,91; first PIM_GEMV at 91 + tRCD;
  // 4 heads x 8 steps: last column at 105 + 31 * tCCD_L = 167; PIM_PRE at 167 + tRTP = 172;
  // next tile at 172 + tRP = 186.
  TileCostModel m(NeuPimsSpec());
  EXPECT_EQ(m.TilePeriod({1, 8, 4, 8}, false), 186);
  // Newton: a RDRESULT after every 8 PIM_DOTPRODUCTs: 4 x 9 column commands.
  TileCostModel n(NewtonSpec());
  EXPECT_EQ(n.TilePeriod({1, 8, 4, 8}, false), 186 + 4 * 2);
}

// Small GEMVs, each one tile after its PIM_GWRITE (at 0, on the last die, so that die's first
// grouped activation waits a tFAW window): the two branches of the precharge closed form
// p = max(last + tRTP, a_{G-1} + tRAS) and a half-channel tile, derived by hand from Table 2.
TEST(PimController, SmallGemvTilesTakeTheHandDerivedCycles) {
  auto cycles = [](const HbmSpec& spec, int groups, int steps) {
    const PimJobRecord job = RunJob(spec, OneBlock(1, groups, 1, steps, true));
    return job.end - job.start;
  };
  // 16 x 512 (4 groups): activations at 1, 30, 31, 60; first column at 60 + tRCD = 74; one dot
  // of 32 steps: last at 74 + 31 x 2 = 136, PIM_PRE at 141 (tRTP), next tile 141 + tRP = 155.
  EXPECT_EQ(cycles(NeuPimsSpec(), 4, 32), 155);
  // Newton adds the PIM_RDRESULT slot: last at 138, precharge 143, 157.
  EXPECT_EQ(cycles(NewtonSpec(), 4, 32), 157);
  // 32 x 128 (8 groups): activations up to 120, first column 134, one dot of 8 steps ends at
  // 148; PIM_PRE waits for tRAS (120 + 34 = 154 > 148 + 5), so the tile is 154 + 14 = 168.
  EXPECT_EQ(cycles(NeuPimsSpec(), 8, 8), 168);
  // Newton: last column (the RDRESULT) at 150, 150 + tRTP = 155 > 154: 169.
  EXPECT_EQ(cycles(NewtonSpec(), 8, 8), 169);
}

TEST(PimController, LongGemvNeverStraddlesARefresh) {
  for (const HbmSpec& spec : {NeuPimsSpec(), NewtonSpec()}) {
    const GemvProgram p = OneBlock(200, 8, 4, 8, true);  // ~37k cycles: ~10 refreshes
    std::vector<IssuedCommand> trace;
    ControllerStats stats;
    const PimJobRecord job = RunJob(spec, p, {}, &trace, &stats);
    EXPECT_EQ(stats.max_refresh_lateness, 0);
    EXPECT_GE(stats.refreshes, 2 * ((job.end - job.start) / spec.timing.tREFI));
    for (const Violation& v : TimingChecker(spec).Check(trace)) {
      ADD_FAILURE() << v.rule << " at " << v.index << ": " << v.detail;
    }
  }
}

TEST(PimController, HeaderLetsTheControllerRefreshLater) {
  // Same tiles, with and without PIM_HEADER (NeuPIMs vs Newton command set, dual buffers):
  // without the header the controller assumes the worst-case tile and refreshes earlier.
  const GemvProgram p = OneBlock(300, 8, 4, 8, true);
  ControllerStats with_header, without;
  RunJob(Spec(RowBufferMode::kDual, PimCommandSet::kNeuPims), p, {}, nullptr, &with_header);
  RunJob(Spec(RowBufferMode::kDual, PimCommandSet::kNewton), p, {}, nullptr, &without);
  ASSERT_GT(with_header.refreshes, 0);
  ASSERT_GT(without.refreshes, 0);
  const double early_with =
      static_cast<double>(with_header.refresh_early_sum) / with_header.refreshes;
  const double early_without = static_cast<double>(without.refresh_early_sum) / without.refreshes;
  EXPECT_LT(early_with, early_without);
  EXPECT_LT(early_with, TileCostModel(NeuPimsSpec()).TilePeriod({1, 8, 4, 8}, false));
}

TEST(PimController, CommandCountsFollowTheProgram) {
  const GemvProgram p = OneBlock(10, 8, 4, 8, true);
  ControllerStats neu, newton;
  RunJob(NeuPimsSpec(), p, {}, nullptr, &neu);
  RunJob(NewtonSpec(), p, {}, nullptr, &newton);
  auto n = [](const ControllerStats& s, CommandType t) { return s.commands[static_cast<int>(t)]; };
  EXPECT_EQ(n(neu, CommandType::kPimHeader), 1);
  EXPECT_EQ(n(neu, CommandType::kPimGwrite), 1);
  EXPECT_EQ(n(neu, CommandType::kPimAct), 80);
  EXPECT_EQ(n(neu, CommandType::kPimGemv), 40);
  EXPECT_EQ(n(neu, CommandType::kPimPre), 10);
  EXPECT_EQ(n(neu, CommandType::kPimDot), 0);
  EXPECT_EQ(neu.pim_column_steps, 320);
  EXPECT_EQ(n(newton, CommandType::kPimHeader), 0);
  EXPECT_EQ(n(newton, CommandType::kPimDot), 320);
  EXPECT_EQ(n(newton, CommandType::kPimRdResult), 40);
  EXPECT_EQ(newton.pim_column_steps, 320);
}

// Runs a PIM job under streaming MEM traffic and reports (job, reads issued inside the job).
std::pair<PimJobRecord, int> RunWithTraffic(const HbmSpec& spec, double demand) {
  ControllerOptions opts;
  opts.record_trace = true;
  ChannelController c(spec, opts);
  MemTraffic traffic;
  traffic.demand = demand;
  SyntheticTraffic source(spec, traffic, 1 << 30);
  c.SetTrafficSource(&source);
  c.Run(2000);  // MEM traffic alone first
  c.SubmitPim(1, OneBlock(40, 8, 1, 32, true));
  c.RunUntilPimDone();
  const PimJobRecord job = c.pim_jobs().front();
  int reads = 0;
  for (const IssuedCommand& x : c.trace()) {
    if (x.cmd.type == CommandType::kRd && x.cycle > job.start && x.cycle < job.end) ++reads;
  }
  for (const Violation& v : TimingChecker(spec).Check(c.trace())) {
    ADD_FAILURE() << v.rule << " at " << v.index << ": " << v.detail;
  }
  return {job, reads};
}

TEST(PimController, BlockedModeHoldsMemTrafficWhilePimRuns) {
  auto [job, reads] = RunWithTraffic(NewtonSpec(), 0.5);
  EXPECT_EQ(reads, 0);
  EXPECT_GT(job.end, job.start);
}

TEST(PimController, DualRowBuffersServeMemTrafficWhilePimRuns) {
  const HbmSpec spec = NeuPimsSpec();
  auto [job, reads] = RunWithTraffic(spec, 0.5);
  const Cycles alone = RunJob(spec, OneBlock(40, 8, 1, 32, true)).end -
                       RunJob(spec, OneBlock(40, 8, 1, 32, true)).start;
  EXPECT_GT(reads, 100);
  // PIM keeps priority: its latency barely moves.
  EXPECT_LT(static_cast<double>(job.end - job.start), 1.05 * static_cast<double>(alone));
}

TEST(PimController, RandomizedWorkloadsPassTheIndependentChecker) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 24; ++trial) {
    const RowBufferMode rb = trial % 2 ? RowBufferMode::kDual : RowBufferMode::kSingle;
    const PimCommandSet cs = (trial / 2) % 2 ? PimCommandSet::kNeuPims : PimCommandSet::kNewton;
    HbmSpec spec = Spec(rb, cs);
    if (trial % 5 == 0) spec.refresh = RefreshPolicy::kRankStaggered;
    ControllerOptions opts;
    opts.record_trace = true;
    opts.row_policy = trial % 3 == 0 ? RowPolicy::kClosed : RowPolicy::kOpen;
    opts.refresh_phase_cycles = static_cast<Cycles>(rng() % spec.timing.tREFI);
    ChannelController c(spec, opts);
    MemTraffic traffic;
    traffic.demand = 0.1 + 0.8 * std::uniform_real_distribution<double>(0, 1)(rng);
    traffic.write_fraction = trial % 4 == 0 ? 0.3 : 0.0;
    traffic.pattern = trial % 3 == 1 ? MemTraffic::Pattern::kRandom : MemTraffic::Pattern::kStream;
    traffic.seed = rng();
    SyntheticTraffic source(spec, traffic, 3000);
    c.SetTrafficSource(&source);
    const int jobs = 1 + static_cast<int>(rng() % 3);
    for (int j = 0; j < jobs; ++j) {
      AttentionShape shape;
      shape.seq_len = 1 + static_cast<int64_t>(rng() % 700);
      shape.num_heads = shape.num_kv_heads = 4 << (rng() % 2);
      c.SubmitPim(j, *PlanAttention(shape, PimGeometry::FromSpec(spec)));
    }
    c.Run();
    EXPECT_TRUE(c.PimIdle());
    const ControllerStats& s = c.stats();
    EXPECT_EQ(s.mem_reads + s.mem_writes, 3000) << "every MEM request is served";
    EXPECT_EQ(static_cast<int>(c.pim_jobs().size()), jobs);
    int reported = 0;
    for (const Violation& v : TimingChecker(spec).Check(c.trace())) {
      if (++reported <= 5) {
        ADD_FAILURE() << "trial " << trial << ": " << v.rule << " at " << v.index << " ("
                      << c.trace()[v.index].cmd.ToString() << " @" << c.trace()[v.index].cycle
                      << " vs " << c.trace()[v.earlier].cmd.ToString() << " @"
                      << c.trace()[v.earlier].cycle << "): need " << v.required << " got "
                      << v.actual << " " << v.detail;
      }
    }
  }
}

// FNV-1a over every field of every issued command, cycle included.
uint64_t TraceFingerprint(const std::vector<IssuedCommand>& trace) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const IssuedCommand& x : trace) {
    mix(x.cycle);
    mix(static_cast<int>(x.cmd.type));
    mix(x.cmd.rank);
    mix(x.cmd.bank_group);
    mix(x.cmd.bank);
    mix(x.cmd.row);
    mix(x.cmd.col);
    mix(x.cmd.steps);
  }
  return h;
}

// The controller's whole command stream, cycle for cycle, is pinned: these fingerprints were
// recorded from the straightforward controller (every MEM decision rescanning the queue and
// recomputing every bank's rule bound), so a faster path that changed a single command or cycle
// fails here. Each case: row-buffer mode, command set, row policy, refresh, traffic, PIM jobs.
TEST(PimController, CommandTracesMatchTheRecordedReference) {
  struct Case {
    RowBufferMode rb;
    PimCommandSet cs;
    RowPolicy policy;
    RefreshPolicy refresh;
    double demand, writes;
    MemTraffic::Pattern pattern;
    int jobs;
    size_t commands;
    uint64_t fingerprint;
  };
  using P = MemTraffic::Pattern;
  const Case cases[] = {
      {RowBufferMode::kDual, PimCommandSet::kNeuPims, RowPolicy::kOpen, RefreshPolicy::kAllRanks,
       0.7, 0.0, P::kStream, 2, 6242, 16933894039024960550ull},
      {RowBufferMode::kDual, PimCommandSet::kNeuPims, RowPolicy::kClosed,
       RefreshPolicy::kRankStaggered, 0.9, 0.3, P::kRandom, 3, 15920, 8706501663638814775ull},
      {RowBufferMode::kDual, PimCommandSet::kNewton, RowPolicy::kOpen, RefreshPolicy::kAllRanks,
       1.0, 0.5, P::kRandom, 1, 13460, 1367491519012752836ull},
      {RowBufferMode::kSingle, PimCommandSet::kNewton, RowPolicy::kOpen, RefreshPolicy::kAllRanks,
       0.5, 0.0, P::kStream, 2, 9759, 13434637110708699073ull},
      {RowBufferMode::kSingle, PimCommandSet::kNeuPims, RowPolicy::kClosed,
       RefreshPolicy::kRankStaggered, 0.8, 0.2, P::kRandom, 2, 13902, 15520103094528721944ull},
      {RowBufferMode::kDual, PimCommandSet::kNeuPims, RowPolicy::kOpen,
       RefreshPolicy::kRankStaggered, 0.3, 0.1, P::kStream, 0, 4501, 12967995957847768810ull},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    const Case& k = cases[i];
    HbmSpec spec = Spec(k.rb, k.cs);
    spec.refresh = k.refresh;
    ControllerOptions opts;
    opts.record_trace = true;
    opts.row_policy = k.policy;
    opts.refresh_phase_cycles = static_cast<Cycles>(i * 1237);
    ChannelController c(spec, opts);
    MemTraffic traffic;
    traffic.demand = k.demand;
    traffic.write_fraction = k.writes;
    traffic.pattern = k.pattern;
    traffic.seed = 7 + i;
    SyntheticTraffic source(spec, traffic, 4000);
    c.SetTrafficSource(&source);
    c.Run(1500);  // MEM traffic alone first, then the jobs arrive together
    for (int j = 0; j < k.jobs; ++j) {
      AttentionShape shape;
      shape.seq_len = 200 + 450 * j;
      shape.num_heads = shape.num_kv_heads = 8;
      c.SubmitPim(j, *PlanAttention(shape, PimGeometry::FromSpec(spec)));
    }
    c.Run();
    EXPECT_EQ(c.trace().size(), k.commands) << "case " << i;
    EXPECT_EQ(TraceFingerprint(c.trace()), k.fingerprint) << "case " << i;
  }
}

}  // namespace
}  // namespace neupims::hw
