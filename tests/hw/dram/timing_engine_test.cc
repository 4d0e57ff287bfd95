// Closed-form checks of the timing table applied by TimingEngine, and its agreement with the
// independent TimingChecker on every pair of commands.
#include "hw/dram/timing_engine.h"

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hw/dram/timing_checker.h"
#include "hw/dram/timing_table.h"
#include "tests/hw/test_specs.h"

namespace neupims::hw {
namespace {

using testing::NeuPimsSpec;
using testing::NewtonSpec;

Command Cmd(CommandType type, int rank = 0, int bg = 0, int bank = 0, int row = 7, int col = 0) {
  Command c;
  c.type = type;
  c.rank = static_cast<int8_t>(rank);
  c.bank_group = static_cast<int8_t>(bg);
  c.bank = static_cast<int8_t>(bank);
  c.row = row;
  c.col = static_cast<int16_t>(col);
  if (type == CommandType::kPimGemv) c.steps = 8;
  return c;
}

struct EngineFixture {
  explicit EngineFixture(const HbmSpec& s)
      : spec(s), table(BuildTimingTable(spec)), e(spec, table) {}
  // Earliest issue of `b` after `a` was issued at cycle 100.
  Cycles GapAfter(const Command& a, const Command& b) {
    e.Issue(a, 100);
    return e.Earliest(b, 100) - 100;
  }
  HbmSpec spec;
  TimingTable table;
  TimingEngine e;
};

TEST(Hbm2Timing, ActToReadSameBankWaitsTrcd) {
  EngineFixture f(NeuPimsSpec());
  EXPECT_EQ(f.GapAfter(Cmd(CommandType::kAct), Cmd(CommandType::kRd)), 14);
}

TEST(Hbm2Timing, ActToPrechargeWaitsTras) {
  EngineFixture f(NeuPimsSpec());
  EXPECT_EQ(f.GapAfter(Cmd(CommandType::kAct), Cmd(CommandType::kPre)), 34);
}

TEST(Hbm2Timing, PrechargeToActWaitsTrp) {
  EngineFixture f(NeuPimsSpec());
  EXPECT_EQ(f.GapAfter(Cmd(CommandType::kPre), Cmd(CommandType::kAct)), 14);
}

TEST(Hbm2Timing, ActToActSameBankGroupWaitsTrrdL) {
  EngineFixture f(NeuPimsSpec());
  EXPECT_EQ(f.GapAfter(Cmd(CommandType::kAct, 0, 1, 0), Cmd(CommandType::kAct, 0, 1, 2)), 6);
}

TEST(Hbm2Timing, ActToActOtherBankGroupWaitsTrrdS) {
  EngineFixture f(NeuPimsSpec());
  EXPECT_EQ(f.GapAfter(Cmd(CommandType::kAct, 0, 1, 0), Cmd(CommandType::kAct, 0, 2, 0)), 4);
}

TEST(Hbm2Timing, ActToActOtherRankOnlyWaitsForTheRowBus) {
  EngineFixture f(NeuPimsSpec());
  EXPECT_EQ(f.GapAfter(Cmd(CommandType::kAct, 0), Cmd(CommandType::kAct, 1)), 1);
}

TEST(Hbm2Timing, ReadToReadSameBankGroupWaitsTccdL) {
  EngineFixture f(NeuPimsSpec());
  f.e.Issue(Cmd(CommandType::kAct, 0, 0, 0), 0);
  f.e.Issue(Cmd(CommandType::kAct, 0, 0, 1), 6);
  f.e.Issue(Cmd(CommandType::kRd, 0, 0, 0), 50);
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kRd, 0, 0, 1), 50), 52);  // max(tCCD_L, tBL)
}

TEST(Hbm2Timing, ReadToReadOtherBankGroupIsLimitedByTheDataBurst) {
  EngineFixture f(NeuPimsSpec());
  f.e.Issue(Cmd(CommandType::kAct, 0, 0, 0), 0);
  f.e.Issue(Cmd(CommandType::kAct, 0, 1, 0), 4);
  f.e.Issue(Cmd(CommandType::kRd, 0, 0, 0), 50);
  // tCCD_S = 1 but a burst holds the data bus for tBL = 2 cycles.
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kRd, 0, 1, 0), 50), 52);
}

