// The MEM scheduling policy alone, without a controller: FR-FCFS order, the row policies and
// PIM protection.
#include "hw/pim/mem_policy.h"

#include <algorithm>
#include <memory>
#include <random>
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

// Pick against the rule stated whole: of the candidates ready now that neither wait for the
// PIM's activations nor delay its next command, the row hit first, then the oldest, the first
// offered among equals; with none, the earliest cycle any may be ready. Random offers, some
// holding, some delaying the PIM (a MEM activation in the PIM's rank within tRRD).
TEST_F(MemPolicyTest, PickIsTheFirstBestOfferThatNeitherWaitsNorDelaysThePim) {
  std::mt19937_64 rng(17);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const CommandType kTypes[] = {CommandType::kAct, CommandType::kPre, CommandType::kRd,
                                CommandType::kWr};
  for (int trial = 0; trial < 3000; ++trial) {
    const bool protect = uniform(0, 3) > 0;
    const Cycles now = 2;
    PimOutlook pim;
    if (uniform(0, 4) > 0) pim.next = Cmd(CommandType::kPimAct, uniform(0, 1), 0, 0, 100);
    pim.next_earliest = uniform(1, 12);
    pim.ranks_owing_activations = static_cast<uint32_t>(uniform(0, 3));
    std::vector<MemCandidate> offers;
    for (int i = uniform(0, 8); i > 0; --i) {
      MemCandidate c = Request(kTypes[uniform(0, 3)], uniform(0, 5), uniform(0, 4), uniform(0, 1),
                               uniform(0, 3));
      if (uniform(0, 5) == 0) c.queue_index = kRowPolicyQueueIndex;
      offers.push_back(c);
    }
    // The rule, candidate by candidate.
    const MemCandidate* best = nullptr;
    Cycles next_ready = kNeverCycle;
    for (const MemCandidate& c : offers) {
      if (c.cmd.type == CommandType::kAct && OwesPimActivations(pim, c.cmd.rank)) {
        next_ready = std::min(next_ready, pim.next_earliest);  // held, whatever the cycle
        continue;
      }
      Cycles ready = c.earliest;
      if (c.earliest <= now && protect && pim.next.has_value() && pim.next_earliest > now &&
          engine_.EarliestIfIssued(*pim.next, now, c.cmd, now) > pim.next_earliest) {
        ready = pim.next_earliest;
      }
      next_ready = std::min(next_ready, ready);
      if (ready > now) continue;
      const bool before =
          best == nullptr ||
          (c.row_hit != best->row_hit ? c.row_hit : c.queue_index < best->queue_index);
      if (before) best = &c;
    }
    const MemPick pick = Policy(RowPolicy::kOpen, protect)->Pick(offers, now, pim);
    ASSERT_EQ(pick.issue.has_value(), best != nullptr) << "trial " << trial;
    if (best == nullptr) {
      EXPECT_EQ(pick.next_ready, next_ready) << "trial " << trial;
      continue;
    }
    // The reference's offer (the first offered among equals).
    const auto same = [&](const MemCandidate& c) {
      return c.queue_index == pick.issue->queue_index && c.row_hit == pick.issue->row_hit &&
             c.earliest == pick.issue->earliest && c.cmd.type == pick.issue->cmd.type &&
             c.cmd.rank == pick.issue->cmd.rank && c.cmd.bank_group == pick.issue->cmd.bank_group &&
             c.cmd.bank == pick.issue->cmd.bank;
    };
    ASSERT_TRUE(same(*best)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace neupims::hw
