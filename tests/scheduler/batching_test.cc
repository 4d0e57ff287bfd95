#include "scheduler/batching.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

bool Anywhere(int, int) { return true; }

// ---------------------------------------------------------------------------------------------
// Algorithm 2: greedy min-load bin packing.

TEST(GreedyMinLoad, PlacesEachRequestOnTheLeastLoadedChannel) {
  std::vector<double> loads = {0, 0, 0};
  // 5 -> ch0 (all empty, lowest index)   loads {5, 0, 0}
  // 3 -> ch1 (0 < 0? tie -> lowest)      loads {5, 3, 0}
  // 2 -> ch2                             loads {5, 3, 2}
  // 2 -> ch2 (2 is the minimum)          loads {5, 3, 4}
  const std::vector<int> got = GreedyMinLoad(loads, {5, 3, 2, 2}, Anywhere);
  EXPECT_THAT(got, ElementsAre(0, 1, 2, 2));
  EXPECT_THAT(loads, ElementsAre(5, 3, 4));
}

TEST(GreedyMinLoad, TiesGoToTheLowestIndex) {
  std::vector<double> loads = {4, 1, 1, 1};
  EXPECT_THAT(GreedyMinLoad(loads, {2}, Anywhere), ElementsAre(1));
  EXPECT_THAT(loads, ElementsAre(4, 3, 1, 1));
  // Now 2 and 3 tie at 1.
  EXPECT_THAT(GreedyMinLoad(loads, {1, 1}, Anywhere), ElementsAre(2, 3));
  EXPECT_THAT(loads, ElementsAre(4, 3, 2, 2));
}

TEST(GreedyMinLoad, StartsFromExistingLoads) {
  std::vector<double> loads = {10, 2, 7};
  // 6 -> ch1 (2) -> {10, 8, 7}; 1 -> ch2 (7) -> {10, 8, 8}; 1 -> ch1 (tie 8/8, lowest) -> 9.
  EXPECT_THAT(GreedyMinLoad(loads, {6, 1, 1}, Anywhere), ElementsAre(1, 2, 1));
  EXPECT_THAT(loads, ElementsAre(10, 9, 8));
}

TEST(GreedyMinLoad, SkipsChannelsWhereTheRequestDoesNotFit) {
  std::vector<double> loads = {0, 5, 9};
  // Request 0 may not use channel 0: the least loaded allowed channel is 1.
  // Request 1 may only use channel 2.
  auto fits = [](int request, int channel) {
    if (request == 0) return channel != 0;
    return channel == 2;
  };
  EXPECT_THAT(GreedyMinLoad(loads, {3, 1}, fits), ElementsAre(1, 2));
  EXPECT_THAT(loads, ElementsAre(0, 8, 10));
}

// MinLoadChannel asks `fits` only of a channel that would become the best; its answer is still
// the least loaded channel that fits, ties to the lowest index, on random loads (many ties) and
// random fit masks, against a plain scan of every channel.
TEST(MinLoadChannel, IsTheLeastLoadedChannelThatFitsWhicheverChannelsItAsks) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int channels = static_cast<int>(rng() % 9);
    std::vector<double> loads(static_cast<size_t>(channels));
    std::vector<bool> fit(static_cast<size_t>(channels));
    for (int c = 0; c < channels; ++c) {
      loads[c] = static_cast<double>(rng() % 4);
      fit[c] = rng() % 3 != 0;
    }
    int expected = -1;
    for (int c = 0; c < channels; ++c) {
      if (fit[c] && (expected < 0 || loads[c] < loads[expected])) expected = c;
    }
    std::vector<int> asked;
    const int got = MinLoadChannel(loads, [&](int c) {
      asked.push_back(c);
      return static_cast<bool>(fit[c]);
    });
    ASSERT_EQ(got, expected) << "trial " << trial;
    // Never more questions than channels, each channel at most once.
    ASSERT_LE(asked.size(), static_cast<size_t>(channels));
  }
}

TEST(GreedyMinLoad, RequestThatFitsNowhereGetsMinusOneAndChangesNoLoad) {
  std::vector<double> loads = {1, 2};
  auto fits = [](int request, int) { return request != 1; };
  EXPECT_THAT(GreedyMinLoad(loads, {4, 100, 1}, fits), ElementsAre(0, -1, 1));
  EXPECT_THAT(loads, ElementsAre(5, 3));
}