TEST(Hbm2Timing, FifthActivationInARankWaitsTfaw) {
  EngineFixture f(NeuPimsSpec());
  // Four ACTs to different bank groups tRRD_S apart, then a fifth.
  Cycles t = 0;
  for (int i = 0; i < 4; ++i) {
    const Command c = Cmd(CommandType::kAct, 0, i, 0);
    t = f.e.Earliest(c, t);
    f.e.Issue(c, t);
  }
  EXPECT_EQ(t, 12);
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kAct, 0, 0, 1), t), 30);  // first ACT + tFAW
}

TEST(Hbm2Timing, GroupedActivationFillsTheTfawWindow) {
  EngineFixture f(NeuPimsSpec());
  f.e.Issue(Cmd(CommandType::kPimAct, 0, 0), 100);
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kPimAct, 0, 1), 100), 130);
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kAct, 0, 2, 0), 100), 130);
  // The other die has its own window.
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kPimAct, 1, 0), 100), 101);
}

TEST(Hbm2Timing, RefreshBlocksActivationForTrfc) {
  EngineFixture f(NeuPimsSpec());
  EXPECT_EQ(f.GapAfter(Cmd(CommandType::kRef, 0), Cmd(CommandType::kAct, 0, 3, 3)), 260);
}

TEST(Hbm2Timing, DualRowBufferLetsMemActivateWhilePimRowIsOpen) {
  EngineFixture dual(NeuPimsSpec());
  EngineFixture single(NewtonSpec());
  // A MEM ACT right after a grouped PIM activation of the same banks: with a second row buffer
  // only the activation-power rules apply (tFAW), with one row buffer tRC applies as well.
  const Command pim_act = Cmd(CommandType::kPimAct, 0, 0);
  const Command mem_act = Cmd(CommandType::kAct, 0, 0, 1);
  EXPECT_EQ(dual.GapAfter(pim_act, mem_act), 30);
  EXPECT_EQ(single.GapAfter(pim_act, mem_act), 48);
}

TEST(Hbm2Timing, PimGemvWaitsTrcdAfterTheLastGroupedActivation) {
  EngineFixture f(NeuPimsSpec());
  f.e.Issue(Cmd(CommandType::kPimAct, 0, 0), 0);
  f.e.Issue(Cmd(CommandType::kPimAct, 1, 0), 1);
  f.e.Issue(Cmd(CommandType::kPimAct, 0, 1), 30);
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kPimGemv), 30), 44);
}

TEST(Hbm2Timing, GemvToPimPrechargeCountsFromTheLastColumnStep) {
  EngineFixture f(NeuPimsSpec());
  f.e.Issue(Cmd(CommandType::kPimAct, 0, 0), 0);
  Command g = Cmd(CommandType::kPimGemv);
  g.steps = 8;
  f.e.Issue(g, 100);
  // Last column at 100 + 7 * tCCD_L = 114, then tRTP.
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kPimPre), 100), 119);
  EXPECT_EQ(f.e.Earliest(g, 100), 116);  // next GEMV after the last column + tCCD_L
}

TEST(Hbm2Timing, GemvResultReservesOneDataBusSlotOnly) {
  EngineFixture f(NeuPimsSpec());
  f.e.Issue(Cmd(CommandType::kAct, 0, 2, 0), 0);
  f.e.Issue(Cmd(CommandType::kPimAct, 0, 0), 1);
  Command g = Cmd(CommandType::kPimGemv);
  g.steps = 8;
  f.e.Issue(g, 100);  // result burst on the bus at 100 + 14 + 14 = 128..130
  // A read issued now has its data at 101 + 14: no conflict.
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kRd, 0, 2, 0), 101), 101);
  // A read whose data would overlap the result slot moves past it.
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kRd, 0, 2, 0), 113), 116);
}

TEST(Hbm2Timing, GwriteLoadsTheGlobalBufferBeforeColumnOps) {
  EngineFixture f(NeuPimsSpec());
  f.e.Issue(Cmd(CommandType::kPimGwrite, 1, 3, 0, 100), 0);
  // tRCD + 16 bursts x tCCD_L.
  EXPECT_EQ(f.e.Earliest(Cmd(CommandType::kPimGemv), 0), 46);
  EXPECT_EQ(GwriteBankBusyCycles(f.spec), 63);
}

