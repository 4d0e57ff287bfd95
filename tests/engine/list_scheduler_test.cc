#include "engine/list_scheduler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace neupims::engine {
namespace {

ScheduleNode N(Lane lane, int priority, double ns, const std::vector<int>& deps = {},
               double shared_ns = 0) {
  ScheduleNode n;
  n.lane = lane;
  n.priority = priority;
  n.dur_ns = ns;
  n.dur_shared_ns = shared_ns > 0 ? shared_ns : ns;
  n.deps.assign(deps.begin(), deps.end());
  return n;
}

TEST(ListScheduler, AChainTakesTheSumOfItsDurations) {
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kVector, 1, 5, {0}),
                                     N(Lane::kPim, 2, 7, {1})};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 22);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 15);
}

TEST(ListScheduler, IndependentLanesOverlap) {
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 8)};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 10);
}

TEST(ListScheduler, BlockedModeSerialisesSystolicAndPim) {
  // Single row buffer: the PIM decides first, the GEMM waits for it.
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 8)};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), true), 18);
  EXPECT_DOUBLE_EQ(nodes[0].start_ns, 8);
}

TEST(ListScheduler, AGemmUnderThePimRunsAtTheSharedRateThenAtFullSpeed) {
  // PIM busy 0..8; the GEMM needs 10 ns alone or 20 ns entirely under the PIM (half speed):
  // 8 ns at half speed do 4 ns of work, the remaining 6 ns run at full speed: ends at 14.
  std::vector<ScheduleNode> nodes = {N(Lane::kPim, 0, 8), N(Lane::kSystolic, 1, 10, {}, 20)};
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 14);
}

TEST(ListScheduler, HigherPriorityReadyNodeGoesFirst) {
  std::vector<ScheduleNode> nodes = {N(Lane::kVector, 5, 4), N(Lane::kVector, 1, 3)};
  ListScheduler s;
  s.Run(absl::MakeSpan(nodes), false);
  EXPECT_DOUBLE_EQ(nodes[1].start_ns, 0);
  EXPECT_DOUBLE_EQ(nodes[0].start_ns, 3);
}

// Stage barriers (the reference simulator's stages): an SB1 GEMM of stage 1 that could run
// beside SB0's stage-0 work waits for all of it; within a stage units still overlap, so a stage
// lasts its longest unit.
TEST(ListScheduler, BarriersHoldALaterStageUntilEveryNodeOfTheEarlierOnesEnded) {
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 30, {0}),
                                     N(Lane::kSystolic, 2, 12), N(Lane::kSystolic, 3, 5, {1})};
  nodes[0].stage = 0;  // A: SB0 pre
  nodes[1].stage = 1;  // B: SB0 attention ...
  nodes[2].stage = 1;  //    || SB1 pre
  nodes[3].stage = 2;  // C: SB0 post
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 45);  // 10 + 30 + 5, no barrier needed
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);                    // list: after node 0 (priority)
  nodes[2].priority = -1;                                     // SB1's GEMM first, at t = 0
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 57);  // 12 + 10 + 30 + 5
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 0);
  // With barriers it cannot start before stage A ends: B = max(30, 12), then C.
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false, /*barriers=*/true), 45);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);
  EXPECT_DOUBLE_EQ(nodes[1].start_ns, 10);
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 40);
}

TEST(ListScheduler, ABarrierWaitsForTheSlowerUnitOfItsStage) {
  // Stage 0: a 10 ns GEMM and a 25 ns PIM op; stage 1: a GEMM independent of both.
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 25),
                                     N(Lane::kSystolic, 2, 4)};
  nodes[2].stage = 1;
  ListScheduler s;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 25);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false, true), 29);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 25);
}

TEST(ListScheduler, ReusedSchedulerGivesTheSameResult) {
  std::vector<ScheduleNode> a = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 8, {0}),
                                 N(Lane::kVector, 2, 3, {0}), N(Lane::kSystolic, 3, 4, {1, 2})};
  std::vector<ScheduleNode> b = a;
  ListScheduler s;
  const double first = s.Run(absl::MakeSpan(a), false);
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(b), false), first);
  EXPECT_DOUBLE_EQ(first, 22);
}

