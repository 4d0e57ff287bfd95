#include "kv_cache/block_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::kv_cache {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

BlockManager Make(int block_tokens, std::vector<int64_t> blocks_per_channel, double watermark) {
  BlockManagerOptions options;
  options.block_tokens = block_tokens;
  options.blocks_per_channel = std::move(blocks_per_channel);
  options.watermark = watermark;
  absl::StatusOr<BlockManager> manager = BlockManager::Create(options);
  EXPECT_TRUE(manager.ok()) << manager.status();
  return *std::move(manager);
}

absl::StatusCode CreateCode(int block_tokens, std::vector<int64_t> blocks_per_channel,
                            double watermark) {
  BlockManagerOptions options;
  options.block_tokens = block_tokens;
  options.blocks_per_channel = std::move(blocks_per_channel);
  options.watermark = watermark;
  return BlockManager::Create(options).status().code();
}

// ---------------------------------------------------------------------------------------------
// Create and accessors.

TEST(BlockManagerCreate, RejectsInvalidOptions) {
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(CreateCode(0, {8}, 0.0), kInvalid);
  EXPECT_EQ(CreateCode(-4, {8}, 0.0), kInvalid);
  EXPECT_EQ(CreateCode(4, {}, 0.0), kInvalid);
  EXPECT_EQ(CreateCode(4, {8, -1}, 0.0), kInvalid);
  EXPECT_EQ(CreateCode(4, {8}, -0.01), kInvalid);
  EXPECT_EQ(CreateCode(4, {8}, 1.0), kInvalid);
  EXPECT_EQ(CreateCode(4, {8}, std::nan("")), kInvalid);
  // The decode stream keeps a calendar bucket per token of a block.
  EXPECT_EQ(CreateCode(kMaxBlockTokens + 1, {8}, 0.0), kInvalid);
  EXPECT_EQ(CreateCode(std::numeric_limits<int>::max(), {8}, 0.0), kInvalid);
}

TEST(BlockManagerCreate, AcceptsZeroCapacityChannelsAndZeroWatermark) {
  EXPECT_EQ(CreateCode(1, {0}, 0.0), absl::StatusCode::kOk);
  EXPECT_EQ(CreateCode(32, {0, 16}, 0.99), absl::StatusCode::kOk);
}

TEST(BlockManagerCreate, StartsWithEveryBlockFree) {
  BlockManager m = Make(32, {8, 0, 5}, 0.01);
  EXPECT_EQ(m.channels(), 3);
  EXPECT_EQ(m.block_tokens(), 32);
  EXPECT_EQ(m.TotalBlocks(0), 8);
  EXPECT_EQ(m.TotalBlocks(1), 0);
  EXPECT_EQ(m.TotalBlocks(2), 5);
  EXPECT_EQ(m.TotalBlocks(), 13);
  EXPECT_EQ(m.TotalFreeBlocks(), 13);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(m.FreeBlocks(c), m.TotalBlocks(c));
    EXPECT_EQ(m.UsedBlocks(c), 0);
  }
  EXPECT_EQ(m.Usage(), 0.0);
  EXPECT_EQ(m.requests(), 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManager, BlocksForRoundsUpToWholeBlocks) {
  BlockManager m = Make(32, {8}, 0.0);
  EXPECT_EQ(m.BlocksFor(1), 1);
  EXPECT_EQ(m.BlocksFor(31), 1);
  EXPECT_EQ(m.BlocksFor(32), 1);
  EXPECT_EQ(m.BlocksFor(33), 2);
  EXPECT_EQ(m.BlocksFor(64), 2);
  EXPECT_EQ(m.BlocksFor(65), 3);
  EXPECT_EQ(m.BlocksFor(0), 0);
}

TEST(BlockManager, WatermarkBlocksIsTheFloorOfWatermarkTimesCapacity) {
  BlockManager m = Make(4, {100, 10, 0, 99}, 0.29);
  EXPECT_EQ(m.WatermarkBlocks(0), 29);  // 0.29 x 100 is 28.999999999999996 in doubles
  EXPECT_EQ(m.WatermarkBlocks(1), 2);   // floor(2.9)
  EXPECT_EQ(m.WatermarkBlocks(2), 0);
  EXPECT_EQ(m.WatermarkBlocks(3), 28);  // floor(28.71)
  EXPECT_EQ(m.WatermarkBlocks(4), 0);   // bad channel
  EXPECT_EQ(Make(4, {10}, 0.1).WatermarkBlocks(0), 1);
  EXPECT_EQ(Make(4, {10}, 0.05).WatermarkBlocks(0), 0);
}

TEST(BlockManager, UsageCountsUsedBlocksOverAllChannels) {
  BlockManager m = Make(4, {6, 2}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 8).ok());  // 2 blocks
  ASSERT_TRUE(m.Allocate(2, 1, 4).ok());  // 1 block
  EXPECT_EQ(m.UsedBlocks(0), 2);
  EXPECT_EQ(m.UsedBlocks(1), 1);
  EXPECT_EQ(m.TotalFreeBlocks(), 5);
  EXPECT_DOUBLE_EQ(m.Usage(), 3.0 / 8.0);
  EXPECT_EQ(m.requests(), 2);
}

TEST(AllocStatus, ToStringNamesEveryValue) {
  EXPECT_STREQ(ToString(AllocStatus::kOk), "OK");
  EXPECT_STREQ(ToString(AllocStatus::kLater), "LATER");
  EXPECT_STREQ(ToString(AllocStatus::kNever), "NEVER");
}

