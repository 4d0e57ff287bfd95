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

TEST(GemvPlan, HeadDimThatDoesNotDivideThePageKeepsWholeHeadsPerKeyRow) {
  // GPT-J-class: 16 heads of 80 (5 column steps each). A key row holds floor(512 / 80) = 6
  // heads, so 16 heads take 3 query chunks (6 + 6 + 4), not ceil(1280 / 512) = 3 dense ones
  // by luck: check the dot products per tile too.
  AttentionShape s{/*seq_len=*/64, 16, 16, 80};
  auto p = PlanLogit(s, Table2());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->vector_loads(), 3);
  EXPECT_EQ(p->blocks[0].runs[0].dots, 6);
  EXPECT_EQ(p->blocks[1].runs[0].dots, 4);
  EXPECT_EQ(p->dot_products(), 2 * 16);  // 2 tiles of 32 tokens x 16 heads
  EXPECT_EQ(p->column_steps(), 2 * 16 * 5);
  // Phi-class 96 (5 heads per row) and Falcon-class 112 (4 heads per row).
  auto phi = PlanLogit({64, 32, 32, 96}, Table2());
  ASSERT_TRUE(phi.ok());
  EXPECT_EQ(phi->vector_loads(), 7);  // ceil(32 / 5)
  auto falcon = PlanLogit({64, 8, 8, 112}, Table2());
  ASSERT_TRUE(falcon.ok());
  EXPECT_EQ(falcon->vector_loads(), 2);  // ceil(8 / 4)
  // Values need no padding: 80 dimensions = 2 full tiles + one of 16 banks.
  auto attend = PlanAttend(s, Table2());
  ASSERT_TRUE(attend.ok());
  EXPECT_EQ(attend->tiles(), 16 * 3);
}

TEST(GemvPlan, HeadDimOffTheLanesIsPaddedToWholeColumnSteps) {
  // 100 elements: 7 steps (112 lanes, 12 of them zero), 4 heads per key row.
  auto p = PlanLogit({32, 8, 8, 100}, Table2());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->vector_loads(), 2);
  EXPECT_EQ(p->column_steps(), 8 * 7);
  // 768 elements: one full row (32 steps) and a half row (16 steps) per head.
  auto wide = PlanLogit({32, 2, 2, 768}, Table2());
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->vector_loads(), 4);
  EXPECT_EQ(wide->column_steps(), 2 * (32 + 16));
}

TEST(GemvPlan, RejectsBadShapes) {
  EXPECT_FALSE(PlanAttention({0, 8, 8, 128}, Table2()).ok());
  EXPECT_FALSE(PlanAttention({10, 8, 3, 128}, Table2()).ok());  // heads % kv_heads
  EXPECT_FALSE(PlanGemv({0, 10}, Table2()).ok());
  EXPECT_EQ(PlanAttention({-5, 8, 8, 128}, Table2()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace neupims::hw