TEST(ListScheduler, ReplayRefusesAnOrderTheNewDurationsChange) {
  // Vector lane: A (priority 0) waits for a systolic node X, B (priority 1) for a PIM node Y.
  // With X = 10 ns B runs first (ready at 1); with X = 0.5 ns A is ready first and runs first.
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 1),
                                     N(Lane::kVector, 2, 5, {0}), N(Lane::kVector, 3, 5, {1})};
  ListScheduler s;
  s.Run(absl::MakeSpan(nodes), false);
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 1);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);
  nodes[0].dur_ns = nodes[0].dur_shared_ns = 0.5;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 10.5);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 0.5);
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 5.5);
  EXPECT_EQ(s.replays(), 0);
  EXPECT_EQ(s.event_loop_runs(), 2);
  // Durations that keep the order are replayed.
  nodes[0].dur_ns = nodes[0].dur_shared_ns = 0.25;
  EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), false), 10.25);
  EXPECT_EQ(s.replays(), 1);
}

// A random DAG in topological order: lanes, unique priorities (a random permutation), up to
// four earlier dependencies, stages never below a dependency's, some zero-duration nodes
// (joins) and GEMMs slowed under the PIM.
std::vector<ScheduleNode> RandomGraph(std::mt19937_64& rng, int n) {
  std::vector<int> priority(n);
  for (int i = 0; i < n; ++i) priority[i] = i;
  std::shuffle(priority.begin(), priority.end(), rng);
  std::vector<ScheduleNode> nodes(n);
  for (int i = 0; i < n; ++i) {
    ScheduleNode& node = nodes[i];
    node.lane = static_cast<Lane>(rng() % kNumLanes);
    node.priority = priority[i];
    const int deps = i == 0 ? 0 : static_cast<int>(rng() % 4);
    for (int d = 0; d < deps; ++d) {
      const int dep = static_cast<int>(rng() % i);
      if (std::find(node.deps.begin(), node.deps.end(), dep) == node.deps.end()) {
        node.deps.push_back(dep);
      }
    }
    for (int d : node.deps) node.stage = std::max(node.stage, nodes[d].stage);
    node.stage += static_cast<int>(rng() % 3 == 0);
  }
  return nodes;
}

// New durations for the same graph: `spread` = 0 keeps the first draw (the same durations),
// small values move them a little, large values reorder the schedule. `integral`: whole-ns base
// durations, so that unrelated chains often end at exactly the same time (ties).
void DrawDurations(std::mt19937_64& rng, double spread, bool integral,
                   std::vector<ScheduleNode>* nodes, std::vector<double>* base) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  if (base->empty()) {
    for (const ScheduleNode& node : *nodes) {
      const bool zero = node.lane == Lane::kInterconnect && rng() % 2 == 0;
      const double ns = integral ? static_cast<double>(1 + rng() % 8) : 1.0 + 99.0 * unit(rng);
      base->push_back(zero ? 0.0 : ns);
    }
  }
  for (size_t i = 0; i < nodes->size(); ++i) {
    ScheduleNode& node = (*nodes)[i];
    node.dur_ns = (*base)[i] * (1.0 + spread * unit(rng));
    node.dur_shared_ns = node.lane == Lane::kSystolic && rng() % 2 == 0
                             ? node.dur_ns * (1.0 + 2.0 * unit(rng))
                             : node.dur_ns;
  }
}

// Moves every non-zero duration (and shared duration) by up to `step` ns either way: the small
// steps a decode stage takes between iterations, which the lean replay must follow or refuse.
void Perturb(std::mt19937_64& rng, double step, std::vector<ScheduleNode>* nodes) {
  std::uniform_real_distribution<double> move(-step, step);
  for (ScheduleNode& node : *nodes) {
    if (node.dur_ns == 0) continue;
    const double ratio = node.dur_shared_ns / node.dur_ns;
    node.dur_ns = std::max(0.5, node.dur_ns + move(rng));
    node.dur_shared_ns = ratio == 1 ? node.dur_ns : node.dur_ns * ratio + move(rng);
  }
}