// ---------------------------------------------------------------------------------------------
// CanAllocate: OK / LATER / NEVER, with and without the watermark.

TEST(CanAllocate, OkWhenTheChannelHasEnoughFreeBlocksWithoutWatermark) {
  BlockManager m = Make(4, {10}, 0.0);
  EXPECT_EQ(m.CanAllocate(0, 1), AllocStatus::kOk);
  EXPECT_EQ(m.CanAllocate(0, 40), AllocStatus::kOk);  // exactly the whole channel
}

TEST(CanAllocate, NeverWhenTheRequestExceedsTheChannelWithoutWatermark) {
  BlockManager m = Make(4, {10}, 0.0);
  EXPECT_EQ(m.CanAllocate(0, 41), AllocStatus::kNever);
}

TEST(CanAllocate, LaterWhenTheChannelIsTooFullNow) {
  BlockManager m = Make(4, {10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 24).ok());                // 6 blocks, 4 free
  EXPECT_EQ(m.CanAllocate(0, 16), AllocStatus::kOk);     // 4 blocks
  EXPECT_EQ(m.CanAllocate(0, 17), AllocStatus::kLater);  // 5 blocks
  EXPECT_EQ(m.CanAllocate(0, 40), AllocStatus::kLater);  // the whole (empty) channel would fit
  EXPECT_EQ(m.CanAllocate(0, 41), AllocStatus::kNever);
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_EQ(m.CanAllocate(0, 40), AllocStatus::kOk);
}

TEST(CanAllocate, WatermarkMakesAdmissionLaterWhenItWouldDipIntoTheReserve) {
  BlockManager m = Make(4, {10}, 0.2);  // 2 reserved blocks
  ASSERT_EQ(m.WatermarkBlocks(0), 2);
  EXPECT_EQ(m.CanAllocate(0, 32), AllocStatus::kOk);     // 8 blocks leaves exactly 2 free
  ASSERT_TRUE(m.Allocate(1, 0, 4).ok());                 // 9 free
  EXPECT_EQ(m.CanAllocate(0, 28), AllocStatus::kOk);     // 7 blocks leaves 2
  EXPECT_EQ(m.CanAllocate(0, 29), AllocStatus::kLater);  // 8 blocks leaves 1 < 2
  EXPECT_EQ(m.CanAllocate(0, 32), AllocStatus::kLater);
}

TEST(CanAllocate, WatermarkMakesAdmissionNeverWhenTheRequestExceedsCapacityMinusReserve) {
  BlockManager m = Make(4, {10}, 0.2);
  EXPECT_EQ(m.CanAllocate(0, 33), AllocStatus::kNever);  // 9 blocks > 10 - 2
  EXPECT_EQ(m.CanAllocate(0, 40), AllocStatus::kNever);
}

TEST(CanAllocate, NeverForABadChannelNonPositiveTokensOrAnEmptyChannel) {
  BlockManager m = Make(4, {10, 0}, 0.0);
  EXPECT_EQ(m.CanAllocate(-1, 4), AllocStatus::kNever);
  EXPECT_EQ(m.CanAllocate(2, 4), AllocStatus::kNever);
  EXPECT_EQ(m.CanAllocate(0, 0), AllocStatus::kNever);
  EXPECT_EQ(m.CanAllocate(0, -3), AllocStatus::kNever);
  EXPECT_EQ(m.CanAllocate(1, 1), AllocStatus::kNever);
}

// ---------------------------------------------------------------------------------------------
// Allocate.

