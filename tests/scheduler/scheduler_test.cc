#include "scheduler/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kv_cache/block_manager.h"
#include "scheduler/batching.h"
#include "scheduler/mha_estimator.h"
#include "scheduler/request.h"

namespace neupims::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// MHA estimate = sequence length, so channel loads are sums of context lengths.
class SeqLenEstimator : public MhaEstimator {
 public:
  double Estimate(int64_t seq_len) override { return static_cast<double>(seq_len); }
};

// A scheduler over a real BlockManager with small capacities.
class Harness {
 public:
  Harness(const SchedulerOptions& options, int block_tokens,
          std::vector<int64_t> blocks_per_channel, double watermark = 0.0) {
    kv_cache::BlockManagerOptions ko;
    ko.block_tokens = block_tokens;
    ko.blocks_per_channel = std::move(blocks_per_channel);
    ko.watermark = watermark;
    absl::StatusOr<kv_cache::BlockManager> kv = kv_cache::BlockManager::Create(ko);
    EXPECT_TRUE(kv.ok()) << kv.status();
    kv_ = std::make_unique<kv_cache::BlockManager>(*std::move(kv));
    scheduler_ = std::make_unique<Scheduler>(options, kv_.get(), &estimator_);
  }

  // A request owned by the harness (stable address), not queued yet.
  Request* Make(RequestId id, int64_t prompt, int64_t max_new, SimTime arrival = 0,
                int priority = 0) {
    Request& r = requests_.emplace_back();
    r.id = id;
    r.prompt_tokens = prompt;
    r.max_new_tokens = max_new;
    r.arrival = arrival;
    r.priority = priority;
    return &r;
  }
  Request* Add(RequestId id, int64_t prompt, int64_t max_new, SimTime arrival = 0,
               int priority = 0) {
    Request* r = Make(id, prompt, max_new, arrival, priority);
    const absl::Status s = scheduler_->Add(r);
    EXPECT_TRUE(s.ok()) << s;
    return r;
  }
  // Schedule + CompleteStep at `now`.
  ScheduleOutput Step(SimTime now, std::vector<Request*>* finished = nullptr) {
    ScheduleOutput out = scheduler_->Schedule(now);
    std::vector<Request*> f = scheduler_->CompleteStep(out, now);
    if (finished != nullptr) *finished = std::move(f);
    return out;
  }
  bool AllFree() const {
    return kv_->TotalFreeBlocks() == kv_->TotalBlocks() && kv_->requests() == 0 &&
           kv_->CheckInvariants().ok();
  }

  Scheduler& scheduler() { return *scheduler_; }
  kv_cache::BlockManager& kv() { return *kv_; }

 private:
  SeqLenEstimator estimator_;
  std::unique_ptr<kv_cache::BlockManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::deque<Request> requests_;
};

std::vector<RequestId> Ids(const std::vector<Request*>& rs) {
  std::vector<RequestId> out;
  for (const Request* r : rs) out.push_back(r->id);
  return out;
}

SchedulerOptions RoundRobinOptions() {
  SchedulerOptions o;
  o.channel_policy = ChannelPolicy::kRoundRobin;
  return o;
}

// ---------------------------------------------------------------------------------------------
// Queueing and admission.