// Moves one random node's durations by 10^u ns, u uniform in [-4, 1], either way: all of the
// drift on one comparison, so that a move just beyond one comparison's slack, within the others',
// flips a decision (what a proof that left that comparison out would replay lean).
void PerturbOne(std::mt19937_64& rng, std::vector<ScheduleNode>* nodes) {
  std::uniform_real_distribution<double> exponent(-4.0, 1.0);
  ScheduleNode& node = (*nodes)[rng() % nodes->size()];
  if (node.dur_ns == 0) return;
  const double ratio = node.dur_shared_ns / node.dur_ns;
  const double by = std::pow(10.0, exponent(rng)) * (rng() % 2 == 0 ? 1 : -1);
  node.dur_ns = std::max(0.5, node.dur_ns + by);
  node.dur_shared_ns = node.dur_ns * ratio;
}

// Runs `replaying` and a fresh scheduler (the event loop) on `nodes`; the times must agree bit
// for bit.
void ExpectTheEventLoops(ListScheduler* replaying, std::vector<ScheduleNode>* nodes, bool barriers,
                         uint64_t shape, const std::string& where) {
  std::vector<ScheduleNode> fresh_nodes = *nodes;
  ListScheduler fresh;
  const double want = fresh.Run(absl::MakeSpan(fresh_nodes), false, barriers);
  ASSERT_EQ(fresh.replays(), 0);
  const double got = replaying->Run(absl::MakeSpan(*nodes), false, barriers, shape);
  ASSERT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << where;
  for (size_t i = 0; i < nodes->size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint64_t>((*nodes)[i].start_ns),
              std::bit_cast<uint64_t>(fresh_nodes[i].start_ns))
        << where << " node " << i;
    ASSERT_EQ(std::bit_cast<uint64_t>((*nodes)[i].end_ns),
              std::bit_cast<uint64_t>(fresh_nodes[i].end_ns))
        << where << " node " << i;
  }
}

// Every call of the replaying scheduler (which remembers orders, replays them checked or lean)
// must give the event loop's times. Each draw of durations is followed by walks of small
// perturbations (lean replays while the proof's comparisons hold, checked replays and flips
// when one fails); a quarter of the graphs has whole-ns durations, whose exact ties the lean
// replay must keep as ties. Barriers (a third of the graphs) never replay lean.
TEST(ListScheduler, ReplayEqualsTheEventLoopOnRandomGraphs) {
  std::mt19937_64 rng(20261127);
  ListScheduler replaying;
  int64_t calls = 0;
  for (int graph = 0; graph < 60; ++graph) {
    std::vector<ScheduleNode> nodes = RandomGraph(rng, 10 + static_cast<int>(rng() % 90));
    std::vector<double> base;
    const bool barriers = graph % 3 == 0;
    const bool integral = graph % 4 == 1;
    const uint64_t shape = static_cast<uint64_t>(graph) + 1;
    for (int draw = 0; draw < 40; ++draw) {
      const double spread = draw % 4 == 3 ? 1.0 : (draw % 4 == 0 ? 0.0 : 1e-3);
      DrawDurations(rng, spread, integral, &nodes, &base);
      const std::string where = "graph " + std::to_string(graph) + " draw " + std::to_string(draw);
      ExpectTheEventLoops(&replaying, &nodes, barriers, shape, where);
      ++calls;
      for (const double step : {1e-9, 1e-6, 1e-3, 0.3}) {
        for (int walk = 0; walk < 3; ++walk) {
          Perturb(rng, step, &nodes);
          ExpectTheEventLoops(&replaying, &nodes, barriers, shape,
                              where + " step " + std::to_string(step));
          ++calls;
        }
      }
      for (int walk = 0; walk < 12; ++walk) {
        PerturbOne(rng, &nodes);
        ExpectTheEventLoops(&replaying, &nodes, barriers, shape,
                            where + " one-node walk " + std::to_string(walk));
        ++calls;
      }
    }
  }
  EXPECT_EQ(replaying.replays() + replaying.event_loop_runs(), calls);
  EXPECT_EQ(replaying.checked_replays() + replaying.lean_replays(), replaying.replays());
  // Every path was taken: lean and checked replays, and event-loop runs beyond each graph's
  // first call.
  EXPECT_GT(replaying.lean_replays(), calls / 10);
  EXPECT_GT(replaying.checked_replays(), calls / 10);
  EXPECT_GT(replaying.event_loop_runs(), 60 + calls / 20);
}