// For every ordered pair of command types and several target relations, the minimum gap the
// engine enforces must be exactly the smallest gap the independent checker accepts.
TEST(Hbm2Timing, EngineAndCheckerAgreeOnEveryPairGap) {
  for (const HbmSpec& spec : {NeuPimsSpec(), NewtonSpec()}) {
    TimingChecker checker(spec);
    const std::vector<std::array<int, 3>> places = {
        {0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {1, 0, 0}, {1, 3, 3}};
    for (int ta = 0; ta < kNumCommandTypes; ++ta) {
      for (int tb = 0; tb < kNumCommandTypes; ++tb) {
        for (const auto& pa : places) {
          for (const auto& pb : places) {
            Command a = Cmd(static_cast<CommandType>(ta), pa[0], pa[1], pa[2], 5);
            Command b = Cmd(static_cast<CommandType>(tb), pb[0], pb[1], pb[2], 9);
            const TimingTable table = BuildTimingTable(spec);
            TimingEngine e(spec, table);
            e.Issue(a, 1000);
            const Cycles gap = e.Earliest(b, 1000) - 1000;
            auto timing_violations = [&](Cycles g) {
              std::vector<IssuedCommand> trace = {{1000, a}, {1000 + g, b}};
              int n = 0;
              for (const Violation& v : checker.Check(trace)) n += v.rule != "state" ? 1 : 0;
              return n;
            };
            SCOPED_TRACE(a.ToString() + " -> " + b.ToString() + " (" +
                         (spec.pim.row_buffers == RowBufferMode::kDual ? "dual" : "single") + ")");
            EXPECT_EQ(timing_violations(gap), 0) << "engine gap " << gap;
            if (gap > 0) {
              EXPECT_GT(timing_violations(gap - 1), 0) << "engine gap " << gap;
            }
          }
        }
      }
    }
  }
}

// Random legal traces: every issue at Earliest of a random cycle. Then, for every command type
// at several places and cycles, Earliest is checked against the independent TimingChecker (a
// cycle is legal when the trace plus the command there breaks no timing rule of the command's):
// Earliest(cmd, t) is legal and no cycle in [t, Earliest) is. EarliestIfIssued must equal
// EarliestIfIssuedFrom(Earliest(...)) and Earliest in a copy of the engine where `first` was
// issued.
TEST(Hbm2Timing, EarliestIsTheFirstCycleTheCheckerAcceptsAfterRandomTraces) {
  int queries = 0;
  for (const HbmSpec& spec : {NeuPimsSpec(), NewtonSpec()}) {
    const TimingTable table = BuildTimingTable(spec);
    TimingChecker checker(spec);
    std::mt19937_64 rng(spec.pim.row_buffers == RowBufferMode::kDual ? 11 : 12);
    auto uniform = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    auto random_cmd = [&](int type) {
      return Cmd(static_cast<CommandType>(type), static_cast<int>(uniform(0, 1)),
                 static_cast<int>(uniform(0, 3)), static_cast<int>(uniform(0, 3)),
                 static_cast<int>(uniform(0, 9)));
    };
    for (int trial = 0; trial < 12; ++trial) {
      TimingEngine e(spec, table);
      std::vector<IssuedCommand> trace;
      Cycles now = 0;
      const int issues = static_cast<int>(uniform(1, 10));
      for (int i = 0; i < issues; ++i) {
        const Command c = random_cmd(static_cast<int>(uniform(0, kNumCommandTypes - 1)));
        now = e.Earliest(c, now + uniform(0, 40));
        e.Issue(c, now);
        trace.push_back({now, c});
      }
      // The checker's verdict on `cmd` at `cycle` after the trace (state rules aside: which row
      // is open belongs to the controller, not to the engine).
      auto legal = [&](const Command& cmd, Cycles cycle) {
        std::vector<IssuedCommand> t = trace;
        t.push_back({cycle, cmd});
        for (const Violation& v : checker.Check(t)) {
          if (v.index == trace.size() && v.rule != "state") return false;
        }
        return true;
      };
      for (int type = 0; type < kNumCommandTypes; ++type) {
        for (int place = 0; place < 3; ++place) {
          const Command cmd = random_cmd(type);
          for (Cycles t : {now, now + uniform(1, 30), now + uniform(31, 400)}) {
            SCOPED_TRACE(cmd.ToString() + " not before " + std::to_string(t));
            const Cycles earliest = e.Earliest(cmd, t);
            ++queries;
            ASSERT_GE(earliest, t);
            EXPECT_TRUE(legal(cmd, earliest)) << earliest;
            for (Cycles c = t; c < earliest; ++c) {
              ASSERT_FALSE(legal(cmd, c)) << "legal at " << c << ", Earliest " << earliest;
            }
            const Command first = random_cmd(static_cast<int>(uniform(0, kNumCommandTypes - 1)));
            const Cycles first_cycle = e.Earliest(first, now + uniform(0, 20));
            const Cycles not_before = std::max(t, first_cycle);
            const Cycles if_issued = e.EarliestIfIssued(cmd, not_before, first, first_cycle);
            EXPECT_EQ(if_issued,
                      e.EarliestIfIssuedFrom(e.Earliest(cmd, not_before), cmd, first, first_cycle));
            TimingEngine after = e;
            after.Issue(first, first_cycle);
            EXPECT_EQ(if_issued, after.Earliest(cmd, not_before)) << first.ToString();
          }
        }
      }
    }
  }
  EXPECT_EQ(queries, 2 * 12 * kNumCommandTypes * 3 * 3);
}

// Each rule of the table, deliberately broken by one cycle, is reported under its own name.
TEST(Hbm2Timing, EveryRuleBrokenByOneCycleIsCaughtByName) {
  for (const HbmSpec& spec : {NeuPimsSpec(), NewtonSpec()}) {
    const TimingTable table = BuildTimingTable(spec);
    TimingChecker checker(spec);
    for (const TimingRule& r : table.rules) {
      if (r.window > 0) continue;  // tFAW: below
      bool caught = false;
      for (int ta = 0; ta < kNumCommandTypes && !caught; ++ta) {
        if (!(r.from & (1u << ta))) continue;
        for (int tb = 0; tb < kNumCommandTypes && !caught; ++tb) {
          if (!(r.to & (1u << tb))) continue;
          // Same bank for the fine scopes; another rank for sibling rules.
          const Command a = Cmd(static_cast<CommandType>(ta), 0, 0, 0, 5);
          const Command b = Cmd(static_cast<CommandType>(tb), r.siblings_only ? 1 : 0, 0, 0, 5);
          Cycles lat = r.latency_cycles;
          if (r.from_last_column) lat += LastColumnOffset(a, spec.timing);
          const std::vector<IssuedCommand> broken = {{1000, a}, {1000 + lat - 1, b}};
          for (const Violation& v : checker.Check(broken)) {
            caught = caught || (v.rule == r.name && v.index == 1 && v.earlier == 0);
          }
        }
      }
      EXPECT_TRUE(caught) << "rule " << r.name << " (" << ScopeName(r.scope)
                          << ") not caught when broken";
    }
  }
}

TEST(Hbm2Timing, FifthActivationInsideTfawIsCaught) {
  TimingChecker checker(NeuPimsSpec());
  std::vector<IssuedCommand> faw;
  for (int i = 0; i < 5; ++i) {
    faw.push_back({1000 + 6 * i, Cmd(CommandType::kAct, 0, i % 4, i / 4)});
  }
  int n = 0;
  for (const Violation& v : checker.Check(faw)) n += v.rule == "tFAW" ? 1 : 0;
  EXPECT_EQ(n, 1);
  faw.back().cycle = 1030;  // exactly tFAW after the first: legal
  n = 0;
  for (const Violation& v : checker.Check(faw)) n += v.rule == "tFAW" ? 1 : 0;
  EXPECT_EQ(n, 0);
}

TEST(Hbm2Timing, GroupedActivationCountsAsFourInTheCheckerWindow) {
  TimingChecker checker(NeuPimsSpec());
  const std::vector<IssuedCommand> trace = {{1000, Cmd(CommandType::kPimAct, 0, 0)},
                                            {1010, Cmd(CommandType::kAct, 0, 2, 1)}};
  bool caught = false;
  for (const Violation& v : checker.Check(trace)) caught = caught || v.rule == "tFAW";
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace neupims::hw