TEST(GreedyMinLoad, EmptyInputs) {
  std::vector<double> loads = {1, 2};
  EXPECT_THAT(GreedyMinLoad(loads, {}, Anywhere), IsEmpty());
  EXPECT_THAT(loads, ElementsAre(1, 2));
  std::vector<double> none;
  EXPECT_THAT(GreedyMinLoad(none, {1, 2}, Anywhere), ElementsAre(-1, -1));
}

// ---------------------------------------------------------------------------------------------
// Round-robin (the NPU+PIM baseline).

TEST(RoundRobin, RotatesFromTheCursorAndRemembersIt) {
  int cursor = 0;
  EXPECT_THAT(RoundRobin(3, 4, &cursor, Anywhere), ElementsAre(0, 1, 2, 0));
  EXPECT_EQ(cursor, 1);
  EXPECT_THAT(RoundRobin(3, 2, &cursor, Anywhere), ElementsAre(1, 2));
  EXPECT_EQ(cursor, 0);
  cursor = 2;
  EXPECT_THAT(RoundRobin(3, 3, &cursor, Anywhere), ElementsAre(2, 0, 1));
  EXPECT_EQ(cursor, 2);
}

TEST(RoundRobin, SkipsChannelsWhereTheRequestDoesNotFit) {
  int cursor = 0;
  auto no_ch1 = [](int, int channel) { return channel != 1; };
  // r0 -> 0 (cursor 1); r1: 1 skipped -> 2 (cursor 0); r2 -> 0; r3 -> 2.
  EXPECT_THAT(RoundRobin(3, 4, &cursor, no_ch1), ElementsAre(0, 2, 0, 2));
  EXPECT_EQ(cursor, 0);
}

TEST(RoundRobin, RequestThatFitsNowhereGetsMinusOneAndKeepsTheCursor) {
  int cursor = 1;
  auto fits = [](int request, int) { return request != 0; };
  EXPECT_THAT(RoundRobin(4, 2, &cursor, fits), ElementsAre(-1, 1));
  EXPECT_EQ(cursor, 2);
}

// The one-request forms the scheduler calls per admission: the same choice as the vector forms.
TEST(MinLoadChannel, LeastLoadedFittingChannelLowestIndexOnTiesLoadsUnchanged) {
  const std::vector<double> loads = {4, 1, 1, 0};
  EXPECT_EQ(MinLoadChannel(loads, [](int) { return true; }), 3);
  EXPECT_EQ(MinLoadChannel(loads, [](int c) { return c != 3; }), 1);  // tie 1 / 2 -> 1
  EXPECT_EQ(MinLoadChannel(loads, [](int c) { return c == 0; }), 0);
  EXPECT_EQ(MinLoadChannel(loads, [](int) { return false; }), -1);
  EXPECT_THAT(loads, ElementsAre(4, 1, 1, 0));
}

TEST(RoundRobinChannel, FirstFittingChannelFromTheCursorThenPastIt) {
  int cursor = 2;
  EXPECT_EQ(RoundRobinChannel(4, &cursor, [](int c) { return c != 2; }), 3);
  EXPECT_EQ(cursor, 0);
  EXPECT_EQ(RoundRobinChannel(4, &cursor, [](int c) { return c == 1; }), 1);
  EXPECT_EQ(cursor, 2);
  EXPECT_EQ(RoundRobinChannel(4, &cursor, [](int) { return false; }), -1);
  EXPECT_EQ(cursor, 2);
}

// ---------------------------------------------------------------------------------------------
// Algorithm 3: sub-batch partitioning.

TEST(PartitionSubBatches, OddChannelsAlternateCeilAndFloorStartingWithCeil) {
  // Channel sizes {3, 3, 2, 1}:
  //   ch0 (3, odd, turn: ceil)  -> SB1 a0 a1  | SB2 a2
  //   ch1 (3, odd, turn: floor) -> SB1 b0     | SB2 b1 b2
  //   ch2 (2, even)             -> SB1 c0     | SB2 c1
  //   ch3 (1, odd, turn: ceil)  -> SB1 d0     | SB2 -
  // SB1 takes 2 + 1 + 1 + 1 = 5, SB2 1 + 2 + 1 + 0 = 4.
  const std::vector<std::vector<std::string>> per_channel = {
      {"a0", "a1", "a2"}, {"b0", "b1", "b2"}, {"c0", "c1"}, {"d0"}};
  const auto [sb1, sb2] = PartitionSubBatches(per_channel);
  EXPECT_THAT(sb1, ElementsAre("a0", "a1", "b0", "c0", "d0"));
  EXPECT_THAT(sb2, ElementsAre("a2", "b1", "b2", "c1"));
}