// Two chains end at the same time and feed one lane: the lower-priority node's start depends on
// which chain ends first. The proof keeps the tie as a comparison (A's end not after B's, or D,
// ready at B's end, would start before C took the idle lane), so the tie itself is replayed
// lean, and B ending first by 1e-9 ns falls back to the event loop.
TEST(ListScheduler, LeanReplayKeepsATieAsATieCheck) {
  // Vector lane: C (priority 2) after a systolic A, D (priority 3) after a PIM B.
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 10),
                                     N(Lane::kVector, 2, 5, {0}), N(Lane::kVector, 3, 5, {1})};
  const uint64_t shape = 7;
  ListScheduler s;
  ExpectTheEventLoops(&s, &nodes, false, shape, "first");  // the event loop
  ExpectTheEventLoops(&s, &nodes, false, shape, "again");  // checked, and proved with the tie
  EXPECT_EQ(s.checked_replays(), 1);
  ExpectTheEventLoops(&s, &nodes, false, shape, "tied");
  EXPECT_EQ(s.lean_replays(), 1);
  nodes[1].dur_ns = nodes[1].dur_shared_ns = 10 - 1e-9;  // B first: D runs before C
  ExpectTheEventLoops(&s, &nodes, false, shape, "flipped");
  EXPECT_EQ(s.lean_replays(), 1);
  EXPECT_EQ(s.event_loop_runs(), 2);
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 10 - 1e-9);
  // Without a shape there is no lean replay.
  ListScheduler plain;
  for (int i = 0; i < 3; ++i) plain.Run(absl::MakeSpan(nodes), false);
  EXPECT_EQ(plain.lean_replays(), 0);
  EXPECT_EQ(plain.checked_replays(), 2);
}

// The priority comparison of a proof: W (priority 5) takes the vector lane at 10 because I
// (priority 1) is ready only at 10.5. A move of I's dependency that keeps it after 10 is
// replayed lean; one that makes I ready by then (the lane then starts I at 10), even exactly at
// 10, fails the comparison, and the call falls back: the checked replay refuses the order too,
// and the event loop runs.
TEST(ListScheduler, ALeanReplayWhosePriorityComparisonFlipsFallsBack) {
  std::vector<ScheduleNode> nodes = {N(Lane::kPim, 0, 10.5), N(Lane::kVector, 1, 10),
                                     N(Lane::kVector, 5, 5), N(Lane::kVector, 2, 5, {0})};
  const uint64_t shape = 3;
  ListScheduler s;
  ExpectTheEventLoops(&s, &nodes, false, shape, "first");
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 10);
  ExpectTheEventLoops(&s, &nodes, false, shape, "proved");
  nodes[0].dur_ns = nodes[0].dur_shared_ns = 10.4;  // I still ready after W's decision: lean
  ExpectTheEventLoops(&s, &nodes, false, shape, "near");
  EXPECT_EQ(s.lean_replays(), 1);
  // I ready exactly at W's decision: the lane takes I (the comparison is strict, and a tie
  // fails it).
  nodes[0].dur_ns = nodes[0].dur_shared_ns = 10;
  ExpectTheEventLoops(&s, &nodes, false, shape, "tied");
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 10);
  EXPECT_EQ(s.lean_replays(), 1);
  EXPECT_EQ(s.checked_replays(), 1);
  EXPECT_EQ(s.event_loop_runs(), 2);
  nodes[0].dur_ns = nodes[0].dur_shared_ns = 9.9;  // I ready before W's decision
  ExpectTheEventLoops(&s, &nodes, false, shape, "flipped");
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 10);
  EXPECT_EQ(s.lean_replays(), 1);  // the tie's order, checked (not proved yet)
  EXPECT_EQ(s.event_loop_runs(), 2);
}