TEST(SchedulerAdd, RejectsRequestsThatAreNotWaitingAndDuplicates) {
  Harness h(RoundRobinOptions(), 4, {8});
  Request* r = h.Add(1, 4, 2);
  EXPECT_EQ(h.scheduler().Add(r).code(), absl::StatusCode::kAlreadyExists);
  Request* running = h.Make(2, 4, 2);
  running->state = RequestState::kRunning;
  EXPECT_EQ(h.scheduler().Add(running).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(h.scheduler().waiting(), 1);
}

// Add takes the queue's end as its insert hint: a duplicate anywhere else, and a request that
// belongs before the last one, take the search from the root.
TEST(SchedulerAdd, RefusesADuplicateThatIsNotTheLastQueuedRequest) {
  SchedulerOptions o = RoundRobinOptions();
  o.max_batch = 3;
  Harness h(o, 4, {100});
  Request* first = h.Add(1, 4, 2, /*arrival=*/0);
  h.Add(2, 4, 2, 10);
  h.Add(3, 4, 2, 5);  // before 2 in wait order
  EXPECT_EQ(h.scheduler().Add(first).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(h.scheduler().waiting(), 3);
  EXPECT_THAT(Ids(h.Step(20).prefill), ElementsAre(1, 3, 2));
}

TEST(SchedulerAdmission, AdmitsFcfsByArrivalThenIdUpToMaxBatch) {
  SchedulerOptions o = RoundRobinOptions();
  o.max_batch = 3;
  Harness h(o, 4, {100});
  // Queued out of order; FCFS order is 5 (t=0), 2 (t=10), 4 (t=10, larger id), 3 (t=20), 1.
  h.Add(1, 4, 8, /*arrival=*/30);
  h.Add(2, 4, 8, 10);
  h.Add(3, 4, 8, 20);
  h.Add(4, 4, 8, 10);
  h.Add(5, 4, 8, 0);
  const ScheduleOutput out = h.Step(100);
  EXPECT_THAT(Ids(out.prefill), ElementsAre(5, 2, 4));
  EXPECT_EQ(h.scheduler().waiting(), 2);
  EXPECT_EQ(h.scheduler().running(), 3);
  // The batch is full: the next step decodes the three and admits nobody.
  const ScheduleOutput next = h.Step(200);
  EXPECT_THAT(Ids(next.decode), ElementsAre(5, 2, 4));
  EXPECT_THAT(next.prefill, IsEmpty());
}

TEST(SchedulerAdmission, LowerPriorityValueIsServedFirst) {
  SchedulerOptions o = RoundRobinOptions();
  o.max_batch = 1;
  Harness h(o, 4, {100});
  h.Add(1, 4, 8, /*arrival=*/0, /*priority=*/1);
  h.Add(2, 4, 8, /*arrival=*/5, /*priority=*/0);
  EXPECT_THAT(Ids(h.Step(10).prefill), ElementsAre(2));
}

TEST(SchedulerAdmission, FreedBatchSlotIsReusedNextStep) {
  SchedulerOptions o = RoundRobinOptions();
  o.max_batch = 2;
  Harness h(o, 4, {100});
  Request* a = h.Add(1, 4, /*max_new=*/1, 0);
  h.Add(2, 4, 5, 1);
  h.Add(3, 4, 5, 2);
  std::vector<Request*> finished;
  EXPECT_THAT(Ids(h.Step(10, &finished).prefill), ElementsAre(1, 2));
  EXPECT_THAT(Ids(finished), ElementsAre(1));  // its prefill produced its only token
  EXPECT_EQ(a->state, RequestState::kFinished);
  const ScheduleOutput out = h.Step(20);
  EXPECT_THAT(Ids(out.decode), ElementsAre(2));
  EXPECT_THAT(Ids(out.prefill), ElementsAre(3));
}

TEST(SchedulerAdmission, PrefillTokenBudgetLimitsPromptTokensPerStep) {
  SchedulerOptions o = RoundRobinOptions();
  o.max_prefill_tokens = 100;
  Harness h(o, 4, {1000});
  h.Add(1, 60, 4, 0);
  h.Add(2, 30, 4, 1);
  h.Add(3, 20, 4, 2);  // 60 + 30 + 20 > 100: stops here
  h.Add(4, 5, 4, 3);   // would fit the budget, but FCFS does not skip ahead
  EXPECT_THAT(Ids(h.Step(0).prefill), ElementsAre(1, 2));
  EXPECT_THAT(Ids(h.Step(1).prefill), ElementsAre(3, 4));
}

TEST(SchedulerAdmission, FirstRequestIsAdmittedEvenAboveTheBudget) {
  SchedulerOptions o = RoundRobinOptions();
  o.max_prefill_tokens = 100;
  Harness h(o, 4, {1000});
  h.Add(1, 150, 4, 0);
  h.Add(2, 1, 4, 1);
  EXPECT_THAT(Ids(h.Step(0).prefill), ElementsAre(1));
  EXPECT_THAT(Ids(h.Step(1).prefill), ElementsAre(2));
}

TEST(SchedulerAdmission, HeadOfLineBlocksWhileTheCacheSaysLater) {
  // One channel of 4 blocks of 4 tokens.
  Harness h(RoundRobinOptions(), 4, {4});
  Request* a = h.Add(1, 12, 2, 0);  // 3 blocks
  Request* b = h.Add(2, 8, 2, 1);   // 2 blocks: LATER while a holds 3
  Request* c = h.Add(3, 4, 2, 2);   // 1 block would fit, but must not overtake b
  ScheduleOutput out = h.Step(0);
  EXPECT_THAT(Ids(out.prefill), ElementsAre(1));
  EXPECT_EQ(h.scheduler().waiting(), 2);
  EXPECT_EQ(h.kv().CanAllocate(0, b->context_tokens()), kv_cache::AllocStatus::kLater);
  // a grows into the 4th block (12 prompt tokens + its first token); b still waits.
  std::vector<Request*> finished;
  out = h.Step(1, &finished);
  EXPECT_THAT(Ids(out.decode), ElementsAre(1));
  EXPECT_THAT(out.prefill, IsEmpty());
  EXPECT_THAT(out.rejected, IsEmpty());
  EXPECT_EQ(c->state, RequestState::kWaiting);
  EXPECT_THAT(Ids(finished), ElementsAre(1));  // a is done: 2 tokens
  EXPECT_EQ(a->state, RequestState::kFinished);
  // a's blocks are back: b and c go in, b first.
  out = h.Step(2);
  EXPECT_THAT(Ids(out.prefill), ElementsAre(2, 3));
  EXPECT_TRUE(h.kv().CheckInvariants().ok());
}

TEST(SchedulerAdmission, RequestThatCanNeverFitIsRejected) {
  // Two channels of 4 blocks x 4 tokens: at most 16 tokens per request.
  Harness h(RoundRobinOptions(), 4, {4, 4});
  Request* big = h.Add(1, 17, 1, 0);
  Request* ok = h.Add(2, 16, 1, 1);
  const ScheduleOutput out = h.Step(42);
  EXPECT_THAT(Ids(out.rejected), ElementsAre(1));
  EXPECT_THAT(Ids(out.prefill), ElementsAre(2));  // a rejection does not block the queue
  EXPECT_EQ(big->state, RequestState::kFinished);
  EXPECT_EQ(big->finish_reason, FinishReason::kRejected);
  EXPECT_EQ(big->finished, 42);
  EXPECT_EQ(big->generated, 0);
  EXPECT_THAT(big->error, HasSubstr("5 KV blocks"));
  EXPECT_FALSE(h.kv().Has(1));
  EXPECT_EQ(ok->finish_reason, FinishReason::kLength);
  EXPECT_EQ(h.scheduler().waiting(), 0);
}

TEST(SchedulerAdmission, WatermarkCountsTowardsNever) {
  // 10 blocks with a 20% watermark: admission may use 8.
  Harness h(RoundRobinOptions(), 4, {10}, 0.2);
  Request* nine = h.Add(1, 33, 1, 0);   // 9 blocks
  Request* eight = h.Add(2, 32, 1, 1);  // 8 blocks
  const ScheduleOutput out = h.Step(0);
  EXPECT_THAT(Ids(out.rejected), ElementsAre(1));
  EXPECT_THAT(Ids(out.prefill), ElementsAre(2));
  EXPECT_EQ(nine->finish_reason, FinishReason::kRejected);
  EXPECT_EQ(eight->state, RequestState::kFinished);
}

// ---------------------------------------------------------------------------------------------
// Channel policies.

TEST(SchedulerChannels, MinLoadPutsTheLongestNewRequestOnTheLeastLoadedChannel) {
  SchedulerOptions o;
  o.channel_policy = ChannelPolicy::kMinLoad;
  Harness h(o, 4, {100, 100, 100, 100});
  // Arrival order 10, 40, 20, 30; Algorithm 2 takes them longest first.
  Request* r10 = h.Add(1, 10, 50, 0);
  Request* r40 = h.Add(2, 40, 50, 1);
  Request* r20 = h.Add(3, 20, 50, 2);
  Request* r30 = h.Add(4, 30, 50, 3);
  const ScheduleOutput first = h.Step(0);
  EXPECT_THAT(Ids(first.prefill), ElementsAre(2, 4, 3, 1));
  EXPECT_EQ(r40->channel, 0);
  EXPECT_EQ(r30->channel, 1);
  EXPECT_EQ(r20->channel, 2);
  EXPECT_EQ(r10->channel, 3);
  // Each has produced one token: loads = context lengths 41, 31, 21, 11.
  EXPECT_THAT(h.scheduler().ChannelLoads(), ElementsAre(41, 31, 21, 11));
  // New requests 5 and 25: 25 goes first, to channel 3 (11 -> 36), then 5 to channel 2
  // (21 -> 26).
  Request* r5 = h.Add(5, 5, 50, 10);
  Request* r25 = h.Add(6, 25, 50, 11);
  const ScheduleOutput second = h.scheduler().Schedule(1);
  EXPECT_THAT(Ids(second.prefill), ElementsAre(6, 5));
  EXPECT_EQ(r25->channel, 3);
  EXPECT_EQ(r5->channel, 2);
  EXPECT_THAT(h.scheduler().ChannelLoads(), ElementsAre(41, 31, 26, 36));
}

TEST(SchedulerChannels, MinLoadSkipsAChannelWithoutRoom) {
  SchedulerOptions o;
  o.channel_policy = ChannelPolicy::kMinLoad;
  // Channel 0 holds only 2 blocks; channel 1 holds 100.
  Harness h(o, 4, {2, 100});
  Request* big = h.Add(1, 40, 50, 0);  // 10 blocks: only channel 1
  Request* small = h.Add(2, 4, 50, 1);
  h.Step(0);
  EXPECT_EQ(big->channel, 1);
  EXPECT_EQ(small->channel, 0);
}

TEST(SchedulerChannels, RoundRobinRotatesAcrossStepsAndSkipsFullChannels) {
  // Channel 0 holds one block; 3-token prompts leave room for one more token.
  Harness h(RoundRobinOptions(), 4, {1, 10, 10});
  Request* a = h.Add(1, 3, 50, 0);
  Request* b = h.Add(2, 3, 50, 1);
  h.Step(0);
  EXPECT_EQ(a->channel, 0);
  EXPECT_EQ(b->channel, 1);
  Request* c = h.Add(3, 3, 50, 2);
  Request* d = h.Add(4, 3, 50, 3);
  Request* e = h.Add(5, 3, 50, 4);
  const ScheduleOutput out = h.Step(1);
  EXPECT_THAT(Ids(out.preempted), IsEmpty());
  // Cursor at 2: c -> 2; d -> 0 is full, skipped -> 1; e -> 2.
  EXPECT_EQ(c->channel, 2);
  EXPECT_EQ(d->channel, 1);
  EXPECT_EQ(e->channel, 2);
}

// ---------------------------------------------------------------------------------------------
// Preemption (recompute).

TEST(SchedulerPreemption, EvictsTheMostRecentlyArrivedRequestOfTheFullChannel) {
  // Channel 0: 2 blocks; channel 1: 8 blocks; 4 tokens per block.
  Harness h(RoundRobinOptions(), 4, {2, 8});
  Request* a = h.Add(1, 4, 4, 0);  // ch0, 1 block, full: its next token needs a block
  Request* b = h.Add(2, 4, 4, 1);  // ch1
  Request* c = h.Add(3, 3, 4, 2);  // ch0, 1 block
  ScheduleOutput out = h.Step(0);
  ASSERT_EQ(a->channel, 0);
  ASSERT_EQ(b->channel, 1);
  ASSERT_EQ(c->channel, 0);
  Request* d = h.Add(4, 4, 4, 3);  // would fit channel 1 right away

  out = h.Step(1);
  // a needs a second block; channel 0 is full; c arrived last there and is evicted.
  EXPECT_THAT(Ids(out.preempted), ElementsAre(3));
  EXPECT_THAT(Ids(out.decode), ElementsAre(1, 2));
  EXPECT_THAT(out.prefill, IsEmpty());  // no admissions in a step that preempted
  EXPECT_EQ(d->state, RequestState::kWaiting);
  EXPECT_EQ(c->state, RequestState::kWaiting);
  EXPECT_EQ(c->preemptions, 1);
  EXPECT_EQ(c->channel, -1);
  EXPECT_TRUE(c->needs_prefill);
  EXPECT_EQ(c->generated, 1);  // tokens already produced are kept (recompute)
  EXPECT_FALSE(h.kv().Has(3));
  EXPECT_EQ(h.kv().TokensOf(1), 5);
  EXPECT_EQ(h.scheduler().waiting(), 2);
  EXPECT_TRUE(h.kv().CheckInvariants().ok());

  // Next step c is re-admitted with prompt + generated = 4 tokens, before d (arrival order).
  out = h.Step(2);
  EXPECT_THAT(Ids(out.prefill), ElementsAre(3, 4));
  EXPECT_EQ(c->channel, 1);  // channel 0 is still full
  EXPECT_EQ(h.kv().TokensOf(3), 4);

  // Everyone finishes; nothing is lost.
  auto all_done = [&] { return a->terminal() && b->terminal() && c->terminal() && d->terminal(); };
  for (SimTime t = 3; t < 50 && !all_done(); ++t) {
    h.Step(t);
    ASSERT_TRUE(h.kv().CheckInvariants().ok());
  }
  for (Request* r : {a, b, c, d}) {
    EXPECT_EQ(r->state, RequestState::kFinished) << r->id;
    EXPECT_EQ(r->generated, r->max_new_tokens) << r->id;
  }
  EXPECT_EQ(c->preemptions, 1);
  EXPECT_TRUE(h.AllFree());
}

TEST(SchedulerPreemption, TheYoungestRequestEvictsItself) {
  Harness h(RoundRobinOptions(), 4, {2});
  Request* a = h.Add(1, 3, 4, 0);  // room for one more token in its block
  Request* c = h.Add(2, 4, 4, 1);  // its block is full
  h.Step(0);
  const ScheduleOutput out = h.Step(1);
  EXPECT_THAT(Ids(out.preempted), ElementsAre(2));
  EXPECT_THAT(Ids(out.decode), ElementsAre(1));
  EXPECT_EQ(a->generated, 2);
  EXPECT_EQ(c->state, RequestState::kWaiting);
  EXPECT_EQ(c->preemptions, 1);
  EXPECT_TRUE(h.kv().CheckInvariants().ok());
}

// Regression: a victim that already reserved its slot earlier in the same step leaves the
// decode list when it is preempted.
TEST(SchedulerPreemption, VictimAlreadyScheduledThisStepLeavesTheDecodeList) {
  SchedulerOptions o = RoundRobinOptions();
  o.sub_batches = false;
  Harness h(o, 4, {3});  // one channel of 3 blocks
  Request* low = h.Add(1, 4, 10, /*arrival=*/0, /*priority=*/1);
  h.Step(0);  // low: 1 block
  Request* high = h.Add(2, 3, 10, /*arrival=*/1, /*priority=*/0);
  h.Step(1);  // low grows to 2 blocks; high admitted (1 block): the channel is full
  h.Step(2);  // both fit in their last blocks
  // Step 3: low (admitted first) appends into its block; high needs a new block; the victim is
  // low (priority 1 is served last), which is already in out.decode.
  const ScheduleOutput out = h.scheduler().Schedule(3);
  EXPECT_THAT(Ids(out.preempted), ElementsAre(1));
  EXPECT_EQ(low->state, RequestState::kWaiting);
  for (const Request* r : out.decode) {
    EXPECT_EQ(r->state, RequestState::kRunning) << r->id;
    EXPECT_GE(r->channel, 0) << r->id;
    EXPECT_TRUE(h.kv().Has(r->id)) << r->id;
  }
  EXPECT_THAT(Ids(out.decode), ElementsAre(2));
  EXPECT_THAT(Ids(out.sub_batch[0]), ElementsAre(2));
  (void)high;
}

// ---------------------------------------------------------------------------------------------
// Standalone prefill, abort, completion, sub-batches.

TEST(SchedulerStandalonePrefill, AdmittedRequestsPrefillElsewhereThenDecode) {
  SchedulerOptions o = RoundRobinOptions();
  o.standalone_prefill = true;
  Harness h(o, 4, {10, 10});
  Request* a = h.Add(1, 6, 3, 0);
  Request* b = h.Add(2, 6, 1, 1);
  ScheduleOutput out = h.Step(0);  // CompleteStep produces nothing for standalone prefills
  EXPECT_THAT(Ids(out.prefill), ElementsAre(1, 2));
  EXPECT_EQ(a->state, RequestState::kPrefilling);
  EXPECT_EQ(b->state, RequestState::kPrefilling);
  EXPECT_EQ(a->generated, 0);
  EXPECT_EQ(a->first_admitted, 0);
  EXPECT_EQ(h.scheduler().prefilling(), 2);
  EXPECT_EQ(h.scheduler().running(), 2);  // running() counts prefilling requests
  EXPECT_TRUE(h.kv().Has(1));

  out = h.Step(5);  // nothing decodes while the prefills are out
  EXPECT_THAT(out.decode, IsEmpty());
  EXPECT_FALSE(out.has_work());

  ASSERT_TRUE(h.scheduler().PrefillDone(a, 7).ok());
  EXPECT_EQ(a->state, RequestState::kRunning);
  EXPECT_EQ(a->generated, 1);
  EXPECT_EQ(a->first_token, 7);
  EXPECT_EQ(a->last_token, 7);
  EXPECT_EQ(h.scheduler().prefilling(), 1);
  EXPECT_EQ(h.scheduler().PrefillDone(a, 8).code(), absl::StatusCode::kFailedPrecondition);

  // A one-token request finishes with its prefill.
  ASSERT_TRUE(h.scheduler().PrefillDone(b, 8).ok());
  EXPECT_EQ(b->state, RequestState::kFinished);
  EXPECT_EQ(b->finish_reason, FinishReason::kLength);
  EXPECT_FALSE(h.kv().Has(2));
  EXPECT_EQ(h.scheduler().prefilling(), 0);

  out = h.Step(10);
  EXPECT_THAT(Ids(out.decode), ElementsAre(1));
  EXPECT_EQ(a->generated, 2);
  std::vector<Request*> finished;
  h.Step(20, &finished);
  EXPECT_THAT(Ids(finished), ElementsAre(1));
  EXPECT_TRUE(h.AllFree());
}

TEST(SchedulerAbort, FreesKvFromEveryState) {
  SchedulerOptions o = RoundRobinOptions();
  o.standalone_prefill = true;
  o.max_batch = 3;
  Harness h(o, 4, {10, 10});
  Request* running = h.Add(1, 8, 10, 0);
  Request* prefilling = h.Add(2, 8, 10, 1);
  Request* decoding_soon = h.Add(3, 8, 10, 2);
  Request* waiting = h.Add(4, 8, 10, 3);  // beyond max_batch
  h.Step(0);
  ASSERT_TRUE(h.scheduler().PrefillDone(running, 1).ok());
  ASSERT_EQ(running->state, RequestState::kRunning);
  ASSERT_EQ(prefilling->state, RequestState::kPrefilling);
  ASSERT_EQ(waiting->state, RequestState::kWaiting);
  const int64_t total = h.kv().TotalBlocks();
  EXPECT_EQ(h.kv().TotalFreeBlocks(), total - 6);

  ASSERT_TRUE(h.scheduler().Abort(waiting).ok());
  EXPECT_EQ(waiting->state, RequestState::kAborted);
  EXPECT_EQ(waiting->finish_reason, FinishReason::kAborted);
  EXPECT_EQ(h.scheduler().waiting(), 0);

  ASSERT_TRUE(h.scheduler().Abort(prefilling).ok());
  EXPECT_EQ(prefilling->state, RequestState::kAborted);
  EXPECT_FALSE(h.kv().Has(2));
  EXPECT_EQ(h.scheduler().prefilling(), 1);
  EXPECT_EQ(h.kv().TotalFreeBlocks(), total - 4);
  EXPECT_TRUE(h.kv().CheckInvariants().ok());

  const int channel = running->channel;
  ASSERT_GE(channel, 0);
  ASSERT_TRUE(h.scheduler().Abort(running).ok());
  EXPECT_EQ(running->state, RequestState::kAborted);
  EXPECT_EQ(running->channel, channel);  // kept: the channel that held its KV cache
  EXPECT_FALSE(h.kv().Has(1));
  EXPECT_EQ(h.kv().TotalFreeBlocks(), total - 2);
  EXPECT_TRUE(h.kv().CheckInvariants().ok());

  ASSERT_TRUE(h.scheduler().Abort(decoding_soon).ok());
  EXPECT_EQ(h.scheduler().running(), 0);
  EXPECT_EQ(h.scheduler().prefilling(), 0);
  EXPECT_TRUE(h.AllFree());

  // Ended requests cannot be aborted again.
  EXPECT_EQ(h.scheduler().Abort(running).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(running->state, RequestState::kAborted);
  // Aborting after an abort leaves nothing to decode.
  EXPECT_FALSE(h.scheduler().Schedule(5).has_work());
}

TEST(SchedulerAbort, FinishedRequestCannotBeAborted) {
  Harness h(RoundRobinOptions(), 4, {10});
  Request* r = h.Add(1, 4, 1, 0);
  h.Step(0);
  ASSERT_EQ(r->state, RequestState::kFinished);
  EXPECT_EQ(h.scheduler().Abort(r).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r->state, RequestState::kFinished);
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
}

// The token list: one entry per produced token, decodes before local prefills, each with the
// request's `generated` before the token; what was in the list stays in front of it.
TEST(SchedulerCompleteStep, ListsEachProducedTokenWithItsIndexDecodesFirst) {
  Harness h(RoundRobinOptions(), 4, {10, 10});
  Request* a = h.Add(1, 5, 3, 0);
  h.Step(10);  // a prefilled locally: its first token
  Request* b = h.Add(2, 5, 1, 0);
  const ScheduleOutput out = h.scheduler().Schedule(20);
  ASSERT_THAT(Ids(out.decode), ElementsAre(1));
  ASSERT_THAT(Ids(out.prefill), ElementsAre(2));
  std::vector<std::pair<Request*, int64_t>> tokens = {{nullptr, -7}};
  const std::vector<Request*> finished = h.scheduler().CompleteStep(out, 20, &tokens);
  EXPECT_THAT(tokens,
              ElementsAre(std::pair<Request*, int64_t>(nullptr, -7),
                          std::pair<Request*, int64_t>(a, 1), std::pair<Request*, int64_t>(b, 0)));
  EXPECT_THAT(Ids(finished), ElementsAre(2));
  EXPECT_EQ(a->generated, 2);
}

// A request aborted between Schedule and CompleteStep produces no token and is not listed.
TEST(SchedulerCompleteStep, ListsNoTokenForARequestAbortedAfterSchedule) {
  Harness h(RoundRobinOptions(), 4, {10, 10});
  Request* a = h.Add(1, 5, 3, 0);
  Request* b = h.Add(2, 5, 3, 0);
  h.Step(10);
  const ScheduleOutput out = h.scheduler().Schedule(20);
  ASSERT_THAT(Ids(out.decode), ElementsAre(1, 2));
  ASSERT_TRUE(h.scheduler().Abort(a).ok());
  std::vector<std::pair<Request*, int64_t>> tokens;
  h.scheduler().CompleteStep(out, 20, &tokens);
  EXPECT_THAT(tokens, ElementsAre(std::pair<Request*, int64_t>(b, 1)));
  EXPECT_EQ(a->generated, 1);
}

// Standalone prefills produce their first token when the prefill is done, not in the step.
TEST(SchedulerCompleteStep, ListsNoTokenForStandalonePrefills) {
  SchedulerOptions o = RoundRobinOptions();
  o.standalone_prefill = true;
  Harness h(o, 4, {10, 10});
  h.Add(1, 6, 3, 0);
  const ScheduleOutput out = h.scheduler().Schedule(0);
  ASSERT_THAT(Ids(out.prefill), ElementsAre(1));
  std::vector<std::pair<Request*, int64_t>> tokens;
  h.scheduler().CompleteStep(out, 0, &tokens);
  EXPECT_THAT(tokens, IsEmpty());
}

std::vector<std::pair<RequestId, SimTime>> Others(const StepGaps& gaps) {
  std::vector<std::pair<RequestId, SimTime>> out;
  for (const StepGap& g : gaps.others) out.emplace_back(g.request->id, g.previous);
  return out;
}

// Tokens whose request's previous token was at the previous step's time are only counted (they
// share one gap); first tokens and tokens after a gap of another length are listed with their
// previous token's time, in the step's token order.
TEST(SchedulerCompleteStep, StepGapsCountTokensThatContinueFromThePreviousStep) {
  Harness h(RoundRobinOptions(), 4, {10, 10});
  h.Add(1, 5, 4, 0);
  h.Add(2, 5, 4, 0);
  h.Step(10);  // both prefilled locally: first tokens
  StepGaps gaps = h.scheduler().step_gaps();
  EXPECT_EQ(gaps.continuing, 0);
  EXPECT_THAT(Others(gaps), ElementsAre(std::pair<RequestId, SimTime>(1, kNoTime),
                                        std::pair<RequestId, SimTime>(2, kNoTime)));
  h.Add(3, 5, 4, 0);
  h.Step(20);  // 1 and 2 decode, 3 is prefilled
  gaps = h.scheduler().step_gaps();
  EXPECT_EQ(gaps.previous, 10);
  EXPECT_EQ(gaps.continuing, 2);
  EXPECT_THAT(Others(gaps), ElementsAre(std::pair<RequestId, SimTime>(3, kNoTime)));
  h.Step(35);
  gaps = h.scheduler().step_gaps();
  EXPECT_EQ(gaps.previous, 20);
  EXPECT_EQ(gaps.continuing, 3);
  EXPECT_THAT(Others(gaps), IsEmpty());
  EXPECT_EQ(static_cast<int64_t>(h.scheduler().step_tokens().size()), 3);
}

// With the token list off, step_tokens() is empty and step_gaps() counts the same tokens; a
// caller's `tokens` still gets them.
TEST(SchedulerCompleteStep, WithoutTheTokenListTheGapsStillCountEveryToken) {
  Harness listed(RoundRobinOptions(), 4, {10, 10});
  Harness counted(RoundRobinOptions(), 4, {10, 10});
  counted.scheduler().set_list_step_tokens(false);
  for (Harness* h : {&listed, &counted}) {
    h->Add(1, 5, 4, 0);
    h->Add(2, 5, 2, 0);
  }
  for (SimTime now : {10, 20, 35, 50}) {
    SCOPED_TRACE(now);
    if (now == 20) {
      for (Harness* h : {&listed, &counted}) h->Add(3, 5, 4, 0);
    }
    listed.Step(now);
    counted.Step(now);
    const StepGaps a = listed.scheduler().step_gaps(), b = counted.scheduler().step_gaps();
    EXPECT_EQ(a.previous, b.previous);
    EXPECT_EQ(a.continuing, b.continuing);
    EXPECT_EQ(Others(a), Others(b));
    EXPECT_EQ(a.continuing + static_cast<int64_t>(a.others.size()),
              static_cast<int64_t>(listed.scheduler().step_tokens().size()));
    EXPECT_THAT(counted.scheduler().step_tokens(), IsEmpty());
  }
  std::vector<StepToken> tokens;
  counted.scheduler().CompleteStep(counted.scheduler().Schedule(60), 60, &tokens);
  ASSERT_EQ(tokens.size(), 1u);  // 1 and 2 are done; 3's fourth token, index 3
  EXPECT_EQ(tokens[0].first->id, 3);
  EXPECT_EQ(tokens[0].second, 3);
}

// A standalone prefill's token comes between steps: the request's next token is listed with the
// prefill's time, and continues the common gap from the step after on.
TEST(SchedulerCompleteStep, StepGapsListTheFirstDecodeAfterAStandalonePrefill) {
  SchedulerOptions o = RoundRobinOptions();
  o.standalone_prefill = true;
  Harness h(o, 4, {10, 10});
  Request* a = h.Add(1, 6, 4, 0);
  h.Step(0);  // a prefills elsewhere
  ASSERT_TRUE(h.scheduler().PrefillDone(a, 5).ok());
  h.Step(10);
  StepGaps gaps = h.scheduler().step_gaps();
  EXPECT_EQ(gaps.continuing, 0);
  EXPECT_THAT(Others(gaps), ElementsAre(std::pair<RequestId, SimTime>(1, 5)));
  EXPECT_EQ(a->first_token, 5);
  h.Step(20);
  gaps = h.scheduler().step_gaps();
  EXPECT_EQ(gaps.previous, 10);
  EXPECT_EQ(gaps.continuing, 1);
  EXPECT_THAT(Others(gaps), IsEmpty());
  EXPECT_EQ(a->last_token, 20);
}

TEST(SchedulerCompleteStep, FinishesRequestsAtMaxNewTokensAndFreesTheirBlocks) {
  Harness h(RoundRobinOptions(), 4, {10, 10});
  Request* a = h.Add(1, 5, 3, 0);
  Request* b = h.Add(2, 5, 1, 0);
  std::vector<Request*> finished;
  h.Step(10, &finished);
  EXPECT_THAT(Ids(finished), ElementsAre(2));
  EXPECT_EQ(b->state, RequestState::kFinished);
  EXPECT_EQ(b->finish_reason, FinishReason::kLength);
  EXPECT_EQ(b->generated, 1);
  EXPECT_EQ(b->first_token, 10);
  EXPECT_EQ(b->finished, 10);
  EXPECT_FALSE(h.kv().Has(2));
  EXPECT_EQ(a->generated, 1);
  EXPECT_EQ(a->first_token, 10);

  h.Step(20, &finished);
  EXPECT_THAT(finished, IsEmpty());
  EXPECT_EQ(a->generated, 2);
  EXPECT_EQ(h.kv().TokensOf(1), 6);  // 5 prompt + the token produced at t=10

  h.Step(30, &finished);
  EXPECT_THAT(Ids(finished), ElementsAre(1));
  EXPECT_EQ(a->generated, 3);
  EXPECT_EQ(a->first_token, 10);
  EXPECT_EQ(a->last_token, 30);
  EXPECT_EQ(a->finished, 30);
  EXPECT_EQ(h.scheduler().running(), 0);
  EXPECT_TRUE(h.AllFree());
}

TEST(SchedulerSubBatches, PartitionTheDecodeListPerChannel) {
  Harness h(RoundRobinOptions(), 4, {100, 100});
  for (int i = 1; i <= 5; ++i) h.Add(i, 4, 10, i);  // ch 0,1,0,1,0
  h.Step(0);
  const ScheduleOutput out = h.Step(1);
  EXPECT_THAT(Ids(out.decode), ElementsAre(1, 2, 3, 4, 5));
  // ch0 [1 3 5] (odd, ceil) -> SB1 1 3 | SB2 5;  ch1 [2 4] -> SB1 2 | SB2 4.
  EXPECT_THAT(Ids(out.sub_batch[0]), ElementsAre(1, 3, 2));
  EXPECT_THAT(Ids(out.sub_batch[1]), ElementsAre(5, 4));
}

TEST(SchedulerSubBatches, WithoutSubBatchesEverythingIsSubBatchZero) {
  SchedulerOptions o = RoundRobinOptions();
  o.sub_batches = false;
  Harness h(o, 4, {100, 100});
  for (int i = 1; i <= 5; ++i) h.Add(i, 4, 10, i);
  h.Step(0);
  const ScheduleOutput out = h.Step(1);
  EXPECT_THAT(Ids(out.sub_batch[0]), ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(out.sub_batch[1], IsEmpty());
}

TEST(SchedulerSubBatches, SmallDecodeBatchesAreNotSplitBelowTheMinimum) {
  SchedulerOptions o = RoundRobinOptions();
  o.sub_batch_min_decode = 6;
  Harness h(o, 4, {100, 100});
  for (int i = 1; i <= 5; ++i) h.Add(i, 4, 10, i);
  h.Step(0);
  ScheduleOutput out = h.Step(1);
  EXPECT_THAT(Ids(out.sub_batch[0]), ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(out.sub_batch[1], IsEmpty());
  h.Add(6, 4, 10, 6);
  h.Step(2);  // 6 is prefilled
  out = h.Step(3);
  EXPECT_EQ(out.sub_batch[0].size(), 3u);
  EXPECT_EQ(out.sub_batch[1].size(), 3u);
}

// ---------------------------------------------------------------------------------------------
// Randomized invariants.

// The randomized tests' draws: an integer in [lo, hi], and true with probability p.
int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool Chance(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}

// Small random scheduler options for the randomized tests (a batch of 3-10, 12-60 prefill
// tokens; the channel policy, standalone prefill and sub-batches by the seed).
SchedulerOptions RandomSmallOptions(uint64_t seed, std::mt19937_64& rng) {
  SchedulerOptions o;
  o.max_batch = static_cast<int>(Uniform(rng, 3, 10));
  o.max_prefill_tokens = Uniform(rng, 12, 60);
  o.channel_policy = seed % 2 == 0 ? ChannelPolicy::kMinLoad : ChannelPolicy::kRoundRobin;
  o.standalone_prefill = seed % 3 == 0;
  o.sub_batches = seed % 2 == 1;
  return o;
}

// Three channels of 5-9 KV blocks each: small enough that preemptions and rejections happen.
std::vector<int64_t> RandomChannelCaps(std::mt19937_64& rng) {
  std::vector<int64_t> caps;
  for (int c = 0; c < 3; ++c) caps.push_back(std::uniform_int_distribution<int64_t>(5, 9)(rng));
  return caps;
}

// Random arrivals, aborts and steps on a small KV cache (preemptions and rejections happen).
// After every step: the block manager is consistent, every submitted request is in exactly one
// place (the scheduler's counts match the request states, KV is held exactly by admitted
// requests), and KV holds what each request's progress says. At the end everything is free.
// Half the seeds partition sub-batches as well.
TEST(SchedulerRandomized, InvariantsHoldUnderRandomArrivalsAbortsAndSteps) {
  for (uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    SchedulerOptions o = RandomSmallOptions(seed, rng);
    const std::vector<int64_t> caps = RandomChannelCaps(rng);
    Harness h(o, 4, caps, seed % 4 == 0 ? 0.15 : 0.0);

    constexpr int kRequests = 60;
    std::vector<Request*> submitted;
    int64_t preemptions = 0;
    SimTime now = 0;
    for (int step = 0; step < 20000; ++step) {
      // Arrivals.
      if (static_cast<int>(submitted.size()) < kRequests && Chance(rng, 0.4)) {
        const int n = static_cast<int>(Uniform(rng, 1, 3));
        for (int k = 0; k < n && static_cast<int>(submitted.size()) < kRequests; ++k) {
          submitted.push_back(h.Add(static_cast<RequestId>(submitted.size()), Uniform(rng, 1, 24),
                                    Uniform(rng, 1, 16), now));
        }
      }
      // Aborts.
      if (!submitted.empty() && Chance(rng, 0.04)) {
        Request* r = submitted[Uniform(rng, 0, static_cast<int64_t>(submitted.size()) - 1)];
        const bool ended = r->terminal();
        const absl::Status s = h.scheduler().Abort(r);
        if (ended) {
          EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
        } else {
          EXPECT_TRUE(s.ok()) << s;
          EXPECT_EQ(r->state, RequestState::kAborted);
        }
      }
      const ScheduleOutput out = h.scheduler().Schedule(now);
      preemptions += static_cast<int64_t>(out.preempted.size());
      for (const Request* r : out.prefill) {
        EXPECT_TRUE(r->state == RequestState::kRunning || r->state == RequestState::kPrefilling);
        EXPECT_TRUE(h.kv().Has(r->id));
      }
      for (const Request* r : out.rejected) {
        EXPECT_EQ(r->finish_reason, FinishReason::kRejected);
        EXPECT_FALSE(r->error.empty());
      }
      // Standalone prefills finish at random times.
      if (o.standalone_prefill) {
        for (Request* r : submitted) {
          if (r->state == RequestState::kPrefilling && Chance(rng, 0.5)) {
            ASSERT_TRUE(h.scheduler().PrefillDone(r, now).ok());
          }
        }
      }
      h.scheduler().CompleteStep(out, now);
      ++now;

      // Invariants.
      const absl::Status inv = h.kv().CheckInvariants();
      ASSERT_TRUE(inv.ok()) << inv;
      int64_t waiting = 0, running = 0, prefilling = 0, terminal = 0;
      for (const Request* r : submitted) {
        switch (r->state) {
          case RequestState::kWaiting:
            ++waiting;
            EXPECT_FALSE(h.kv().Has(r->id)) << r->id;
            EXPECT_EQ(r->channel, -1) << r->id;
            break;
          case RequestState::kPrefilling:
            ++prefilling;
            EXPECT_EQ(h.kv().TokensOf(r->id), r->context_tokens()) << r->id;
            EXPECT_EQ(h.kv().ChannelOf(r->id), r->channel) << r->id;
            break;
          case RequestState::kRunning:
            ++running;
            // The newest token's KV slot is reserved by the next step.
            EXPECT_EQ(h.kv().TokensOf(r->id), r->context_tokens() - 1) << r->id;
            EXPECT_EQ(h.kv().ChannelOf(r->id), r->channel) << r->id;
            break;
          case RequestState::kFinished:
            ++terminal;
            EXPECT_FALSE(h.kv().Has(r->id)) << r->id;
            if (r->finish_reason == FinishReason::kLength) {
              EXPECT_EQ(r->generated, r->max_new_tokens) << r->id;
            } else {
              EXPECT_EQ(r->finish_reason, FinishReason::kRejected) << r->id;
            }
            break;
          case RequestState::kAborted:
            ++terminal;
            EXPECT_FALSE(h.kv().Has(r->id)) << r->id;
            EXPECT_EQ(r->finish_reason, FinishReason::kAborted) << r->id;
            break;
        }
        EXPECT_LE(r->generated, r->max_new_tokens) << r->id;
      }
      ASSERT_EQ(waiting + running + prefilling + terminal, static_cast<int64_t>(submitted.size()));
      ASSERT_EQ(h.scheduler().waiting(), waiting);
      ASSERT_EQ(h.scheduler().running(), running + prefilling);
      ASSERT_EQ(h.scheduler().prefilling(), prefilling);
      ASSERT_EQ(h.kv().requests(), running + prefilling);
      ASSERT_LE(running + prefilling, o.max_batch);
      // The KV cache's decode stream holds exactly the decoding requests (aborts, preemptions
      // and finishes take them out, prefills that completed put them in).
      int64_t decoding = 0;
      for (const Request* r : submitted) {
        const bool decodes = r->state == RequestState::kRunning && !r->needs_prefill;
        decoding += decodes ? 1 : 0;
        ASSERT_EQ(h.kv().Streaming(r->id), decodes) << r->id;
      }
      ASSERT_EQ(h.kv().streaming(), decoding);
      const absl::Status listed = h.scheduler().CheckInvariants();
      ASSERT_TRUE(listed.ok()) << listed;
      if (static_cast<int>(submitted.size()) == kRequests && terminal == kRequests) break;
    }
    int64_t finished = 0;
    for (const Request* r : submitted) {
      EXPECT_TRUE(r->terminal()) << r->id;
      if (r->finish_reason == FinishReason::kLength) ++finished;
    }
    EXPECT_EQ(static_cast<int>(submitted.size()), kRequests);
    EXPECT_GT(finished, 0);
    EXPECT_GT(preemptions, 0) << "the cache is meant to be too small";
    EXPECT_TRUE(h.AllFree());
    EXPECT_EQ(h.scheduler().waiting(), 0);
    EXPECT_EQ(h.scheduler().running(), 0);
  }
}

// The scheduler splits the decode list from per-channel lists it keeps as requests start and
// stop decoding (PartitionByChannel). Under random arrivals, aborts, standalone prefills
// finishing and preemptions (a small cache, four channels), every step's sub-batches are
// Algorithm 3 over that step's decode list (PartitionSubBatchesByChannel), and the kept lists
// pass CheckInvariants.
TEST(SchedulerPartition, SubBatchesAreAlgorithm3OverTheDecodeListEveryStep) {
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    SchedulerOptions o = RandomSmallOptions(seed, rng);
    o.sub_batches = true;
    o.sub_batch_min_decode = Uniform(rng, 0, 2);
    std::vector<int64_t> caps = RandomChannelCaps(rng);
    caps.push_back(Uniform(rng, 5, 9));
    Harness h(o, 4, caps);
    std::vector<Request*> submitted;
    int64_t preemptions = 0, partitioned = 0;
    for (SimTime now = 0; now < 3000; ++now) {
      if (submitted.size() < 80 && Chance(rng, 0.4)) {
        submitted.push_back(h.Add(static_cast<RequestId>(submitted.size()), Uniform(rng, 1, 24),
                                  Uniform(rng, 1, 16), now));
      }
      if (!submitted.empty() && Chance(rng, 0.05)) {
        Request* r = submitted[Uniform(rng, 0, static_cast<int64_t>(submitted.size()) - 1)];
        if (!r->terminal()) {
          ASSERT_TRUE(h.scheduler().Abort(r).ok());
        }
      }
      const ScheduleOutput out = h.scheduler().Schedule(now);
      preemptions += static_cast<int64_t>(out.preempted.size());
      if (static_cast<int64_t>(out.decode.size()) >= o.sub_batch_min_decode) {
        std::vector<Request*> first, second;
        std::vector<size_t> scratch;
        PartitionSubBatchesByChannel(
            out.decode, h.kv().channels(), [](const Request* r) { return r->channel; },
            [](Request*, int) {}, &first, &second, &scratch);
        ASSERT_EQ(Ids(out.sub_batch[0]), Ids(first));
        ASSERT_EQ(Ids(out.sub_batch[1]), Ids(second));
        partitioned += out.sub_batch[1].empty() ? 0 : 1;
      }
      if (o.standalone_prefill) {
        for (Request* r : submitted) {
          if (r->state == RequestState::kPrefilling && Chance(rng, 0.5)) {
            ASSERT_TRUE(h.scheduler().PrefillDone(r, now).ok());
          }
        }
      }
      h.scheduler().CompleteStep(out, now);
      const absl::Status inv = h.scheduler().CheckInvariants();
      ASSERT_TRUE(inv.ok()) << inv;
    }
    EXPECT_GT(preemptions, 0) << "the cache is meant to be too small";
    EXPECT_GT(partitioned, 100);
  }
}

std::vector<std::pair<RequestId, int64_t>> TokenIds(absl::Span<const StepToken> tokens) {
  std::vector<std::pair<RequestId, int64_t>> out;
  for (const auto& [r, index] : tokens) out.emplace_back(r->id, index);
  return out;
}

// The engine schedules every step into one reused ScheduleOutput, whose lists keep their
// previous contents until they are overwritten and cut to length. Two schedulers driven alike
// (random arrivals, aborts, standalone prefills finishing; preemptions on a small cache), one
// into a reused output and one into a fresh output each step, give the same lists and tokens.
TEST(SchedulerReusedOutput, EqualsAFreshOutputEveryStep) {
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    SchedulerOptions o = RandomSmallOptions(seed, rng);
    o.sub_batch_min_decode = Uniform(rng, 0, 3);  // both branches of step 4 on one output
    const std::vector<int64_t> caps = RandomChannelCaps(rng);
    Harness reused(o, 4, caps), fresh(o, 4, caps);
    ScheduleOutput out;
    std::vector<Request*> a, b;  // the same requests in `reused` and `fresh`
    int64_t preemptions = 0, steps = 0;
    for (SimTime now = 0; now < 3000; ++now) {
      if (a.size() < 60 && Chance(rng, 0.4)) {
        const int64_t prompt = Uniform(rng, 1, 24), max_new = Uniform(rng, 1, 16);
        const RequestId id = static_cast<RequestId>(a.size());
        a.push_back(reused.Add(id, prompt, max_new, now));
        b.push_back(fresh.Add(id, prompt, max_new, now));
      }
      if (!a.empty() && Chance(rng, 0.04)) {
        const size_t k = static_cast<size_t>(Uniform(rng, 0, static_cast<int64_t>(a.size()) - 1));
        EXPECT_EQ(reused.scheduler().Abort(a[k]).code(), fresh.scheduler().Abort(b[k]).code());
      }
      reused.scheduler().Schedule(now, &out);
      const ScheduleOutput expected = fresh.scheduler().Schedule(now);
      ASSERT_EQ(Ids(out.prefill), Ids(expected.prefill));
      ASSERT_EQ(Ids(out.decode), Ids(expected.decode));
      ASSERT_EQ(Ids(out.preempted), Ids(expected.preempted));
      ASSERT_EQ(Ids(out.rejected), Ids(expected.rejected));
      for (int s = 0; s < 2; ++s) ASSERT_EQ(Ids(out.sub_batch[s]), Ids(expected.sub_batch[s]));
      preemptions += static_cast<int64_t>(out.preempted.size());
      if (o.standalone_prefill) {
        for (size_t k = 0; k < a.size(); ++k) {
          if (a[k]->state == RequestState::kPrefilling && Chance(rng, 0.5)) {
            ASSERT_TRUE(reused.scheduler().PrefillDone(a[k], now).ok());
            ASSERT_TRUE(fresh.scheduler().PrefillDone(b[k], now).ok());
          }
        }
      }
      reused.scheduler().CompleteStep(out, now);
      fresh.scheduler().CompleteStep(expected, now);
      ASSERT_EQ(TokenIds(reused.scheduler().step_tokens()),
                TokenIds(fresh.scheduler().step_tokens()));
      const absl::Status invariants = reused.scheduler().CheckInvariants();
      ASSERT_TRUE(invariants.ok()) << invariants;
      ++steps;
    }
    EXPECT_GT(preemptions, 0) << "the cache is meant to be too small";
    EXPECT_GT(steps, 0);
  }
}

// step_tokens() holds the last step's tokens only; the list a caller passes gets them appended.
TEST(SchedulerCompleteStep, StepTokensHoldOnlyTheLastStepsTokens) {
  Harness h(RoundRobinOptions(), 4, {10, 10});
  Request* a = h.Add(1, 5, 4, 0);
  Request* b = h.Add(2, 5, 4, 0);
  h.Step(10);
  EXPECT_THAT(
      TokenIds(h.scheduler().step_tokens()),
      ElementsAre(std::pair<RequestId, int64_t>(1, 0), std::pair<RequestId, int64_t>(2, 0)));
  ASSERT_TRUE(h.scheduler().Abort(b).ok());
  std::vector<StepToken> tokens;
  h.scheduler().CompleteStep(h.scheduler().Schedule(20), 20, &tokens);
  EXPECT_THAT(TokenIds(h.scheduler().step_tokens()),
              ElementsAre(std::pair<RequestId, int64_t>(1, 1)));
  EXPECT_THAT(TokenIds(tokens), ElementsAre(std::pair<RequestId, int64_t>(1, 1)));
  EXPECT_EQ(a->generated, 2);
}

// ---- Faults: a broken invariant is reported, never dropped.

TEST(SchedulerFault, AFailedFreeWhileFinishingIsTheSchedulersFault) {
  SchedulerOptions o;
  Harness h(o, 4, {16});
  Request* r = h.Add(1, 4, 1);
  EXPECT_TRUE(h.scheduler().fault().ok());
  h.kv().FailNextFreeForTesting();
  std::vector<Request*> finished;
  h.Step(0, &finished);  // the prefill produces the only token: the request finishes
  EXPECT_THAT(finished, IsEmpty());
  const absl::Status f = h.scheduler().fault();
  EXPECT_EQ(f.code(), absl::StatusCode::kInternal) << f;
  EXPECT_THAT(std::string(f.message()), HasSubstr("finishing request 1"));
  EXPECT_THAT(std::string(f.message()), HasSubstr("injected fault"));
  (void)r;
}

TEST(SchedulerFault, AFailedFreeWhilePreemptingIsTheSchedulersFault) {
  SchedulerOptions o;
  // One channel of 2 blocks of 2 tokens: two 2-token requests fill it; the first decode step of
  // either needs a third block, so the younger one is preempted (its Free fails).
  Harness h(o, 2, {2});
  h.Add(1, 2, 8);
  h.Add(2, 2, 8);
  h.Step(0);
  EXPECT_TRUE(h.scheduler().fault().ok());
  h.kv().FailNextFreeForTesting();
  const ScheduleOutput out = h.Step(1);
  EXPECT_FALSE(out.preempted.empty());
  EXPECT_THAT(std::string(h.scheduler().fault().message()), HasSubstr("preempting request"));
}

class FailingEstimator : public MhaEstimator {
 public:
  double Estimate(int64_t) override { return 0; }
  absl::Status status() const override { return absl::InternalError("the PIM model failed"); }
};

TEST(SchedulerFault, AFailedMhaEstimateIsTheSchedulersFault) {
  kv_cache::BlockManagerOptions ko;
  ko.block_tokens = 4;
  ko.blocks_per_channel = {16, 16};
  absl::StatusOr<kv_cache::BlockManager> kv = kv_cache::BlockManager::Create(ko);
  ASSERT_TRUE(kv.ok()) << kv.status();
  FailingEstimator est;
  Scheduler s(SchedulerOptions{}, &*kv, &est);
  EXPECT_THAT(std::string(s.fault().message()), HasSubstr("the PIM model failed"));
}

}  // namespace
}  // namespace neupims::scheduler