TEST(PartitionSubBatches, PreservesOrderWithinAChannel) {
  const std::vector<std::vector<int>> per_channel = {{9, 3, 7, 1, 5, 8}};
  const auto [sb1, sb2] = PartitionSubBatches(per_channel);
  EXPECT_THAT(sb1, ElementsAre(9, 3, 7));
  EXPECT_THAT(sb2, ElementsAre(1, 5, 8));
}

TEST(PartitionSubBatches, EmptyChannelsContributeNothingAndDoNotFlipTheTurn) {
  // Odd channels 1 and 3 are the first and second odd ones: ceil, then floor.
  const std::vector<std::vector<int>> per_channel = {{}, {10}, {}, {30}, {}};
  const auto [sb1, sb2] = PartitionSubBatches(per_channel);
  EXPECT_THAT(sb1, ElementsAre(10));
  EXPECT_THAT(sb2, ElementsAre(30));

  const std::vector<std::vector<int>> none(4);
  const auto [e1, e2] = PartitionSubBatches(none);
  EXPECT_THAT(e1, IsEmpty());
  EXPECT_THAT(e2, IsEmpty());
}

TEST(PartitionSubBatches, EvenChannelsSplitInHalves) {
  const std::vector<std::vector<int>> per_channel = {{1, 2}, {3, 4, 5, 6}};
  const auto [sb1, sb2] = PartitionSubBatches(per_channel);
  EXPECT_THAT(sb1, ElementsAre(1, 3, 4));
  EXPECT_THAT(sb2, ElementsAre(2, 5, 6));
}

TEST(PartitionSubBatches, SizesDifferByAtMostOne) {
  for (int channels = 1; channels <= 9; ++channels) {
    std::vector<std::vector<int>> per_channel(channels);
    int next = 0;
    for (int c = 0; c < channels; ++c) {
      for (int k = 0; k < (c * 7 + 3) % 6; ++k) per_channel[c].push_back(next++);
    }
    const auto [sb1, sb2] = PartitionSubBatches(per_channel);
    EXPECT_EQ(static_cast<int>(sb1.size() + sb2.size()), next);
    const int diff = static_cast<int>(sb1.size()) - static_cast<int>(sb2.size());
    EXPECT_GE(diff, 0) << channels;
    EXPECT_LE(diff, 1) << channels;
  }
}

// The scheduler's counting form against the per-channel lists it replaces: random channel
// sequences (interleaved, empty channels, odd counts), the same two sub-batches element by
// element and every item told its sub-batch; old contents of the outputs are overwritten.
TEST(PartitionSubBatchesByChannel, EqualsPartitionSubBatchesOverThePerChannelLists) {
  std::mt19937 rng(7);
  std::vector<size_t> scratch;
  std::vector<int> first = {99}, second = {98, 97};
  for (int trial = 0; trial < 300; ++trial) {
    const int channels = 1 + static_cast<int>(rng() % 9);
    const int n = static_cast<int>(rng() % 40);
    std::vector<int> channel_of(n);
    std::vector<int> items(n);
    std::vector<std::vector<int>> per_channel(channels);
    for (int i = 0; i < n; ++i) {
      items[i] = i;
      channel_of[i] = static_cast<int>(rng() % static_cast<unsigned>(channels));
      per_channel[channel_of[i]].push_back(i);
    }
    const auto [want1, want2] = PartitionSubBatches(per_channel);
    std::vector<int> told(n, -1);
    PartitionSubBatchesByChannel(
        items, channels, [&](int i) { return channel_of[i]; }, [&](int i, int s) { told[i] = s; },
        &first, &second, &scratch);
    ASSERT_EQ(first, want1) << trial;
    ASSERT_EQ(second, want2) << trial;
    for (int i : want1) EXPECT_EQ(told[i], 0);
    for (int i : want2) EXPECT_EQ(told[i], 1);
  }
}

}  // namespace
}  // namespace neupims::scheduler