// No bound on how far durations move: a proof whose smallest slack is 0.5 ns (I ready at 10.5,
// W's decision at 10) replays lean a call whose durations all tripled (61 ns moved in total,
// where the earlier drift bound allowed 0.25 ns), since every decision stays, and equals the
// event loop bit for bit; so does a move of one node by 100 ns that keeps them.
TEST(ListScheduler, ALeanReplayFollowsMovesBeyondTheOldDriftBound) {
  std::vector<ScheduleNode> nodes = {N(Lane::kPim, 0, 10.5), N(Lane::kVector, 1, 10),
                                     N(Lane::kVector, 5, 5), N(Lane::kVector, 2, 5, {0}),
                                     N(Lane::kSystolic, 3, 4, {1}, 6)};
  const uint64_t shape = 4;
  ListScheduler s;
  ExpectTheEventLoops(&s, &nodes, false, shape, "first");
  ExpectTheEventLoops(&s, &nodes, false, shape, "proved");
  for (ScheduleNode& node : nodes) {
    node.dur_ns *= 3;
    node.dur_shared_ns *= 3;
  }
  ExpectTheEventLoops(&s, &nodes, false, shape, "tripled");
  EXPECT_EQ(s.lean_replays(), 1);
  EXPECT_DOUBLE_EQ(nodes[2].start_ns, 30);
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 45);
  nodes[3].dur_ns = nodes[3].dur_shared_ns = 115;  // I, the last on its lane, runs longer
  ExpectTheEventLoops(&s, &nodes, false, shape, "one far");
  EXPECT_EQ(s.lean_replays(), 2);
  EXPECT_EQ(s.event_loop_runs(), 1);
}

// Replay's range check on a node's end compares bits as integers: a negative, infinite or NaN
// end must still fall back to the event loop, whose times the call then returns bit for bit.
TEST(ListScheduler, ReplayLeavesNegativeAndNonFiniteDurationsToTheEventLoop) {
  for (const double bad : {-1.0, -20.0, std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()}) {
    std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 4),
                                       N(Lane::kVector, 2, 3, {0, 1}),
                                       N(Lane::kSystolic, 3, 2, {2})};
    ListScheduler s;
    s.Run(absl::MakeSpan(nodes), false);
    nodes[2].dur_ns = nodes[2].dur_shared_ns = bad;
    std::vector<ScheduleNode> fresh_nodes = nodes;
    ListScheduler fresh;
    const double want = fresh.Run(absl::MakeSpan(fresh_nodes), false);
    const double got = s.Run(absl::MakeSpan(nodes), false);
    EXPECT_EQ(s.replays(), 0) << bad;
    EXPECT_EQ(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(want)) << bad;
    for (size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint64_t>(nodes[i].start_ns),
                std::bit_cast<uint64_t>(fresh_nodes[i].start_ns))
          << bad << " node " << i;
      EXPECT_EQ(std::bit_cast<uint64_t>(nodes[i].end_ns),
                std::bit_cast<uint64_t>(fresh_nodes[i].end_ns))
          << bad << " node " << i;
    }
  }
}

// Replay reads all four dependency slots: the unused ones must hold kNone, also after a list is
// cleared and refilled shorter.
TEST(DepList, SlotsBeyondTheSizeHoldNone) {
  DepList deps{3, 1, 4, 2};
  deps.clear();
  deps.push_back(5);
  EXPECT_EQ(deps.size(), 1u);
  EXPECT_EQ(deps.padded()[0], 5);
  for (int k = 1; k < DepList::kMax; ++k) EXPECT_EQ(deps.padded()[k], DepList::kNone);
  const std::vector<int> two = {7, 8};
  deps.assign(two.begin(), two.end());
  EXPECT_EQ(deps.padded()[2], DepList::kNone);
  EXPECT_EQ(deps.padded()[3], DepList::kNone);
  EXPECT_EQ(DepList{}.padded()[0], DepList::kNone);
}

TEST(ListScheduler, BlockedModeNeverReplays) {
  std::vector<ScheduleNode> nodes = {N(Lane::kSystolic, 0, 10), N(Lane::kPim, 1, 8),
                                     N(Lane::kVector, 2, 3, {0, 1})};
  ListScheduler s;
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(s.Run(absl::MakeSpan(nodes), true), 21);
  EXPECT_EQ(s.replays(), 0);
  EXPECT_EQ(s.event_loop_runs(), 3);
}

