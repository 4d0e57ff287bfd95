// The MEM scheduling policy alone, without a controller: FR-FCFS order, the row policies and
// PIM protection.
#include "hw/pim/mem_policy.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "hw/dram/timing_table.h"
#include "tests/hw/test_specs.h"

namespace neupims::hw {
namespace {

Command Cmd(CommandType type, int rank, int bank_group = 0, int bank = 0, int32_t row = 7) {
  Command c;
  c.type = type;
  c.rank = static_cast<int8_t>(rank);
  c.bank_group = static_cast<int8_t>(bank_group);
  c.bank = static_cast<int8_t>(bank);
  c.row = row;
  return c;
}

MemCandidate Request(CommandType type, int queue_index, Cycles earliest = 0, int rank = 0,
                     int bank_group = 0) {
  return {Cmd(type, rank, bank_group, queue_index % 4), earliest,
          type == CommandType::kRd || type == CommandType::kWr, queue_index};
}

class MemPolicyTest : public ::testing::Test {
 protected:
  std::unique_ptr<MemSchedulingPolicy> Policy(RowPolicy row_policy, bool protect_pim = true) {
    return CreateFrFcfsPolicy({row_policy, protect_pim}, engine_, spec_.org.banks_per_channel());
  }

  HbmSpec spec_ = testing::NeuPimsSpec();
  TimingTable table_ = BuildTimingTable(spec_);
  TimingEngine engine_{spec_, table_};
};

TEST_F(MemPolicyTest, FrFcfsPrefersTheOldestReadyRowHit) {
  auto policy = Policy(RowPolicy::kOpen);
  const std::vector<MemCandidate> offers = {
      Request(CommandType::kAct, 0), Request(CommandType::kRd, 4), Request(CommandType::kWr, 2),
      Request(CommandType::kRd, 1, /*earliest=*/10)};  // older, but not ready yet
  const MemPick pick = policy->Pick(offers, /*now=*/0, {});
  ASSERT_TRUE(pick.issue.has_value());
  EXPECT_EQ(pick.issue->queue_index, 2);
  EXPECT_EQ(pick.issue->cmd.type, CommandType::kWr);
}

TEST_F(MemPolicyTest, FrFcfsWithoutRowHitsServesTheOldest) {
  auto policy = Policy(RowPolicy::kOpen);
  const std::vector<MemCandidate> offers = {Request(CommandType::kAct, 3),
                                            Request(CommandType::kPre, 1)};
  const MemPick pick = policy->Pick(offers, 0, {});
  ASSERT_TRUE(pick.issue.has_value());
  EXPECT_EQ(pick.issue->queue_index, 1);
}

TEST_F(MemPolicyTest, RowPolicyPrechargesGoBeforeRequestsThatMissButAfterRowHits) {
  auto policy = Policy(RowPolicy::kClosed);
  MemCandidate close = Request(CommandType::kPre, 0);
  close.queue_index = kRowPolicyQueueIndex;
  std::vector<MemCandidate> offers = {Request(CommandType::kAct, 0), close};
  EXPECT_EQ(policy->Pick(offers, 0, {}).issue->queue_index, kRowPolicyQueueIndex);
  offers.push_back(Request(CommandType::kRd, 5));
  EXPECT_EQ(policy->Pick(offers, 0, {}).issue->queue_index, 5);
}

TEST_F(MemPolicyTest, NothingReadyReportsTheEarliestCycleToLookAgain) {
  auto policy = Policy(RowPolicy::kOpen);
  const std::vector<MemCandidate> offers = {Request(CommandType::kRd, 0, 40),
                                            Request(CommandType::kAct, 1, 25)};
  const MemPick pick = policy->Pick(offers, 20, {});
  EXPECT_FALSE(pick.issue.has_value());
  EXPECT_EQ(pick.next_ready, 25);
  EXPECT_EQ(policy->Pick({}, 20, {}).next_ready, kNeverCycle);
}

TEST_F(MemPolicyTest, ClosedPageClosesABankOnceNoQueuedRequestHitsItsRow) {
  auto policy = Policy(RowPolicy::kClosed);
  EXPECT_FALSE(policy->AnyRowToClose());
  policy->OnServed(5);
  EXPECT_TRUE(policy->AnyRowToClose());
  EXPECT_FALSE(policy->CloseNow(4, /*row_open=*/true, /*hits_queued=*/false));
  EXPECT_TRUE(policy->CloseNow(5, true, false));
  EXPECT_TRUE(policy->CloseNow(5, true, false)) << "keeps asking until the PRE issues";
  policy->OnPrecharge(5);
  EXPECT_FALSE(policy->AnyRowToClose());
  EXPECT_FALSE(policy->CloseNow(5, true, false));
}

TEST_F(MemPolicyTest, ClosedPageKeepsARowThatQueuedRequestsStillHit) {
  auto policy = Policy(RowPolicy::kClosed);
  policy->OnServed(5);
  EXPECT_FALSE(policy->CloseNow(5, /*row_open=*/true, /*hits_queued=*/true));
  EXPECT_FALSE(policy->AnyRowToClose()) << "the next served hit marks the bank again";
  policy->OnServed(5);
  EXPECT_FALSE(policy->CloseNow(5, /*row_open=*/false, false)) << "already closed";
  EXPECT_FALSE(policy->AnyRowToClose());
}

TEST_F(MemPolicyTest, OpenPageKeepsRowsOpen) {
  auto policy = Policy(RowPolicy::kOpen);
  policy->OnServed(5);
  EXPECT_FALSE(policy->AnyRowToClose());
  EXPECT_FALSE(policy->CloseNow(5, true, false));
}

TEST_F(MemPolicyTest, PimProtectionHoldsAMemCommandThatWouldDelayThePim) {
  // The PIM's next command activates rank 0 at cycle 1; a MEM activation in rank 0 now would
  // push it to tRRD_S.
  PimOutlook pim;
  pim.next = Cmd(CommandType::kPimAct, 0, 0, 0, 100);
  pim.next_earliest = 1;
  const std::vector<MemCandidate> offers = {Request(CommandType::kAct, 0, 0, /*rank=*/0, 1)};
  ASSERT_GT(engine_.EarliestIfIssued(*pim.next, 0, offers[0].cmd, 0), pim.next_earliest);

  const MemPick held = Policy(RowPolicy::kOpen)->Pick(offers, 0, pim);
  EXPECT_FALSE(held.issue.has_value());
  EXPECT_EQ(held.next_ready, 1);
  EXPECT_TRUE(Policy(RowPolicy::kOpen, /*protect_pim=*/false)->Pick(offers, 0, pim).issue);
  // Once the PIM command may issue now, the controller issues it first: no hold applies.
  pim.next_earliest = 0;
  EXPECT_TRUE(Policy(RowPolicy::kOpen)->Pick(offers, 0, pim).issue);
}

TEST_F(MemPolicyTest, PimProtectionLetsHarmlessMemCommandsThrough) {
  PimOutlook pim;
  pim.next = Cmd(CommandType::kPimAct, 0, 0, 0, 100);
  pim.next_earliest = 1000;
  const std::vector<MemCandidate> offers = {Request(CommandType::kAct, 0, 0, /*rank=*/1)};
  const MemPick pick = Policy(RowPolicy::kOpen)->Pick(offers, 0, pim);
  ASSERT_TRUE(pick.issue.has_value());
  EXPECT_EQ(pick.issue->cmd.rank, 1);
}

TEST_F(MemPolicyTest, NoMemActivationInARankThatOwesThePimActivations) {
  PimOutlook pim;
  pim.next_earliest = 50;
  pim.ranks_owing_activations = 0b01;  // rank 0
  auto policy = Policy(RowPolicy::kOpen, /*protect_pim=*/false);
  std::vector<MemCandidate> offers = {Request(CommandType::kAct, 0, 0, /*rank=*/0)};
  const MemPick held = policy->Pick(offers, 0, pim);
  EXPECT_FALSE(held.issue.has_value());
  EXPECT_EQ(held.next_ready, 50);
  offers.push_back(Request(CommandType::kRd, 3, 0, /*rank=*/0));
  offers.push_back(Request(CommandType::kAct, 1, 0, /*rank=*/1));
  EXPECT_EQ(policy->Pick(offers, 0, pim).issue->queue_index, 3) << "row hits still flow";
  offers.erase(offers.begin() + 1);
  EXPECT_EQ(policy->Pick(offers, 0, pim).issue->cmd.rank, 1) << "other ranks may activate";
}

}  // namespace
}  // namespace neupims::hw