TEST(Allocate, RecordsChannelTokensAndBlockTable) {
  BlockManager m = Make(4, {2, 8}, 0.0);
  ASSERT_TRUE(m.Allocate(7, 1, 10).ok());
  EXPECT_TRUE(m.Has(7));
  EXPECT_EQ(m.ChannelOf(7), 1);
  EXPECT_EQ(m.TokensOf(7), 10);
  EXPECT_EQ(m.BlockTable(7).size(), 3u);
  EXPECT_EQ(m.UsedBlocks(1), 3);
  EXPECT_EQ(m.FreeBlocks(1), 5);
  EXPECT_EQ(m.UsedBlocks(0), 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(Allocate, IgnoresTheWatermark) {
  BlockManager m = Make(4, {10}, 0.5);
  ASSERT_EQ(m.CanAllocate(0, 40), AllocStatus::kNever);
  EXPECT_TRUE(m.Allocate(1, 0, 40).ok());  // the caller decides; Allocate only needs free blocks
  EXPECT_EQ(m.FreeBlocks(0), 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(Allocate, FailsWithResourceExhaustedWhenItDoesNotFitAndChangesNothing) {
  BlockManager m = Make(4, {10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 32).ok());  // 2 blocks left
  const absl::Status s = m.Allocate(2, 0, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_FALSE(m.Has(2));
  EXPECT_EQ(m.FreeBlocks(0), 2);
  EXPECT_EQ(m.Allocate(3, 0, 41).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(m.Allocate(2, 0, 8).ok());
  EXPECT_TRUE(m.CheckInvariants().ok());
}

// ---------------------------------------------------------------------------------------------
// Error codes.

TEST(Errors, UnknownRequestIsNotFound) {
  BlockManager m = Make(4, {10}, 0.0);
  EXPECT_EQ(m.Free(42).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.AppendSlot(42).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(m.CanAppendSlot(42));
  EXPECT_FALSE(m.Has(42));
  EXPECT_EQ(m.ChannelOf(42), -1);
  EXPECT_EQ(m.TokensOf(42), 0);
  EXPECT_THAT(m.BlockTable(42), IsEmpty());
  EXPECT_EQ(m.FreeBlocks(0), 10);
}

TEST(Errors, DoubleAllocateIsAlreadyExistsAndKeepsTheFirstAllocation) {
  BlockManager m = Make(4, {10, 10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 5).ok());
  const std::vector<int64_t> table = m.BlockTable(1);
  EXPECT_EQ(m.Allocate(1, 0, 5).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(m.Allocate(1, 1, 1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(m.ChannelOf(1), 0);
  EXPECT_EQ(m.TokensOf(1), 5);
  EXPECT_EQ(m.BlockTable(1), table);
  EXPECT_EQ(m.UsedBlocks(0), 2);
  EXPECT_EQ(m.UsedBlocks(1), 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(Errors, BadChannelIsOutOfRange) {
  BlockManager m = Make(4, {10, 10}, 0.0);
  EXPECT_EQ(m.Allocate(1, -1, 4).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(m.Allocate(1, 2, 4).code(), absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(m.Has(1));
  EXPECT_EQ(m.FreeBlocks(-1), 0);
  EXPECT_EQ(m.UsedBlocks(2), 0);
  EXPECT_EQ(m.TotalBlocks(2), 0);
}

TEST(Errors, TokensBelowOneIsInvalidArgument) {
  BlockManager m = Make(4, {10}, 0.0);
  EXPECT_EQ(m.Allocate(1, 0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m.Allocate(1, 0, -5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(m.Has(1));
  EXPECT_EQ(m.FreeBlocks(0), 10);
}

// ---------------------------------------------------------------------------------------------
// AppendSlot.

TEST(AppendSlot, TakesExactlyOneBlockWhenCrossingABlockBoundary) {
  BlockManager m = Make(4, {10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 3).ok());
  ASSERT_EQ(m.BlockTable(1).size(), 1u);
  ASSERT_TRUE(m.AppendSlot(1).ok());  // 4 tokens: fills the first block
  EXPECT_EQ(m.TokensOf(1), 4);
  EXPECT_EQ(m.BlockTable(1).size(), 1u);
  EXPECT_EQ(m.FreeBlocks(0), 9);
  ASSERT_TRUE(m.AppendSlot(1).ok());  // 5 tokens: a second block
  EXPECT_EQ(m.TokensOf(1), 5);
  EXPECT_EQ(m.BlockTable(1).size(), 2u);
  EXPECT_EQ(m.FreeBlocks(0), 8);
  for (int t = 6; t <= 8; ++t) {
    ASSERT_TRUE(m.AppendSlot(1).ok());
    EXPECT_EQ(m.BlockTable(1).size(), 2u) << t;
    EXPECT_EQ(m.FreeBlocks(0), 8) << t;
  }
  ASSERT_TRUE(m.AppendSlot(1).ok());  // 9 tokens: a third block
  EXPECT_EQ(m.BlockTable(1).size(), 3u);
  EXPECT_EQ(m.FreeBlocks(0), 7);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(AppendSlot, TryAppendSlotAppendsLikeAppendSlotOrChangesNothing) {
  BlockManager m = Make(4, {4}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 8).ok());  // 2 full blocks
  ASSERT_TRUE(m.Allocate(2, 0, 3).ok());  // room for one more token
  EXPECT_FALSE(m.TryAppendSlot(42));      // unknown request
  EXPECT_TRUE(m.TryAppendSlot(1));        // takes the last free block
  EXPECT_EQ(m.TokensOf(1), 9);
  EXPECT_EQ(m.FreeBlocks(0), 0);
  EXPECT_TRUE(m.TryAppendSlot(2));   // fills its last block
  EXPECT_FALSE(m.TryAppendSlot(2));  // a new block is needed and none is free
  EXPECT_EQ(m.TokensOf(2), 4);
  EXPECT_EQ(m.BlockTable(2).size(), 1u);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(AppendSlot, OneTokenBlocksTakeABlockOnEveryAppend) {
  BlockManager m = Make(1, {5}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 1).ok());
  for (int64_t used = 2; used <= 5; ++used) {
    ASSERT_TRUE(m.CanAppendSlot(1));
    ASSERT_TRUE(m.AppendSlot(1).ok());
    EXPECT_EQ(m.UsedBlocks(0), used);
  }
  EXPECT_FALSE(m.CanAppendSlot(1));
}

TEST(AppendSlot, FailsWithResourceExhaustedAtABoundaryInAFullChannelAndChangesNothing) {
  BlockManager m = Make(4, {3}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 8).ok());  // 2 full blocks
  ASSERT_TRUE(m.Allocate(2, 0, 2).ok());  // last block half full
  ASSERT_EQ(m.FreeBlocks(0), 0);
  EXPECT_FALSE(m.CanAppendSlot(1));
  const absl::Status s = m.AppendSlot(1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(m.TokensOf(1), 8);
  EXPECT_EQ(m.BlockTable(1).size(), 2u);
  // A request with room in its last block still grows.
  EXPECT_TRUE(m.CanAppendSlot(2));
  EXPECT_TRUE(m.AppendSlot(2).ok());
  EXPECT_TRUE(m.AppendSlot(2).ok());
  EXPECT_FALSE(m.CanAppendSlot(2));
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(AppendSlot, MayUseTheWatermarkReserve) {
  BlockManager m = Make(4, {10}, 0.2);
  ASSERT_TRUE(m.Allocate(1, 0, 32).ok());  // 8 blocks; 2 reserved blocks left
  ASSERT_EQ(m.CanAllocate(0, 1), AllocStatus::kLater);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(m.AppendSlot(1).ok()) << i;
  EXPECT_EQ(m.FreeBlocks(0), 0);
  EXPECT_FALSE(m.CanAppendSlot(1));
}

// ---------------------------------------------------------------------------------------------
// Free.

TEST(Free, ReturnsEveryBlockOfTheRequest) {
  BlockManager m = Make(4, {10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 13).ok());                         // 4 blocks
  ASSERT_TRUE(m.Allocate(2, 0, 4).ok());                          // 1 block
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(m.AppendSlot(1).ok());  // 19 tokens, 5 blocks
  ASSERT_EQ(m.UsedBlocks(0), 6);
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_FALSE(m.Has(1));
  EXPECT_EQ(m.UsedBlocks(0), 1);
  EXPECT_EQ(m.FreeBlocks(0), 9);
  EXPECT_EQ(m.Free(1).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(m.Free(2).ok());
  EXPECT_EQ(m.FreeBlocks(0), 10);
  EXPECT_EQ(m.requests(), 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(Free, AFreedIdCanBeAllocatedAgain) {
  BlockManager m = Make(4, {10, 10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 4).ok());
  ASSERT_TRUE(m.Free(1).ok());
  ASSERT_TRUE(m.Allocate(1, 1, 4).ok());
  EXPECT_EQ(m.ChannelOf(1), 1);
}

// ---------------------------------------------------------------------------------------------
// Per-channel pools.

TEST(Channels, FillingChannelZeroDoesNotAffectChannelOne) {
  BlockManager m = Make(4, {4, 6}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 16).ok());  // channel 0 full
  EXPECT_EQ(m.FreeBlocks(0), 0);
  EXPECT_EQ(m.FreeBlocks(1), 6);
  EXPECT_EQ(m.CanAllocate(0, 1), AllocStatus::kLater);
  EXPECT_EQ(m.CanAllocate(1, 24), AllocStatus::kOk);
  EXPECT_FALSE(m.CanAppendSlot(1));  // channel 1's free blocks are not channel 0's
  EXPECT_EQ(m.AppendSlot(1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(m.Allocate(2, 0, 1).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(m.Allocate(3, 1, 24).ok());
  EXPECT_EQ(m.FreeBlocks(1), 0);
  EXPECT_EQ(m.UsedBlocks(0), 4);
  ASSERT_TRUE(m.Free(3).ok());
  EXPECT_EQ(m.FreeBlocks(0), 0);  // freeing in channel 1 returns nothing to channel 0
  EXPECT_EQ(m.FreeBlocks(1), 6);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(Channels, BlockIdsArePerChannel) {
  BlockManager m = Make(4, {4, 4}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 8).ok());
  ASSERT_TRUE(m.Allocate(2, 1, 8).ok());
  EXPECT_THAT(m.BlockTable(1), ElementsAre(0, 1));
  EXPECT_THAT(m.BlockTable(2), ElementsAre(0, 1));
}

// ---------------------------------------------------------------------------------------------
// Determinism.

TEST(Determinism, AFreshPoolHandsOutBlocksInOrder) {
  BlockManager m = Make(4, {10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 12).ok());
  ASSERT_TRUE(m.Allocate(2, 0, 5).ok());
  EXPECT_THAT(m.BlockTable(1), ElementsAre(0, 1, 2));
  EXPECT_THAT(m.BlockTable(2), ElementsAre(3, 4));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(m.AppendSlot(2).ok());  // 9 tokens
  EXPECT_THAT(m.BlockTable(2), ElementsAre(3, 4, 5));
}

TEST(Determinism, FreeListIsLastInFirstOut) {
  BlockManager m = Make(4, {10}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 12).ok());  // 0 1 2
  ASSERT_TRUE(m.Allocate(2, 0, 8).ok());   // 3 4
  ASSERT_TRUE(m.Free(1).ok());
  ASSERT_TRUE(m.Allocate(3, 0, 12).ok());  // the same blocks, in the same order
  EXPECT_THAT(m.BlockTable(3), ElementsAre(0, 1, 2));
  ASSERT_TRUE(m.Free(2).ok());
  ASSERT_TRUE(m.Allocate(4, 0, 4).ok());  // the most recently freed first block
  EXPECT_THAT(m.BlockTable(4), ElementsAre(3));
  ASSERT_TRUE(m.Allocate(5, 0, 8).ok());
  EXPECT_THAT(m.BlockTable(5), ElementsAre(4, 5));
}

TEST(Determinism, TheSameCallsGiveTheSameBlockTables) {
  auto run = [] {
    BlockManager m = Make(2, {16, 16}, 0.1);
    std::vector<std::vector<int64_t>> tables;
    EXPECT_TRUE(m.Allocate(1, 0, 5).ok());
    EXPECT_TRUE(m.Allocate(2, 1, 3).ok());
    EXPECT_TRUE(m.Allocate(3, 0, 4).ok());
    EXPECT_TRUE(m.Free(1).ok());
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(m.AppendSlot(3).ok());
    EXPECT_TRUE(m.Allocate(4, 0, 7).ok());
    for (RequestId id : {2, 3, 4}) tables.push_back(m.BlockTable(id));
    return tables;
  };
  EXPECT_EQ(run(), run());
}

// ---------------------------------------------------------------------------------------------
// Randomized: admit / append / preempt / finish, checking every invariant after every step.

struct RandomStats {
  int64_t admitted = 0;
  int64_t later = 0;
  int64_t never = 0;
  int64_t appended = 0;
  int64_t preempted = 0;
  int64_t finished = 0;
};

struct ShadowRequest {
  int channel = 0;
  int64_t tokens = 0;
};

// Checks the manager against the shadow state: invariants, per-channel usage, each request.
void CheckState(const BlockManager& m, const std::map<RequestId, ShadowRequest>& shadow) {
  const absl::Status s = m.CheckInvariants();
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(m.requests(), static_cast<int64_t>(shadow.size()));
  std::vector<int64_t> used(m.channels(), 0);
  for (const auto& [id, r] : shadow) {
    ASSERT_TRUE(m.Has(id)) << id;
    ASSERT_EQ(m.ChannelOf(id), r.channel) << id;
    ASSERT_EQ(m.TokensOf(id), r.tokens) << id;
    ASSERT_EQ(static_cast<int64_t>(m.BlockTable(id).size()), m.BlocksFor(r.tokens)) << id;
    used[r.channel] += m.BlocksFor(r.tokens);
  }
  for (int c = 0; c < m.channels(); ++c) {
    ASSERT_LE(m.UsedBlocks(c), m.TotalBlocks(c)) << "channel " << c;
    ASSERT_GE(m.FreeBlocks(c), 0) << "channel " << c;
    ASSERT_EQ(m.UsedBlocks(c) + m.FreeBlocks(c), m.TotalBlocks(c)) << "channel " << c;
    ASSERT_EQ(m.UsedBlocks(c), used[c]) << "channel " << c;
  }
  ASSERT_LE(m.Usage(), 1.0);
}

void RunRandomOperations(uint64_t seed, int operations, RandomStats* stats) {
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int kBlockTokens[] = {1, 4, 16, 32};
  const double kWatermarks[] = {0.0, 0.01, 0.1, 0.25};
  BlockManagerOptions options;
  options.block_tokens = kBlockTokens[uniform(0, 3)];
  const int channels = static_cast<int>(uniform(1, 4));
  for (int c = 0; c < channels; ++c) {
    // Mostly small pools so that they fill up; now and then an empty channel.
    options.blocks_per_channel.push_back(uniform(0, 9) == 0 ? 0 : uniform(1, 40));
  }
  options.watermark = kWatermarks[uniform(0, 3)];
  absl::StatusOr<BlockManager> created = BlockManager::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  BlockManager& m = *created;

  std::map<RequestId, ShadowRequest> shadow;  // ordered: random picks are reproducible
  RequestId next_id = 0;
  auto pick = [&](int channel) -> RequestId {  // a random running request (of `channel` if >= 0)
    std::vector<RequestId> ids;
    for (const auto& [id, r] : shadow) {
      if (channel < 0 || r.channel == channel) ids.push_back(id);
    }
    return ids[static_cast<size_t>(uniform(0, static_cast<int64_t>(ids.size()) - 1))];
  };

  for (int op = 0; op < operations; ++op) {
    SCOPED_TRACE(testing::Message() << "operation " << op);
    const int64_t r = uniform(0, 99);
    if (shadow.empty() || r < 30) {
      // Admission on a random channel, only when CanAllocate says kOk.
      const int channel = static_cast<int>(uniform(0, m.channels() - 1));
      const int64_t tokens = uniform(1, 3 * m.block_tokens() + 1);
      const int64_t need = m.BlocksFor(tokens);
      const int64_t watermark = m.WatermarkBlocks(channel);
      const AllocStatus verdict = m.CanAllocate(channel, tokens);
      if (need > m.TotalBlocks(channel) - watermark) {
        ASSERT_EQ(verdict, AllocStatus::kNever);
        ++stats->never;
      } else if (m.FreeBlocks(channel) - need < watermark) {
        ASSERT_EQ(verdict, AllocStatus::kLater);
        ++stats->later;
      } else {
        ASSERT_EQ(verdict, AllocStatus::kOk);
        const RequestId id = next_id++;
        const absl::Status s = m.Allocate(id, channel, tokens);
        ASSERT_TRUE(s.ok()) << s;
        shadow[id] = {channel, tokens};
        ++stats->admitted;
      }
    } else if (r < 85) {
      // Decode step of a random running request; preempt a victim in its channel if it cannot.
      const RequestId id = pick(-1);
      ShadowRequest& req = shadow[id];
      if (m.CanAppendSlot(id)) {
        const int64_t free_before = m.FreeBlocks(req.channel);
        const bool crosses = req.tokens % m.block_tokens() == 0;
        const absl::Status s = m.AppendSlot(id);
        ASSERT_TRUE(s.ok()) << s;
        ++req.tokens;
        ASSERT_EQ(m.FreeBlocks(req.channel), free_before - (crosses ? 1 : 0));
        ++stats->appended;
      } else {
        ASSERT_EQ(req.tokens % m.block_tokens(), 0);
        ASSERT_EQ(m.FreeBlocks(req.channel), 0);
        ASSERT_EQ(m.AppendSlot(id).code(), absl::StatusCode::kResourceExhausted);
        const RequestId victim = pick(req.channel);
        const absl::Status s = m.Free(victim);
        ASSERT_TRUE(s.ok()) << s;
        shadow.erase(victim);
        ++stats->preempted;
      }
    } else {
      // Finish or cancel a random request.
      const RequestId id = pick(-1);
      const absl::Status s = m.Free(id);
      ASSERT_TRUE(s.ok()) << s;
      shadow.erase(id);
      ASSERT_EQ(m.Free(id).code(), absl::StatusCode::kNotFound);
      ++stats->finished;
    }
    ASSERT_NO_FATAL_FAILURE(CheckState(m, shadow));
  }

  // Drain: no block may leak.
  for (const auto& [id, r] : shadow) {
    const absl::Status s = m.Free(id);
    ASSERT_TRUE(s.ok()) << s;
  }
  shadow.clear();
  ASSERT_NO_FATAL_FAILURE(CheckState(m, shadow));
  for (int c = 0; c < m.channels(); ++c) {
    EXPECT_EQ(m.FreeBlocks(c), m.TotalBlocks(c)) << "channel " << c;
  }
  EXPECT_EQ(m.TotalFreeBlocks(), m.TotalBlocks());
  EXPECT_EQ(m.requests(), 0);
}

TEST(RandomizedOperations, KeepEveryInvariantAndLeakNoBlocks) {
  RandomStats stats;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    ASSERT_NO_FATAL_FAILURE(RunRandomOperations(seed, 2000, &stats));
  }
  // The run exercised every path.
  EXPECT_GT(stats.admitted, 0);
  EXPECT_GT(stats.later, 0);
  EXPECT_GT(stats.never, 0);
  EXPECT_GT(stats.appended, 0);
  EXPECT_GT(stats.preempted, 0);
  EXPECT_GT(stats.finished, 0);
}

}  // namespace
}  // namespace neupims::kv_cache

namespace neupims::kv_cache {
namespace {

// The slot hint only skips the lookup: with a right, stale or wrong hint every append does what
// TryAppendSlot(id) does.
TEST(TryAppendSlotHint, AnyHintGivesTheLookupsAnswer) {
  BlockManager m = Make(4, {3}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 3).ok());
  const int slot1 = m.SlotOf(1);
  ASSERT_GE(slot1, 0);
  EXPECT_EQ(m.SlotOf(99), -1);
  EXPECT_TRUE(m.TryAppendSlot(1, slot1));  // 4 tokens: the first block is full
  EXPECT_TRUE(m.TryAppendSlot(1, slot1));  // 5: a second block
  EXPECT_EQ(m.TokensOf(1), 5);
  EXPECT_EQ(m.BlockTable(1).size(), 2u);
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_FALSE(m.TryAppendSlot(1, slot1));  // freed: the hint's slot is empty
  // Request 2 reuses the slot; request 1's stale hint must not grow it.
  ASSERT_TRUE(m.Allocate(2, 0, 1).ok());
  EXPECT_EQ(m.SlotOf(2), slot1);
  EXPECT_FALSE(m.TryAppendSlot(1, slot1));
  EXPECT_EQ(m.TokensOf(2), 1);
  // Wrong and out-of-range hints fall back to the lookup.
  EXPECT_TRUE(m.TryAppendSlot(2, slot1 + 7));
  EXPECT_TRUE(m.TryAppendSlot(2, -1));
  EXPECT_EQ(m.TokensOf(2), 3);
  ASSERT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants();
  // A full channel refuses through the hint as through the lookup, changing nothing.
  ASSERT_TRUE(m.Allocate(3, 0, 8).ok());         // the other two blocks
  EXPECT_TRUE(m.TryAppendSlot(2, m.SlotOf(2)));  // 4 tokens: the last slot of its block
  EXPECT_FALSE(m.TryAppendSlot(2, m.SlotOf(2)));
  EXPECT_EQ(m.TokensOf(2), 4);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants();
}

// TryAppendInRoom takes only the common case: the hinted table is the request's and its last
// block has room. At a block boundary, with a wrong, stale or negative hint it returns false and
// changes nothing, although TryAppendSlot would append there.
TEST(TryAppendSlotHint, InRoomAppendsOnlyIntoTheLastBlocksRoom) {
  BlockManager m = Make(4, {3}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 2).ok());
  const int slot1 = m.SlotOf(1);
  EXPECT_TRUE(m.TryAppendInRoom(1, slot1));  // 3 tokens
  EXPECT_TRUE(m.TryAppendInRoom(1, slot1));  // 4: the block is full
  EXPECT_FALSE(m.TryAppendInRoom(1, slot1));
  EXPECT_EQ(m.TokensOf(1), 4);
  EXPECT_EQ(m.BlockTable(1).size(), 1u);
  EXPECT_FALSE(m.TryAppendInRoom(1, -1));
  EXPECT_FALSE(m.TryAppendInRoom(1, slot1 + 1));
  EXPECT_TRUE(m.TryAppendSlot(1, slot1));  // 5: a second block
  EXPECT_TRUE(m.TryAppendInRoom(1, slot1));
  EXPECT_EQ(m.TokensOf(1), 6);
  EXPECT_FALSE(m.TryAppendInRoom(2, slot1));  // another request's table
  ASSERT_TRUE(m.Free(1).ok());
  EXPECT_FALSE(m.TryAppendInRoom(1, slot1));  // freed
  ASSERT_TRUE(m.Allocate(2, 0, 1).ok());
  ASSERT_EQ(m.SlotOf(2), slot1);
  EXPECT_FALSE(m.TryAppendInRoom(1, slot1));  // stale: the slot is request 2's now
  EXPECT_EQ(m.TokensOf(2), 1);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants();
}

// ---------------------------------------------------------------------------------------------
// The decode stream.

// Every live request's block table (the physical ids, in order) and token count agree in the
// two managers, and so do every channel's free blocks.
void ExpectSameTables(const BlockManager& streamed, const BlockManager& stepped,
                      const std::vector<RequestId>& live) {
  for (RequestId id : live) {
    ASSERT_EQ(streamed.TokensOf(id), stepped.TokensOf(id)) << id;
    ASSERT_EQ(streamed.BlockTable(id), stepped.BlockTable(id)) << id;
  }
  for (int c = 0; c < streamed.channels(); ++c) {
    ASSERT_EQ(streamed.FreeBlocks(c), stepped.FreeBlocks(c)) << c;
  }
  EXPECT_EQ(streamed.Usage(), stepped.Usage());
}

// Two managers under the same random allocations and frees: in one the live requests stream
// (AppendStream), in the other each appends through TryAppendSlot in allocation order, as the
// scheduler's per-request pass does. Every tick both agree on every request's tokens, on its
// block table id by id, and on every channel's free blocks. A refused tick changes nothing in
// the first; it then does what the scheduler does: EndStream and the per-request pass in
// allocation order, which must refuse the very requests the second refused (and take the same
// blocks); those end in both, and the rest join the stream again. Requests also leave and join
// the stream and take appends out of step with it.
TEST(BlockManagerStream, AppendStreamEqualsPerRequestAppendsInAllocationOrder) {
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uniform = [&](int64_t lo, int64_t hi) {
      return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
    };
    auto pick = [&](const std::vector<RequestId>& ids) {
      return ids[static_cast<size_t>(uniform(0, static_cast<int64_t>(ids.size()) - 1))];
    };
    const int block_tokens = static_cast<int>(uniform(1, 5));
    BlockManager streamed = Make(block_tokens, {12, 9, 15}, 0.0);
    BlockManager stepped = Make(block_tokens, {12, 9, 15}, 0.0);
    std::vector<RequestId> live;  // allocation order
    RequestId next_id = 0;
    int refused_ticks = 0;
    int64_t refused_requests = 0;
    for (int tick = 0; tick < 3000; ++tick) {
      if (uniform(0, 3) == 0) {  // a new request
        const int channel = static_cast<int>(uniform(0, 2));
        const int64_t tokens = uniform(1, 3 * block_tokens);
        if (streamed.CanAllocate(channel, tokens) == AllocStatus::kOk) {
          ASSERT_TRUE(streamed.Allocate(next_id, channel, tokens).ok());
          ASSERT_TRUE(stepped.Allocate(next_id, channel, tokens).ok());
          ASSERT_TRUE(streamed.JoinStream(next_id).ok());
          live.push_back(next_id++);
        }
      }
      if (!live.empty() && uniform(0, 5) == 0) {  // one ends
        const size_t k = static_cast<size_t>(uniform(0, static_cast<int64_t>(live.size()) - 1));
        ASSERT_TRUE(streamed.Free(live[k]).ok());
        ASSERT_TRUE(stepped.Free(live[k]).ok());
        live.erase(live.begin() + static_cast<long>(k));
      }
      if (!live.empty() && uniform(0, 7) == 0) {  // one appends out of step with the stream
        const RequestId id = pick(live);
        ASSERT_EQ(streamed.TryAppendSlot(id), stepped.TryAppendSlot(id));
        ASSERT_TRUE(streamed.Streaming(id));
      }
      if (!live.empty() && uniform(0, 9) == 0) {  // one leaves the stream and joins again
        const RequestId id = pick(live);
        ASSERT_TRUE(streamed.LeaveStream(id).ok());
        EXPECT_FALSE(streamed.Streaming(id));
        ASSERT_TRUE(streamed.JoinStream(id).ok());
      }
      if (uniform(0, 15) == 0) {  // every request leaves and joins (the scheduler's fallback)
        streamed.EndStream();
        EXPECT_EQ(streamed.streaming(), 0);
        for (RequestId id : live) ASSERT_TRUE(streamed.JoinStream(id).ok());
      }
      const bool appended = streamed.AppendStream();
      // The reference: the whole per-request pass, in allocation order, refusals included.
      std::vector<bool> stepped_ok;
      for (RequestId id : live) stepped_ok.push_back(stepped.TryAppendSlot(id));
      const bool all = std::find(stepped_ok.begin(), stepped_ok.end(), false) == stepped_ok.end();
      ASSERT_EQ(appended, all);
      if (!appended) {
        ++refused_ticks;
        // The scheduler's fallback: leave the stream, append per request in allocation order.
        streamed.EndStream();
        EXPECT_EQ(streamed.streaming(), 0);
        std::vector<RequestId> kept, refused;
        for (size_t i = 0; i < live.size(); ++i) {
          const bool ok = streamed.TryAppendSlot(live[i]);
          ASSERT_EQ(ok, stepped_ok[i]) << live[i];
          (ok ? kept : refused).push_back(live[i]);
        }
        // Refused in both: they end (the scheduler would preempt someone), after the pass, as
        // the reference's pass ran without these frees.
        for (RequestId id : refused) {
          ASSERT_TRUE(streamed.Free(id).ok());
          ASSERT_TRUE(stepped.Free(id).ok());
        }
        refused_requests += static_cast<int64_t>(refused.size());
        live = std::move(kept);
        for (RequestId id : live) ASSERT_TRUE(streamed.JoinStream(id).ok());
      }
      ASSERT_EQ(streamed.streaming(), static_cast<int64_t>(live.size()));
      ExpectSameTables(streamed, stepped, live);
      if (::testing::Test::HasFatalFailure()) return;
      const absl::Status inv = streamed.CheckInvariants();
      ASSERT_TRUE(inv.ok()) << inv;
    }
    EXPECT_GT(refused_ticks, 0) << "the channels are meant to fill up";
    EXPECT_GT(refused_requests, 0);
  }
}

// While no rebuild intervenes, the stream hands out the very block ids the per-request appends
// do (allocation order, per channel), including at a tick where several requests of one
// channel start a block.
TEST(BlockManagerStream, TakesBlocksInAllocationOrder) {
  BlockManager streamed = Make(2, {10}, 0.0);
  BlockManager stepped = Make(2, {10}, 0.0);
  for (RequestId id : {7, 3, 5}) {  // allocation order 7, 3, 5; all full at 2 tokens
    ASSERT_TRUE(streamed.Allocate(id, 0, 2).ok());
    ASSERT_TRUE(stepped.Allocate(id, 0, 2).ok());
  }
  // Joined out of allocation order.
  for (RequestId id : {5, 7, 3}) ASSERT_TRUE(streamed.JoinStream(id).ok());
  for (int tick = 0; tick < 4; ++tick) {
    ASSERT_TRUE(streamed.AppendStream());
    for (RequestId id : {7, 3, 5}) ASSERT_TRUE(stepped.TryAppendSlot(id));
  }
  for (RequestId id : {7, 3, 5}) {
    EXPECT_EQ(streamed.BlockTable(id), stepped.BlockTable(id)) << id;
    EXPECT_EQ(streamed.TokensOf(id), 6) << id;
  }
  EXPECT_THAT(streamed.BlockTable(7), ElementsAre(0, 3, 6));
  EXPECT_TRUE(streamed.CheckInvariants().ok()) << streamed.CheckInvariants();
}

// A tick that some channel cannot serve changes nothing: not the blocks taken for the requests
// before the one refused, not the tick (the same tick is tried again).
TEST(BlockManagerStream, ARefusedTickChangesNothing) {
  BlockManager m = Make(2, {3, 4}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 1, 2).ok());  // channel 1: full block, starts a block next tick
  ASSERT_TRUE(m.Allocate(2, 0, 2).ok());
  ASSERT_TRUE(m.Allocate(3, 0, 4).ok());  // channel 0 now has no free block
  for (RequestId id : {1, 2, 3}) ASSERT_TRUE(m.JoinStream(id).ok());
  const std::vector<int64_t> table1 = m.BlockTable(1);
  EXPECT_FALSE(m.AppendStream());  // request 1 could take a block, request 2 cannot
  EXPECT_EQ(m.BlockTable(1), table1);
  EXPECT_EQ(m.FreeBlocks(1), 3);
  EXPECT_EQ(m.TotalFreeBlocks(), 3);
  for (RequestId id : {1, 2}) EXPECT_EQ(m.TokensOf(id), 2) << id;
  EXPECT_EQ(m.TokensOf(3), 4);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants();
  ASSERT_TRUE(m.Free(3).ok());  // room in channel 0
  EXPECT_TRUE(m.AppendStream());
  for (RequestId id : {1, 2}) EXPECT_EQ(m.TokensOf(id), 3) << id;
  EXPECT_FALSE(m.Streaming(3));
  EXPECT_EQ(m.streaming(), 2);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants();
}

TEST(BlockManagerStream, JoinAndLeaveErrorsChangeNothing) {
  BlockManager m = Make(4, {4}, 0.0);
  EXPECT_EQ(m.JoinStream(1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.LeaveStream(1).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(m.Allocate(1, 0, 3).ok());
  EXPECT_EQ(m.LeaveStream(1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(m.JoinStream(1).ok());
  EXPECT_EQ(m.JoinStream(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m.streaming(), 1);
  EXPECT_TRUE(m.AppendStream());
  EXPECT_EQ(m.TokensOf(1), 4);
  // Leaving keeps the tokens; appends go on per request.
  ASSERT_TRUE(m.LeaveStream(1).ok());
  EXPECT_EQ(m.TokensOf(1), 4);
  EXPECT_TRUE(m.AppendStream());  // nobody streams
  EXPECT_EQ(m.TokensOf(1), 4);
  EXPECT_TRUE(m.TryAppendInRoom(1, m.SlotOf(1)) == false);  // its block is full
  EXPECT_TRUE(m.TryAppendSlot(1));
  EXPECT_EQ(m.TokensOf(1), 5);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants();
}

// The in-room fast path refuses a streaming request (its room is the stream's, not the table's);
// the whole TryAppendSlot appends to it and keeps it in the stream.
TEST(BlockManagerStream, InRoomAppendsRefuseAStreamingRequest) {
  BlockManager m = Make(4, {4}, 0.0);
  ASSERT_TRUE(m.Allocate(1, 0, 1).ok());
  ASSERT_TRUE(m.JoinStream(1).ok());
  EXPECT_FALSE(m.TryAppendInRoom(1, m.SlotOf(1)));
  EXPECT_TRUE(m.TryAppendSlot(1, m.SlotOf(1)));
  EXPECT_TRUE(m.Streaming(1));
  EXPECT_TRUE(m.AppendStream());
  EXPECT_TRUE(m.AppendStream());
  EXPECT_EQ(m.TokensOf(1), 4);
  EXPECT_EQ(m.BlockTable(1).size(), 1u);
  EXPECT_TRUE(m.AppendStream());
  EXPECT_EQ(m.TokensOf(1), 5);
  EXPECT_EQ(m.BlockTable(1).size(), 2u);
  EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants();
}

}  // namespace
}  // namespace neupims::kv_cache