// A graph whose durations cross back and forth alternates between start orders: X (after A)
// and Y (after B) share the vector lane, and whichever becomes ready first starts first. Each
// order is found by the event loop once and then replayed, checked or lean, from its own
// memory, with the event loop's times; a third node count in between keeps its own memory.
TEST(ListScheduler, AlternatingOrdersAreEachReplayedFromTheirOwnMemory) {
  auto graph = [](double a, double b) {
    return std::vector<ScheduleNode>{N(Lane::kSystolic, 0, a), N(Lane::kInterconnect, 1, b),
                                     N(Lane::kVector, 2, 1, {0}), N(Lane::kVector, 3, 1, {1})};
  };
  ListScheduler s;
  for (int i = 0; i < 20; ++i) {
    const std::string where = "call " + std::to_string(i);
    std::vector<ScheduleNode> nodes = i % 2 == 0 ? graph(1 + i * 1e-3, 2) : graph(2, 1 + i * 1e-3);
    ExpectTheEventLoops(&s, &nodes, false, 7, where);
    std::vector<ScheduleNode> other = {N(Lane::kPim, 0, 1 + i), N(Lane::kVector, 1, 2, {0})};
    ExpectTheEventLoops(&s, &other, false, 9, where + " other");
  }
  // Two orders of four nodes and one of two.
  EXPECT_EQ(s.event_loop_runs(), 3);
  EXPECT_EQ(s.replays(), 37);
}

// A systolic node's duration jumps at dur_ns == 0 when dur_shared_ns > 0 and the PIM is busy
// (rate 0: the shared duration, whatever the PIM has left). The lean replay recomputes it with
// Replay's operations and needs no continuity: B leaving 0 (its end moves from 10 to just after
// 2) is replayed lean while G still waits for V, and falls back once G's source flips.
TEST(ListScheduler, ALeanReplayFollowsASystolicDurationLeavingZero) {
  std::vector<ScheduleNode> nodes = {N(Lane::kPim, 0, 2), N(Lane::kSystolic, 1, 0, {}, 10),
                                     N(Lane::kVector, 2, 20), N(Lane::kSystolic, 3, 1, {2})};
  ListScheduler s;
  ExpectTheEventLoops(&s, &nodes, false, 9, "first");
  ExpectTheEventLoops(&s, &nodes, false, 9, "proved");
  EXPECT_DOUBLE_EQ(nodes[1].end_ns, 10);
  nodes[1].dur_ns = 1e-6;
  ExpectTheEventLoops(&s, &nodes, false, 9, "moved");
  EXPECT_EQ(s.lean_replays(), 1);
  EXPECT_LT(nodes[1].end_ns, 2.001);
  // V now ends at 5, before B's 10: G starts at B's end, not V's.
  nodes[1].dur_ns = 0;
  nodes[2].dur_ns = nodes[2].dur_shared_ns = 5;
  ExpectTheEventLoops(&s, &nodes, false, 9, "source flipped");
  EXPECT_EQ(s.lean_replays(), 1);
  EXPECT_DOUBLE_EQ(nodes[3].start_ns, 10);
}

// A lane change under the same shape (allowed: "lanes may differ") recomputes the ancestor
// sets, which hold the lanes' edges: once Q leaves P's lane, P is no longer an ancestor of Q.
TEST(ListScheduler, ALaneChangeRecomputesTheAncestorsTheProofExempts) {
  std::vector<ScheduleNode> nodes = {N(Lane::kVector, 0, 10), N(Lane::kVector, 1, 11),
                                     N(Lane::kSystolic, 2, 1, {0, 1})};
  ListScheduler s;
  ExpectTheEventLoops(&s, &nodes, false, 5, "first");
  ExpectTheEventLoops(&s, &nodes, false, 5, "proved");
  nodes[1].lane = Lane::kInterconnect;  // P and Q now run side by side
  ExpectTheEventLoops(&s, &nodes, false, 5, "lanes changed");
  nodes[0].dur_ns = nodes[0].dur_shared_ns = 12;  // P ends after Q: C must wait for P
  ExpectTheEventLoops(&s, &nodes, false, 5, "P longer");
}

