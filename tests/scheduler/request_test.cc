#include "scheduler/request.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::scheduler {
namespace {

using ::testing::HasSubstr;

constexpr RequestState kAllStates[] = {RequestState::kWaiting, RequestState::kPrefilling,
                                       RequestState::kRunning, RequestState::kFinished,
                                       RequestState::kAborted};

// The legal edges of the state machine drawn in request.h.
bool Legal(RequestState from, RequestState to) {
  using S = RequestState;
  const std::vector<std::pair<S, S>> legal = {
      {S::kWaiting, S::kRunning},     // admitted, local prefill
      {S::kWaiting, S::kPrefilling},  // admitted, standalone prefill
      {S::kWaiting, S::kAborted},     // aborted while queued
      {S::kWaiting, S::kFinished},    // rejected (can never fit)
      {S::kPrefilling, S::kRunning},  // standalone prefill done
      {S::kPrefilling, S::kAborted},  //
      {S::kRunning, S::kWaiting},     // preempted (recompute)
      {S::kRunning, S::kFinished},    // reached max_new_tokens
      {S::kRunning, S::kAborted},     //
  };
  for (const auto& [f, t] : legal) {
    if (f == from && t == to) return true;
  }
  return false;
}

TEST(RequestTransition, EveryLegalTransitionSucceeds) {
  int legal = 0;
  for (RequestState from : kAllStates) {
    for (RequestState to : kAllStates) {
      if (!Legal(from, to)) continue;
      ++legal;
      Request r;
      r.id = 7;
      r.state = from;
      EXPECT_TRUE(Transition(r, to).ok()) << ToString(from) << " -> " << ToString(to);
      EXPECT_EQ(r.state, to);
    }
  }
  EXPECT_EQ(legal, 9);
}

TEST(RequestTransition, EveryIllegalTransitionFailsAndLeavesTheStateUnchanged) {
  for (RequestState from : kAllStates) {
    for (RequestState to : kAllStates) {
      if (Legal(from, to)) continue;
      Request r;
      r.id = 42;
      r.state = from;
      const absl::Status s = Transition(r, to);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition)
          << ToString(from) << " -> " << ToString(to);
      EXPECT_EQ(r.state, from) << ToString(from) << " -> " << ToString(to);
      EXPECT_THAT(std::string(s.message()), HasSubstr("request 42"));
    }
  }
}

TEST(RequestTransition, NamedIllegalTransitionsFail) {
  Request finished;
  finished.state = RequestState::kFinished;
  EXPECT_EQ(Transition(finished, RequestState::kRunning).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(finished.state, RequestState::kFinished);

  for (RequestState to : kAllStates) {
    Request aborted;
    aborted.state = RequestState::kAborted;
    EXPECT_FALSE(Transition(aborted, to).ok()) << ToString(to);
    EXPECT_EQ(aborted.state, RequestState::kAborted);
  }

  Request prefilling;
  prefilling.state = RequestState::kPrefilling;
  const absl::Status s = Transition(prefilling, RequestState::kWaiting);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("prefilling -> waiting"));
  EXPECT_EQ(prefilling.state, RequestState::kPrefilling);
}

TEST(RequestTransition, SelfTransitionsAreIllegal) {
  for (RequestState s : kAllStates) {
    Request r;
    r.state = s;
    EXPECT_FALSE(Transition(r, s).ok()) << ToString(s);
    EXPECT_EQ(r.state, s);
  }
}

TEST(Request, DerivedQuantities) {
  Request r;
  r.prompt_tokens = 100;
  r.max_new_tokens = 3;
  EXPECT_EQ(r.context_tokens(), 100);
  EXPECT_FALSE(r.done());
  r.generated = 2;
  EXPECT_EQ(r.context_tokens(), 102);
  EXPECT_FALSE(r.done());
  r.generated = 3;
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(r.terminal());
  r.state = RequestState::kFinished;
  EXPECT_TRUE(r.terminal());
  r.state = RequestState::kAborted;
  EXPECT_TRUE(r.terminal());
  r.state = RequestState::kPrefilling;
  EXPECT_FALSE(r.terminal());
}

TEST(Request, NamesOfStatesAndReasons) {
  EXPECT_STREQ(ToString(RequestState::kWaiting), "waiting");
  EXPECT_STREQ(ToString(RequestState::kPrefilling), "prefilling");
  EXPECT_STREQ(ToString(RequestState::kRunning), "running");
  EXPECT_STREQ(ToString(RequestState::kFinished), "finished");
  EXPECT_STREQ(ToString(RequestState::kAborted), "aborted");
  EXPECT_STREQ(ToString(FinishReason::kNone), "none");
  EXPECT_STREQ(ToString(FinishReason::kLength), "length");
  EXPECT_STREQ(ToString(FinishReason::kAborted), "abort");
  EXPECT_STREQ(ToString(FinishReason::kRejected), "rejected");
}

// A request with the given timeline (kNoTime: never happened) and output tokens.
Request WithTimeline(SimTime arrival, SimTime admitted, SimTime first_token, SimTime finished,
                     int64_t generated) {
  return Request{.arrival = arrival,
                 .generated = generated,
                 .first_admitted = admitted,
                 .first_token = first_token,
                 .finished = finished};
}

TEST(Latencies, SpansOfAFinishedRequestInNanoseconds) {
  const RequestLatencies l = Latencies(WithTimeline(1000, 1500, 4000, 10000, 4));
  EXPECT_EQ(l.queue_ns, 500);
  EXPECT_EQ(l.ttft_ns, 3000);
  EXPECT_EQ(l.prefill_ns, 2500);
  EXPECT_EQ(l.decode_ns, 6000);
  EXPECT_EQ(l.e2e_ns, 9000);
  EXPECT_EQ(l.tpot_ns, 2000.0);  // 6000 ns over the 3 tokens after the first
}

TEST(Latencies, SpansThatNeverHappenedAreAbsent) {
  // Rejected: finished while waiting, never admitted, no token.
  const RequestLatencies l = Latencies(WithTimeline(100, kNoTime, kNoTime, 100, 0));
  EXPECT_FALSE(l.queue_ns.has_value());
  EXPECT_FALSE(l.ttft_ns.has_value());
  EXPECT_FALSE(l.prefill_ns.has_value());
  EXPECT_FALSE(l.decode_ns.has_value());
  EXPECT_FALSE(l.tpot_ns.has_value());
  EXPECT_EQ(l.e2e_ns, 0);

  // Aborted before its arrival time: no negative span.
  EXPECT_FALSE(Latencies(WithTimeline(500, kNoTime, kNoTime, 200, 0)).e2e_ns.has_value());
}

TEST(Latencies, TpotNeedsTwoOrMoreTokens) {
  EXPECT_FALSE(Latencies(WithTimeline(0, 0, 10, 10, 1)).tpot_ns.has_value());
  EXPECT_EQ(Latencies(WithTimeline(0, 0, 10, 30, 2)).tpot_ns, 20.0);
}

}  // namespace
}  // namespace neupims::scheduler
