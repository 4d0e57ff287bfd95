// GEMV programs follow the KV-cache layout of NeuPIMs sec. 6.3 (and the tile counts of
// Algorithm 1).
#include "hw/pim/gemv_plan.h"

#include "gtest/gtest.h"
#include "tests/hw/test_specs.h"

namespace neupims::hw {
namespace {

PimGeometry Table2() { return PimGeometry::FromSpec(testing::NeuPimsSpec()); }

TEST(GemvPlan, GeometryFollowsTable2) {
  const PimGeometry g = Table2();
  EXPECT_EQ(g.banks, 32);
  EXPECT_EQ(g.groups, 8);
  EXPECT_EQ(g.page_elements, 512);
  EXPECT_EQ(g.lanes, 16);
}

TEST(GemvPlan, Gpt3_7bTp4LogitMatchesAlgorithm1TileCount) {
  // GPT3-7B with TP4: 8 heads of 128 on the device, E/TP = 1024 -> 2 query chunks.
  AttentionShape s{/*seq_len=*/100, /*num_heads=*/8, /*num_kv_heads=*/8, /*head_dim=*/128};
  auto logit = PlanLogit(s, Table2());
  ASSERT_TRUE(logit.ok()) << logit.status();
  // Algorithm 1: ceil(seq / banks) * ceil(E / page) tiles, one GWRITE per chunk.
  EXPECT_EQ(logit->tiles(), 4 * 2);
  EXPECT_EQ(logit->vector_loads(), 2);
  // One dot product per head per tile: 4 heads of 128 share a page.
  EXPECT_EQ(logit->dot_products(), 8 * 4);
  EXPECT_EQ(logit->column_steps(), 8 * 4 * (128 / 16));
  // The last token group holds 100 - 96 = 4 tokens: one bank group.
  EXPECT_EQ(logit->blocks[0].runs.back().groups, 1);
}

TEST(GemvPlan, AttendTilesAreHeadDimByPageOfTokens) {
  AttentionShape s{/*seq_len=*/1000, 8, 8, 128};
  auto attend = PlanAttend(s, Table2());
  ASSERT_TRUE(attend.ok());
  // Algorithm 1: ceil(d / banks) * ceil(seq / page) * heads tiles, one GWRITE per
  // (head, chunk).
  EXPECT_EQ(attend->tiles(), 4 * 2 * 8);
  EXPECT_EQ(attend->vector_loads(), 2 * 8);
  // Full chunk: 512 tokens = 32 steps; last chunk: 488 tokens = 31 steps (rounded up).
  EXPECT_EQ(attend->column_steps(), 8 * 4 * (32 + 31));
}

TEST(GemvPlan, MacsCountOnlyActiveBanks) {
  AttentionShape s{/*seq_len=*/1, 1, 1, 128};
  auto p = PlanAttention(s, Table2());
  ASSERT_TRUE(p.ok());
  // Logit: one token, 128 elements. Attend: 128 dims x 1 token (a 16-lane step each).
  EXPECT_EQ(p->macs(Table2()), 4 * 16 * 8 + 128 * 16);
}

TEST(GemvPlan, GroupedQueryAttentionRepeatsLogitPassesPerQueryGroup) {
  AttentionShape mha{/*seq_len=*/512, 8, 8, 128};
  AttentionShape gqa{/*seq_len=*/512, 8, 2, 128};
  auto a = PlanLogit(mha, Table2());
  auto b = PlanLogit(gqa, Table2());
  ASSERT_TRUE(a.ok() && b.ok());
  // Same MAC work; GQA keeps a quarter of the keys but dots each with 4 queries.
  EXPECT_EQ(a->column_steps(), b->column_steps());
  EXPECT_EQ(b->vector_loads(), 4);  // one chunk of 256 elements x 4 query groups
}

TEST(GemvPlan, HeadLargerThanAPageSpansChunks) {
  AttentionShape s{/*seq_len=*/64, 2, 2, 1024};
  auto p = PlanLogit(s, Table2());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->vector_loads(), 4);  // 2048 elements / 512
  EXPECT_EQ(p->tiles(), 4 * 2);
}

TEST(GemvPlan, GemvCoversRowsByBanksAndColumnsByPages) {
  auto p = PlanGemv({/*rows=*/100, /*cols=*/1100}, Table2());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->vector_loads(), 3);
  EXPECT_EQ(p->tiles(), 3 * 4);
  // Per chunk 3 full tiles (8 groups) + 1 tile of 4 rows (1 group); 32 + 32 + 5 steps;
  // each active group computes 4 banks x 16 lanes per step.
  EXPECT_EQ(p->macs(Table2()), (3 * 8 + 1) * (32 + 32 + 5) * 4 * 16);
}

TEST(GemvPlan, RejectsBadShapes) {
  EXPECT_FALSE(PlanAttention({0, 8, 8, 128}, Table2()).ok());
  EXPECT_FALSE(PlanAttention({10, 8, 3, 128}, Table2()).ok());      // heads % kv_heads
  EXPECT_FALSE(PlanAttention({10, 8, 8, 100}, Table2()).ok());      // not a multiple of 16 lanes
  EXPECT_FALSE(PlanAttention({10, 8, 8, 48 * 16}, Table2()).ok());  // neither divides the page
  EXPECT_FALSE(PlanGemv({0, 10}, Table2()).ok());
  EXPECT_EQ(PlanAttention({-5, 8, 8, 128}, Table2()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace neupims::hw