// Random walks with lane changes and systolic zero durations (shared > 0): every call equals
// the event loop bit for bit.
TEST(ListScheduler, ReplayEqualsTheEventLoopUnderLaneChangesAndZeroGemms) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int64_t lean = 0;
  for (int graph = 0; graph < 300; ++graph) {
    std::vector<ScheduleNode> nodes = RandomGraph(rng, 4 + static_cast<int>(rng() % 20));
    for (ScheduleNode& n : nodes) n.stage = 0;
    for (ScheduleNode& n : nodes) {
      n.dur_ns = 1 + 20 * unit(rng);
      n.dur_shared_ns = n.lane == Lane::kSystolic ? n.dur_ns * (1 + unit(rng)) : n.dur_ns;
    }
    ListScheduler s;
    const uint64_t shape = 1;
    for (int step = 0; step < 60; ++step) {
      ScheduleNode& n = nodes[rng() % nodes.size()];
      switch (rng() % 4) {
        case 0:
          if (step % 7 == 0) n.lane = static_cast<Lane>(rng() % kNumLanes);
          break;
        case 1:
          if (n.lane == Lane::kSystolic) {
            n.dur_ns = n.dur_ns == 0 ? 1e-3 * unit(rng) : 0;
            n.dur_shared_ns = 5 + 20 * unit(rng);
          }
          break;
        default:
          n.dur_ns = std::max(0.0, n.dur_ns + 1e-3 * (unit(rng) - 0.5));
          break;
      }
      ExpectTheEventLoops(&s, &nodes, false, shape,
                          "graph " + std::to_string(graph) + " step " + std::to_string(step));
      if (::testing::Test::HasFatalFailure()) return;
    }
    lean += s.lean_replays();
  }
  EXPECT_GT(lean, 100);
}

// Heavier walks: whole-ns durations (ties), zero durations on every lane, lane changes,
// systolic zero GEMMs, moves from 1e-6 to 10 ns; every call equals the event loop bit for bit.
TEST(ListScheduler, ReplayEqualsTheEventLoopOnWalksWithTiesZerosAndLargeMoves) {
  int64_t lean = 0, calls = 0;
  for (uint64_t seed = 100; seed < 140; ++seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int graph = 0; graph < 100; ++graph) {
      std::vector<ScheduleNode> nodes = RandomGraph(rng, 3 + static_cast<int>(rng() % 30));
      for (ScheduleNode& n : nodes) n.stage = 0;
      const bool whole = rng() % 2 == 0;
      for (ScheduleNode& n : nodes) {
        n.dur_ns = rng() % 6 == 0 ? 0 : (whole ? double(1 + rng() % 4) : 1 + 20 * unit(rng));
        n.dur_shared_ns = n.lane == Lane::kSystolic && rng() % 2
                              ? n.dur_ns * (1 + 2 * unit(rng)) + (n.dur_ns == 0 ? 3 : 0)
                              : n.dur_ns;
      }
      ListScheduler s;
      for (int step = 0; step < 80; ++step) {
        ScheduleNode& n = nodes[rng() % nodes.size()];
        const double mag = std::pow(10.0, -6 + 7 * unit(rng));
        switch (rng() % 6) {
          case 0:
            if (step % 9 == 0) n.lane = static_cast<Lane>(rng() % kNumLanes);
            break;
          case 1:
            n.dur_ns = n.dur_ns == 0 ? mag : (rng() % 3 == 0 ? 0 : n.dur_ns);
            break;
          case 2:
            n.dur_shared_ns = std::max(0.0, n.dur_shared_ns + mag * (unit(rng) - 0.5));
            break;
          default:
            n.dur_ns = std::max(0.0, n.dur_ns + mag * (unit(rng) - 0.5));
            if (n.lane != Lane::kSystolic) n.dur_shared_ns = n.dur_ns;
            break;
        }
        ++calls;
        ExpectTheEventLoops(&s, &nodes, false, 1,
                            "seed " + std::to_string(seed) + " graph " + std::to_string(graph) +
                                " step " + std::to_string(step));
        if (::testing::Test::HasFatalFailure()) return;
      }
      lean += s.lean_replays();
    }
  }
  EXPECT_GT(lean, calls / 4);
}
}  // namespace
}  // namespace neupims::engine
