#include "engine/engine.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/request_field.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/batching.h"
#include "scheduler/request.h"

namespace neupims::engine {
namespace {

using scheduler::FinishReason;
using scheduler::RequestState;
using ::testing::HasSubstr;

// Records everything the engine reports.
class Recorder : public EngineObserver {
 public:
  struct Token {
    int64_t index;
    SimTime t;
  };
  struct Iteration {
    SimTime start, end;
    int64_t decode, prefill, preempted;
    std::array<int64_t, 2> sub_batch;
  };

  void OnTokens(const Request& r, int64_t first_index, int count, SimTime t) override {
    for (int k = 0; k < count; ++k) tokens[r.id].push_back({first_index + k, t});
    total_tokens += count;
  }
  void OnFinished(const Request& r) override {
    ++finished_count[r.id];
    final_state[r.id] = r;
  }
  void OnIteration(const IterationRecord& it) override {
    iterations.push_back({it.start, it.end, it.decode, it.prefill, it.preempted, it.sub_batch});
    EXPECT_NE(it.cost, nullptr);
  }

  // The iteration that ended at `t` (tokens are produced at iteration ends).
  const Iteration* IterationEndingAt(SimTime t) const {
    for (const Iteration& it : iterations) {
      if (it.end == t) return &it;
    }
    return nullptr;
  }

  std::map<RequestId, std::vector<Token>> tokens;
  std::map<RequestId, int> finished_count;
  std::map<RequestId, Request> final_state;
  std::vector<Iteration> iterations;
  int64_t total_tokens = 0;
};

// Options named as on the command line, through their names tables.
SystemModeKind ModeNamed(absl::string_view name) {
  absl::StatusOr<SystemModeKind> m = SystemModeNames().Parse(name);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.value_or(SystemModeKind::kNeuPims);
}

PrefillPlacement PrefillNamed(absl::string_view name) {
  absl::StatusOr<PrefillPlacement> p = PrefillPlacementNames().Parse(name);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.value_or(PrefillPlacement::kStandalone);
}

std::unique_ptr<Engine> MakeEngine(const EngineOptions& o) {
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

std::vector<SubmitSpec> Fixed(int n, int64_t prompt, int64_t output, SimTime arrival = 0) {
  std::vector<SubmitSpec> out;
  for (int i = 0; i < n; ++i) out.push_back({i, prompt, output, arrival, 0});
  return out;
}

// Poisson arrivals (exponential gaps of mean `mean_gap_ns`) and lengths varied around the given
// ones, drawn from a fixed seed.
std::vector<SubmitSpec> Staggered(int n, int64_t prompt, int64_t output, double mean_gap_ns,
                                  uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(1.0 / mean_gap_ns);
  std::uniform_int_distribution<int64_t> jitter(-prompt / 2, prompt / 2);
  std::uniform_int_distribution<int64_t> out_jitter(-output / 2, output / 2);
  std::vector<SubmitSpec> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    out.push_back(
        {100 + i, prompt + jitter(rng), output + out_jitter(rng), static_cast<SimTime>(t), 0});
    t += gap(rng);
  }
  return out;
}

absl::Status SubmitAll(Engine& e, const std::vector<SubmitSpec>& specs) {
  for (const SubmitSpec& s : specs) {
    absl::Status st = e.Submit(s);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

// Checks what every workload run must satisfy and returns the time the last request finished.
SimTime CheckCompleted(const Engine& e, const Recorder& rec, const std::vector<SubmitSpec>& specs) {
  SimTime last = 0;
  int64_t outputs = 0;
  for (const SubmitSpec& s : specs) {
    SCOPED_TRACE(::testing::Message() << "request " << s.id);
    outputs += s.max_new_tokens;
    auto fc = rec.finished_count.find(s.id);
    EXPECT_TRUE(fc != rec.finished_count.end() && fc->second == 1);
    auto f = rec.final_state.find(s.id);
    if (f == rec.final_state.end()) continue;
    const Request& r = f->second;
    EXPECT_EQ(r.state, RequestState::kFinished);
    EXPECT_EQ(r.finish_reason, FinishReason::kLength);
    EXPECT_EQ(r.generated, s.max_new_tokens);
    EXPECT_GT(r.first_token - r.arrival, 0);  // TTFT > 0
    EXPECT_GE(r.finished, r.first_token);
    EXPECT_EQ(r.finished, r.last_token);
    last = std::max(last, r.finished);
    // Tokens 0 .. n-1, in order, at non-decreasing times.
    auto t = rec.tokens.find(s.id);
    EXPECT_TRUE(t != rec.tokens.end());
    if (t == rec.tokens.end()) continue;
    const std::vector<Recorder::Token>& toks = t->second;
    EXPECT_EQ(static_cast<int64_t>(toks.size()), s.max_new_tokens);
    for (size_t i = 0; i < toks.size(); ++i) {
      EXPECT_EQ(toks[i].index, static_cast<int64_t>(i));
      if (i > 0) {
        EXPECT_GE(toks[i].t, toks[i - 1].t);
      }
    }
    if (!toks.empty()) {
      EXPECT_GT(toks.front().t, r.arrival);
      EXPECT_EQ(toks.back().t, r.finished);
    }
  }
  EXPECT_EQ(rec.total_tokens, outputs);
  EXPECT_EQ(e.stats().finished, static_cast<int64_t>(specs.size()));
  EXPECT_EQ(e.stats().submitted, static_cast<int64_t>(specs.size()));
  EXPECT_EQ(e.stats().aborted, 0);
  EXPECT_EQ(e.stats().rejected, 0);
  const EngineLoad load = e.Load();
  EXPECT_EQ(load.running, 0);
  EXPECT_EQ(load.waiting, 0);
  EXPECT_EQ(load.prefilling, 0);
  EXPECT_EQ(load.kv_usage, 0.0);
  EXPECT_EQ(load.kv_blocks_used, 0);
  EXPECT_GT(load.kv_blocks_total, 0);
  EXPECT_TRUE(e.Idle());
  return last;
}

// ---------------------------------------------------------------------------------------------
// Create.

TEST(EngineCreate, DefaultsBuildGpt3_7bOnNeuPims) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->model().name, "gpt3-7b");
  EXPECT_EQ(e->mode().name, "neupims");
  EXPECT_EQ(e->parallelism().tp, 4);
  EXPECT_EQ(e->parallelism().pp, 1);
  EXPECT_EQ(e->kv_channels(), 32);
  EXPECT_GT(e->kv_blocks_per_channel(), 0);
  EXPECT_EQ(e->now(), 0);
  EXPECT_TRUE(e->Idle());
  EXPECT_EQ(e->NextEventTime(), scheduler::kNoTime);
}

TEST(EngineCreate, NpuOnlyHasOneDeviceWideKvPool) {
  EngineOptions o;
  o.mode = SystemModeKind::kNpuOnly;
  std::unique_ptr<Engine> e = MakeEngine(o);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->kv_channels(), 1);
  EXPECT_EQ(e->device().name, "npu-only");
}

absl::Status CreateStatus(const EngineOptions& o) { return Engine::Create(o).status(); }

TEST(EngineCreate, UnknownModelModeOrDeviceIsAnError) {
  EngineOptions o;
  o.model = "gpt3-1b";
  absl::Status s = CreateStatus(o);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("gpt3-1b"));

  // The mode is typed: a bad name stops at the names table every front end parses through.
  s = SystemModeNames().Parse("newton").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("choices: npu-only, npu+pim, neupims"));

  o = {};
  o.device = "no-such-device";
  s = CreateStatus(o);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("no-such-device"));
}

TEST(EngineCreate, PimModeNeedsAPimDevice) {
  EngineOptions o;
  o.mode = SystemModeKind::kNeuPims;
  o.device = "npu-only";
  const absl::Status s = CreateStatus(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("needs a PIM device"));
}

// npu-only runs attention on the NPU: a second PIM row buffer is refused by name, however the
// options were assembled (not the NPU model's internal bandwidth error).
TEST(EngineCreate, NpuOnlyWithDualRowBuffersIsRefusedNamingBothOptions) {
  EngineOptions o;
  o.mode = SystemModeKind::kNpuOnly;
  o.dual_row_buffers = true;
  const absl::Status s = CreateStatus(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--dual-row-buffers"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("npu-only"));
  o.dual_row_buffers = false;
  EXPECT_TRUE(CreateStatus(o).ok());
}

TEST(EngineCreate, TensorParallelismThatDoesNotDivideIsInvalid) {
  EngineOptions o;
  o.tp = 3;
  const absl::Status s = CreateStatus(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tp = 3 does not divide heads (32)"));
}

TEST(EngineCreate, ModelThatDoesNotFitTheDeviceIsInvalid) {
  EngineOptions o;
  o.model = "gpt3-175b";
  o.tp = 1;
  o.pp = 1;
  const absl::Status s = CreateStatus(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("gpt3-175b"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("raise --tp or --pp"));
  // Its default parallelism (TP 8, PP 4) fits.
  o.tp.reset();
  o.pp.reset();
  EXPECT_TRUE(CreateStatus(o).ok());
}

TEST(EngineCreate, BadOptionsAreInvalid) {
  auto code = [](auto mutate) {
    EngineOptions o;
    mutate(o);
    return CreateStatus(o).code();
  };
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code([](EngineOptions& o) { o.max_batch = 0; }), kInvalid);
  EXPECT_EQ(code([](EngineOptions& o) { o.max_prefill_tokens = 0; }), kInvalid);
  EXPECT_EQ(PrefillPlacementNames().Parse("remote").status().code(), kInvalid);
  EXPECT_EQ(code([](EngineOptions& o) { o.prefill_groups = 0; }), kInvalid);
  EXPECT_EQ(code([](EngineOptions& o) { o.prefill_batch_tokens = 0; }), kInvalid);
  EXPECT_EQ(code([](EngineOptions& o) { o.prefill_link.gb_per_s = 0; }), kInvalid);
  EXPECT_EQ(scheduler::ChannelPolicyNames().Parse("random").status().code(), kInvalid);
  EXPECT_EQ(MhaEstimatorNames().Parse("exact").status().code(), kInvalid);
}

// ---------------------------------------------------------------------------------------------
// Submit.

TEST(EngineSubmit, RejectsBadLengthsNamingTheField) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  absl::Status s = e->Submit({1, 0, 10, 0, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("prompt"));
  s = e->Submit({1, 10, 0, 0, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_new_tokens"));
  s = e->Submit({1, 2000, 49, 0, 0});  // 2049 > 2048
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("exceeds the context"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("2048"));
  EXPECT_TRUE(e->Submit({1, 2000, 48, 0, 0}).ok());  // exactly the context
  EXPECT_EQ(e->stats().submitted, 1);
}

// CheckRequest is Submit's check, exposed: the cases the server used to reject on its own (an
// empty or negative prompt, no new tokens, over the context) are refused here, naming the
// field, with the same verdict Submit gives; checking queues nothing.
TEST(EngineCheckRequest, IsSubmitsCheckNamingTheFieldAndQueuesNothing) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  struct Case {
    SubmitSpec spec;
    const char* field;
  };
  const std::vector<Case> cases = {
      {{1, 0, 10, 0, 0}, "prompt_tokens"},
      {{1, -5, 10, 0, 0}, "prompt_tokens"},
      {{1, 10, 0, 0, 0}, "max_new_tokens"},
      {{1, 10, -1, 0, 0}, "max_new_tokens"},
      {{1, 2000, 49, 0, 0}, "max_new_tokens"},
      // A sum that overflows int64 (found by the fuzzer).
      {{1, 15, std::numeric_limits<int64_t>::max(), 0, 0}, "max_new_tokens"}};
  for (const Case& c : cases) {
    const absl::Status checked = e->CheckRequest(c.spec);
    EXPECT_EQ(checked.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(checked.message()), HasSubstr(c.field));
    EXPECT_EQ(RequestFieldOf(checked), c.field);  // for a front end naming it otherwise (HTTP)
    EXPECT_EQ(e->Submit(c.spec), checked);
  }
  EXPECT_THAT(std::string(e->CheckRequest({1, 0, 10, 0, 0}).message()),
              HasSubstr("the prompt is empty"));
  EXPECT_TRUE(e->CheckRequest({1, 16, 4, 0, 0}).ok());
  EXPECT_EQ(e->stats().submitted, 0);
  EXPECT_TRUE(e->Idle());
}

// Over the context, the refusal concerns the field the client can change: max_new_tokens while
// the prompt leaves room for one new token, the prompt once it fills the context alone.
TEST(EngineCheckRequest, OverTheContextConcernsThePromptOnlyWhenItFillsTheContextAlone) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(RequestFieldOf(e->CheckRequest({1, 2047, 2, 0, 0})), kMaxNewTokensField);
  const absl::Status s = e->CheckRequest({1, 2048, 1, 0, 0});
  EXPECT_TRUE(IsRequestTooLarge(s)) << s;
  EXPECT_EQ(RequestFieldOf(s), kPromptTokensField);
}

TEST(EngineSubmit, DuplicateLiveIdIsAlreadyExistsAndFinishedIdsMayBeReused) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Submit({7, 16, 2, 0, 0}).ok());
  EXPECT_EQ(e->Submit({7, 16, 2, 0, 0}).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(e->RunToCompletion().ok());
  EXPECT_EQ(e->stats().finished, 1);
  EXPECT_TRUE(e->Submit({7, 16, 2, e->now(), 0}).ok());
  ASSERT_TRUE(e->RunToCompletion().ok());
  EXPECT_EQ(e->stats().finished, 2);
}

TEST(EngineCheckRequest, MaxPromptTokensIsATooLargeInvalidArgument) {
  EngineOptions o;
  o.max_prompt_tokens = 64;
  std::unique_ptr<Engine> e = MakeEngine(o);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->CheckRequest({1, 64, 4, 0, 0}).ok());
  const absl::Status s = e->CheckRequest({1, 65, 4, 0, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(IsRequestTooLarge(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("max_prompt_tokens (64)"));
  EXPECT_EQ(RequestFieldOf(s), kPromptTokensField);
  o.max_prompt_tokens = 0;
  EXPECT_EQ(Engine::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EngineFault, ABrokenKvCacheStopsTheEngineForGood) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->Submit({1, 16, 2, 0, 0}).ok());
  e->InjectKvFaultForTesting();  // the request's Free when it finishes fails
  const absl::Status s = e->RunToCompletion();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("finishing request 1"));
  EXPECT_EQ(e->fault(), s);
  EXPECT_EQ(e->CheckInvariants(), s);
  // Sticky: the engine neither advances nor admits.
  EXPECT_EQ(e->AdvanceTo(e->now() + 1000), s);
  const absl::Status refused = e->Submit({2, 16, 2, e->now(), 0});
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("faulted"));
}

TEST(EngineInvariants, HoldWhileRequestsRunAndAfterTheyEnd) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(SubmitAll(*e, Fixed(8, 32, 16)).ok());
  ASSERT_TRUE(e->AdvanceTo(0).ok());
  EXPECT_TRUE(e->CheckInvariants().ok()) << e->CheckInvariants();
  ASSERT_TRUE(e->Abort(3).ok());
  while (!e->Idle()) {
    ASSERT_TRUE(e->AdvanceTo(e->NextEventTime()).ok());
    ASSERT_TRUE(e->CheckInvariants().ok()) << e->CheckInvariants();
  }
  EXPECT_EQ(e->Load().kv_blocks_used, 0);
}

TEST(EngineSubmit, FullWaitingQueueIsResourceExhausted) {
  EngineOptions o;
  o.max_batch = 1;
  o.max_waiting = 2;
  std::unique_ptr<Engine> e = MakeEngine(o);
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(SubmitAll(*e, Fixed(3, 32, 4)).ok());
  ASSERT_TRUE(e->AdvanceTo(0).ok());  // one admitted, two waiting
  EXPECT_EQ(e->Load().waiting, 2);
  const absl::Status s = e->Submit({99, 32, 4, 0, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("waiting queue is full"));
  ASSERT_TRUE(e->RunToCompletion().ok());
  EXPECT_EQ(e->stats().finished, 3);
}

// Admission control also counts requests submitted but not yet arrived (a burst of Submit()
// calls between two AdvanceTo() calls, as a server thread makes): at most 1 running + 2 waiting.
TEST(EngineSubmit, BurstOfSubmitsBeforeAdvancingRespectsMaxWaiting) {
  EngineOptions o;
  o.max_batch = 1;
  o.max_waiting = 2;
  std::unique_ptr<Engine> e = MakeEngine(o);
  ASSERT_NE(e, nullptr);
  int accepted = 0;
  for (int i = 0; i < 5; ++i) accepted += e->Submit({i, 32, 4, 0, 0}).ok() ? 1 : 0;
  EXPECT_LE(accepted, 3);
  ASSERT_TRUE(e->AdvanceTo(0).ok());
  EXPECT_LE(e->Load().waiting, 2);
}

// ---------------------------------------------------------------------------------------------
// Running workloads.

TEST(EngineRun, CompletesAWorkloadArrivingAtOnce) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  Recorder rec;
  e->set_observer(&rec);
  const std::vector<SubmitSpec> specs = Fixed(40, 64, 32);
  ASSERT_TRUE(SubmitAll(*e, specs).ok());
  EXPECT_EQ(e->NextEventTime(), 0);
  ASSERT_TRUE(e->RunToCompletion().ok());
  const SimTime last = CheckCompleted(*e, rec, specs);
  EXPECT_GT(last, 0);
  EXPECT_EQ(e->stats().last_event, last);
  EXPECT_EQ(e->stats().preemptions, 0);
  // Standalone prefill: the first token of each request comes from the prefill NPUs, every other
  // one from a decode iteration.
  EXPECT_EQ(e->stats().decode_tokens, 40 * 31);
  EXPECT_EQ(e->stats().prompt_tokens_computed, 40 * 64);
  EXPECT_EQ(e->stats().iterations, static_cast<int64_t>(rec.iterations.size()));
  EXPECT_GT(e->stats().energy_j(), 0);
}

// An observer that takes each iteration's tokens in one call sees exactly the tokens (requests,
// indices, times, order) that an observer of single tokens sees through the default forwarding.
TEST(EngineRun, IterationTokensMatchPerTokenReports) {
  using Seen = std::vector<std::tuple<RequestId, int64_t, SimTime>>;
  class PerToken : public EngineObserver {
   public:
    void OnTokens(const Request& r, int64_t first_index, int count, SimTime t) override {
      for (int k = 0; k < count; ++k) seen.push_back({r.id, first_index + k, t});
    }
    Seen seen;
  };
  class Batched : public PerToken {
   public:
    void OnIterationTokens(absl::Span<const EmittedToken> batch, SimTime t) override {
      ++calls;
      for (const auto& [r, index] : batch) seen.push_back({r->id, index, t});
    }
    int calls = 0;
  };
  const std::vector<SubmitSpec> specs = Staggered(24, 48, 16, 1e6, 3);
  Batched batched;
  PerToken per_token;
  for (PerToken* observer : std::initializer_list<PerToken*>{&batched, &per_token}) {
    std::unique_ptr<Engine> e = MakeEngine({});
    ASSERT_NE(e, nullptr);
    e->set_observer(observer);
    ASSERT_TRUE(SubmitAll(*e, specs).ok());
    ASSERT_TRUE(e->RunToCompletion().ok());
  }
  EXPECT_GT(batched.calls, 0);
  int64_t outputs = 0;  // the lengths are varied around 16
  for (const SubmitSpec& s : specs) outputs += s.max_new_tokens;
  EXPECT_EQ(static_cast<int64_t>(batched.seen.size()), outputs);
  EXPECT_EQ(batched.seen, per_token.seen);
}

TEST(EngineRun, CompletesPoissonArrivalsSubmittedUpFront) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  Recorder rec;
  e->set_observer(&rec);
  const std::vector<SubmitSpec> specs = Staggered(40, 64, 32, 2e6, 1);
  ASSERT_TRUE(SubmitAll(*e, specs).ok());
  ASSERT_TRUE(e->RunToCompletion().ok());
  CheckCompleted(*e, rec, specs);
  for (const SubmitSpec& s : specs) {
    EXPECT_EQ(rec.final_state[s.id].arrival, s.arrival);
    EXPECT_GE(rec.final_state[s.id].first_admitted, s.arrival);
  }
}

TEST(EngineRun, CompletesArrivalsSubmittedAsSimulatedTimeReachesThem) {
  EngineOptions o;
  o.prefill = PrefillPlacement::kLocal;
  std::unique_ptr<Engine> e = MakeEngine(o);
  ASSERT_NE(e, nullptr);
  Recorder rec;
  e->set_observer(&rec);
  const std::vector<SubmitSpec> specs = Staggered(40, 64, 32, 2e6, 2);
  for (const SubmitSpec& s : specs) {
    ASSERT_TRUE(e->AdvanceTo(s.arrival).ok());
    EXPECT_EQ(e->now(), s.arrival);
    ASSERT_TRUE(e->Submit(s).ok());
  }
  ASSERT_TRUE(e->RunToCompletion().ok());
  CheckCompleted(*e, rec, specs);
}

TEST(EngineRun, ArrivalsInThePastAreClampedToNow) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->AdvanceTo(5000).ok());
  ASSERT_TRUE(e->Submit({1, 16, 2, 10, 0}).ok());
  EXPECT_EQ(e->Find(1)->arrival, 5000);
  EXPECT_EQ(e->NextEventTime(), 5000);
}

struct Timeline {
  SimTime first_token, finished;
  bool operator==(const Timeline& o) const {
    return first_token == o.first_token && finished == o.finished;
  }
};

std::map<RequestId, Timeline> RunForTimelines(const EngineOptions& o,
                                              const std::vector<SubmitSpec>& specs,
                                              EngineStats* stats) {
  std::map<RequestId, Timeline> out;
  std::unique_ptr<Engine> e = MakeEngine(o);
  if (e == nullptr) return out;
  Recorder rec;
  e->set_observer(&rec);
  EXPECT_TRUE(SubmitAll(*e, specs).ok());
  EXPECT_TRUE(e->RunToCompletion().ok());
  for (const auto& [id, r] : rec.final_state) out[id] = {r.first_token, r.finished};
  *stats = e->stats();
  return out;
}

TEST(EngineRun, IsDeterministic) {
  EngineOptions o;
  o.max_batch = 24;
  const std::vector<SubmitSpec> specs = Staggered(48, 96, 24, 1e6, 3);
  EngineStats a, b;
  const std::map<RequestId, Timeline> ta = RunForTimelines(o, specs, &a);
  const std::map<RequestId, Timeline> tb = RunForTimelines(o, specs, &b);
  ASSERT_EQ(ta.size(), specs.size());
  EXPECT_TRUE(ta == tb);
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_EQ(a.busy_ns, b.busy_ns);
  EXPECT_EQ(a.last_event, b.last_event);
  EXPECT_EQ(a.decode_tokens, b.decode_tokens);
  EXPECT_EQ(a.batch_sum, b.batch_sum);
  EXPECT_EQ(a.preemptions, b.preemptions);
  EXPECT_EQ(a.systolic_busy_ns, b.systolic_busy_ns);
  EXPECT_EQ(a.pim_mac_ns, b.pim_mac_ns);
  EXPECT_EQ(a.energy_j(), b.energy_j());
  EXPECT_EQ(a.channel_imbalance_sum, b.channel_imbalance_sum);
}

// 256 requests (prompt 256, output 64) at t = 0, max batch 256, 16 standalone prefill groups so
// the decode batch stays large (mean ~175-200). Measured (gpt3-7b, TP 4, analytic):
//   npu-only 1.194 s > npu+pim 0.770 s > neupims 0.688 s
// (`neupims simulate --synthetic 256:64 -n 256 --max-batch 256 --prefill-groups 16 --mode X`).
// With the default single prefill group the run is prefill-bound and npu+pim vs neupims differ
// by only 0.1% (2.2245 s vs 2.2218 s); with --prefill local it is 2.590 s vs 2.460 s.
TEST(EngineModes, DecodeHeavyWorkloadOrdersNpuOnlyNpuPimNeuPims) {
  std::map<std::string, double> duration_s;
  for (const char* mode : {"npu-only", "npu+pim", "neupims"}) {
    EngineOptions o;
    o.mode = ModeNamed(mode);
    o.max_batch = 256;
    o.prefill_groups = 16;
    std::unique_ptr<Engine> e = MakeEngine(o);
    ASSERT_NE(e, nullptr);
    Recorder rec;
    e->set_observer(&rec);
    const std::vector<SubmitSpec> specs = Fixed(256, 256, 64);
    ASSERT_TRUE(SubmitAll(*e, specs).ok());
    ASSERT_TRUE(e->RunToCompletion().ok());
    duration_s[mode] = static_cast<double>(CheckCompleted(*e, rec, specs)) * 1e-9;
  }
  std::printf("duration: npu-only %.4f s, npu+pim %.4f s, neupims %.4f s\n", duration_s["npu-only"],
              duration_s["npu+pim"], duration_s["neupims"]);
  EXPECT_GT(duration_s["npu-only"], 1.2 * duration_s["npu+pim"]);
  EXPECT_GT(duration_s["npu+pim"], 1.04 * duration_s["neupims"]);
}

TEST(EnginePrefill, LocalAndStandaloneBothComplete) {
  for (const char* prefill : {"local", "standalone"}) {
    SCOPED_TRACE(prefill);
    EngineOptions o;
    o.prefill = PrefillNamed(prefill);
    std::unique_ptr<Engine> e = MakeEngine(o);
    ASSERT_NE(e, nullptr);
    Recorder rec;
    e->set_observer(&rec);
    const std::vector<SubmitSpec> specs = Staggered(24, 128, 16, 3e6, 4);
    ASSERT_TRUE(SubmitAll(*e, specs).ok());
    ASSERT_TRUE(e->RunToCompletion().ok());
    CheckCompleted(*e, rec, specs);
    int64_t prompts = 0;
    for (const SubmitSpec& s : specs) prompts += s.prompt_tokens;
    EXPECT_EQ(e->stats().prompt_tokens_computed, prompts);
    const bool standalone = std::string(prefill) == "standalone";
    for (const SubmitSpec& s : specs) {
      SCOPED_TRACE(::testing::Message() << "request " << s.id);
      const std::vector<Recorder::Token>& toks = rec.tokens[s.id];
      ASSERT_GE(toks.size(), 2u);
      // The iteration that produced token 1 (the first decode of this request).
      const Recorder::Iteration* decode1 = rec.IterationEndingAt(toks[1].t);
      ASSERT_NE(decode1, nullptr);
      const Recorder::Iteration* first = rec.IterationEndingAt(toks[0].t);
      if (standalone) {
        // The prefill NPUs produced token 0 before the first decode iteration began (the KV
        // cache still had to cross the link).
        EXPECT_LT(toks[0].t, decode1->start);
      } else {
        // Token 0 comes out of the iteration that prefilled it on the device.
        ASSERT_NE(first, nullptr);
        EXPECT_GT(first->prefill, 0);
        EXPECT_LE(toks[0].t, decode1->start);
      }
    }
    if (standalone) {
      EXPECT_GT(e->stats().prefill_busy_ns, 0);
      EXPECT_GT(e->stats().prefill_j, 0);
    } else {
      EXPECT_EQ(e->stats().prefill_busy_ns, 0);
      EXPECT_EQ(e->stats().prefill_j, 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Abort.

TEST(EngineAbort, RunningRequestIsFreedReportedOnceAndProducesNothingMore) {
  for (const char* prefill : {"standalone", "local"}) {
    SCOPED_TRACE(prefill);
    EngineOptions o;
    o.prefill = PrefillNamed(prefill);
    std::unique_ptr<Engine> e = MakeEngine(o);
    ASSERT_NE(e, nullptr);
    Recorder rec;
    e->set_observer(&rec);
    const std::vector<SubmitSpec> specs = Fixed(40, 64, 32);
    ASSERT_TRUE(SubmitAll(*e, specs).ok());
    // Advance until request 5 has produced a few tokens.
    while (e->Find(5) != nullptr && e->Find(5)->generated < 4) {
      ASSERT_NE(e->NextEventTime(), scheduler::kNoTime);
      ASSERT_TRUE(e->AdvanceTo(e->NextEventTime()).ok());
    }
    const Request* r = e->Find(5);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->state, RequestState::kRunning);
    const int64_t tokens_before = static_cast<int64_t>(rec.tokens[5].size());
    const EngineLoad before = e->Load();
    ASSERT_TRUE(e->Abort(5).ok());
    const EngineLoad after = e->Load();
    EXPECT_LT(after.kv_usage, before.kv_usage);
    EXPECT_LT(after.kv_blocks_used, before.kv_blocks_used);
    EXPECT_EQ(after.running, before.running - 1);
    EXPECT_EQ(rec.finished_count[5], 1);
    EXPECT_EQ(rec.final_state[5].finish_reason, FinishReason::kAborted);
    EXPECT_STREQ(scheduler::ToString(rec.final_state[5].finish_reason), "abort");
    EXPECT_EQ(rec.final_state[5].state, RequestState::kAborted);
    EXPECT_EQ(e->Find(5), nullptr);
    EXPECT_EQ(e->Abort(5).code(), absl::StatusCode::kNotFound);

    ASSERT_TRUE(e->RunToCompletion().ok());
    EXPECT_EQ(static_cast<int64_t>(rec.tokens[5].size()), tokens_before);
    EXPECT_EQ(rec.finished_count[5], 1);
    EXPECT_EQ(e->stats().aborted, 1);
    EXPECT_EQ(e->stats().finished, 39);
    for (const SubmitSpec& s : specs) {
      if (s.id == 5) continue;
      EXPECT_EQ(rec.final_state[s.id].generated, 32) << s.id;
    }
    EXPECT_EQ(e->Load().kv_blocks_used, 0);
    // Unknown and finished ids are NotFound.
    EXPECT_EQ(e->Abort(12345).code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(e->Abort(6).code(), absl::StatusCode::kNotFound);
  }
}

TEST(EngineAbort, RequestAbortedBeforeItArrivesNeverRuns) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  Recorder rec;
  e->set_observer(&rec);
  ASSERT_TRUE(e->Submit({1, 32, 4, 0, 0}).ok());
  ASSERT_TRUE(e->Submit({2, 32, 4, 1000000, 0}).ok());
  ASSERT_TRUE(e->Abort(2).ok());
  EXPECT_EQ(rec.finished_count[2], 1);
  EXPECT_EQ(rec.final_state[2].finish_reason, FinishReason::kAborted);
  ASSERT_TRUE(e->RunToCompletion().ok());
  EXPECT_EQ(rec.tokens.count(2), 0u);
  EXPECT_EQ(rec.finished_count[2], 1);
  EXPECT_EQ(e->stats().finished, 1);
  EXPECT_EQ(e->stats().aborted, 1);
}

TEST(EngineAbort, WaitingAndPrefillingRequestsCanBeAborted) {
  EngineOptions o;
  o.max_batch = 2;
  std::unique_ptr<Engine> e = MakeEngine(o);
  ASSERT_NE(e, nullptr);
  Recorder rec;
  e->set_observer(&rec);
  ASSERT_TRUE(SubmitAll(*e, Fixed(4, 64, 8)).ok());
  ASSERT_TRUE(e->AdvanceTo(0).ok());
  ASSERT_EQ(e->Find(0)->state, RequestState::kPrefilling);
  ASSERT_EQ(e->Find(3)->state, RequestState::kWaiting);
  EXPECT_EQ(e->Load().prefilling, 2);
  const int64_t used = e->Load().kv_blocks_used;
  ASSERT_TRUE(e->Abort(0).ok());  // its prefill batch is in flight
  ASSERT_TRUE(e->Abort(3).ok());
  EXPECT_LT(e->Load().kv_blocks_used, used);
  EXPECT_EQ(e->Load().prefilling, 1);
  EXPECT_EQ(e->Load().waiting, 1);
  ASSERT_TRUE(e->RunToCompletion().ok());
  EXPECT_EQ(rec.tokens.count(0), 0u);
  EXPECT_EQ(rec.tokens.count(3), 0u);
  EXPECT_EQ(e->stats().finished, 2);
  EXPECT_EQ(e->stats().aborted, 2);
  EXPECT_EQ(e->Load().kv_blocks_used, 0);
}

// ---------------------------------------------------------------------------------------------
// Head sizes that do not divide the PIM page.

// Phi-2's heads of 80 are laid out with padded key rows (6 heads per row, docs/hw.md) instead
// of refused: every request completes on the PIM in both PIM modes.
TEST(EngineModels, HeadDimThatDoesNotDivideThePageServesEveryRequest) {
  for (const char* mode : {"neupims", "npu+pim"}) {
    SCOPED_TRACE(mode);
    EngineOptions o;
    o.model = "phi-2";
    o.mode = ModeNamed(mode);
    std::unique_ptr<Engine> e = MakeEngine(o);
    ASSERT_NE(e, nullptr);
    Recorder rec;
    e->set_observer(&rec);
    const std::vector<SubmitSpec> specs = Fixed(16, 100, 20);
    ASSERT_TRUE(SubmitAll(*e, specs).ok());
    const absl::Status run = e->RunToCompletion();
    ASSERT_TRUE(run.ok()) << run;
    CheckCompleted(*e, rec, specs);
    EXPECT_GT(e->stats().pim_channel_busy_ns, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Preemption under memory pressure.

// LLaMA-2-7B on one device (no TP): 13.5 GB of weights leave ~35 KV blocks of 32 tokens per PIM
// channel, so 600-token requests (19 blocks) collide as they grow. Measured with `neupims
// simulate --model llama2-7b --tp 1 --pp 1 --synthetic 300:300 -n 128`: 48 preemptions with
// standalone prefill, 32 with local; every request completes.
EngineOptions PressureOptions(const char* prefill) {
  EngineOptions o;
  o.model = "llama2-7b";
  o.tp = 1;
  o.pp = 1;
  o.prefill = PrefillNamed(prefill);
  return o;
}

std::vector<SubmitSpec> PressureWorkload() { return Fixed(128, 300, 300); }

TEST(EnginePreemption, EveryRequestFinishesUnderKvPressure) {
  for (const char* prefill : {"standalone", "local"}) {
    SCOPED_TRACE(prefill);
    std::unique_ptr<Engine> e = MakeEngine(PressureOptions(prefill));
    ASSERT_NE(e, nullptr);
    EXPECT_LT(e->kv_blocks_per_channel(), 64);
    Recorder rec;
    e->set_observer(&rec);
    const std::vector<SubmitSpec> specs = PressureWorkload();
    ASSERT_TRUE(SubmitAll(*e, specs).ok());
    const absl::Status run = e->RunToCompletion();
    ASSERT_TRUE(run.ok()) << run;
    EXPECT_GT(e->stats().preemptions, 0);
    CheckCompleted(*e, rec, specs);
    int preempted = 0;
    for (const auto& [id, r] : rec.final_state) preempted += r.preemptions > 0 ? 1 : 0;
    EXPECT_GT(preempted, 0);
    // Recompute re-prefills prompt + generated tokens.
    int64_t prompts = 0;
    for (const SubmitSpec& s : specs) prompts += s.prompt_tokens;
    EXPECT_GT(e->stats().prompt_tokens_computed, prompts);
  }
}

TEST(EnginePreemption, LocalPrefillKeepsTheFirstTokenTimeOfPreemptedRequests) {
  std::unique_ptr<Engine> e = MakeEngine(PressureOptions("local"));
  ASSERT_NE(e, nullptr);
  Recorder rec;
  e->set_observer(&rec);
  ASSERT_TRUE(SubmitAll(*e, PressureWorkload()).ok());
  ASSERT_TRUE(e->RunToCompletion().ok());
  ASSERT_GT(e->stats().preemptions, 0);
  for (const auto& [id, r] : rec.final_state) {
    ASSERT_FALSE(rec.tokens[id].empty());
    EXPECT_EQ(r.first_token, rec.tokens[id].front().t) << id << " preemptions " << r.preemptions;
  }
}

// Regression: a preempted request re-prefilled on the standalone NPUs keeps the time of its
// first token (the recompute produces its next token, not its first).
TEST(EnginePreemption, StandalonePrefillKeepsTheFirstTokenTimeOfPreemptedRequests) {
  std::unique_ptr<Engine> e = MakeEngine(PressureOptions("standalone"));
  ASSERT_NE(e, nullptr);
  Recorder rec;
  e->set_observer(&rec);
  ASSERT_TRUE(SubmitAll(*e, PressureWorkload()).ok());
  ASSERT_TRUE(e->RunToCompletion().ok());
  ASSERT_GT(e->stats().preemptions, 0);
  for (const auto& [id, r] : rec.final_state) {
    ASSERT_FALSE(rec.tokens[id].empty());
    EXPECT_EQ(r.first_token, rec.tokens[id].front().t) << id << " preemptions " << r.preemptions;
  }
}

// Regression: preemption under KV pressure never leaves a preempted request in the decode
// list (it used to crash with sub-batches on); every request still runs to completion.
TEST(EnginePreemption, LongRequestsUnderKvPressureRunToCompletion) {
  std::unique_ptr<Engine> e = MakeEngine(PressureOptions("standalone"));
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(SubmitAll(*e, Fixed(96, 512, 512)).ok());
  const absl::Status s = e->RunToCompletion();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(e->stats().finished, 96);
}

// Preemptions, and aborts of requests wherever they are (waiting, prefilling, decoding, in the
// iteration in flight), keep the engine consistent after every event: in particular the KV
// cache's decode stream holds exactly the decoding requests (Engine::CheckInvariants).
TEST(EnginePreemption, InvariantsHoldAfterEveryEventWithAbortsUnderKvPressure) {
  for (const char* prefill : {"standalone", "local"}) {
    SCOPED_TRACE(prefill);
    std::unique_ptr<Engine> e = MakeEngine(PressureOptions(prefill));
    ASSERT_NE(e, nullptr);
    ASSERT_TRUE(SubmitAll(*e, PressureWorkload()).ok());
    std::mt19937_64 rng(7);
    int aborted = 0;
    while (!e->Idle()) {
      ASSERT_TRUE(e->AdvanceTo(e->NextEventTime()).ok());
      ASSERT_TRUE(e->CheckInvariants().ok()) << e->CheckInvariants();
      if (std::uniform_int_distribution<int>(0, 40)(rng) == 0) {
        const RequestId id = std::uniform_int_distribution<RequestId>(0, 127)(rng);
        if (e->Abort(id).ok()) ++aborted;
        ASSERT_TRUE(e->CheckInvariants().ok()) << e->CheckInvariants();
      }
    }
    EXPECT_GT(e->stats().preemptions, 0);
    EXPECT_GT(aborted, 0);
    EXPECT_EQ(e->stats().finished + e->stats().aborted, 128);
    EXPECT_EQ(e->Load().kv_blocks_used, 0);
  }
}

// OnIterationGaps gives the inter-token gaps a per-token observer computes from each request's
// previous token (iteration tokens, and standalone prefills' tokens through OnTokens, whose
// request still holds its previous token's time), as the same multiset, under preemptions.
// Inter-token gaps two ways: per token from each request's previous token (OnTokens and
// OnIterationTokens), and grouped from OnIterationGaps (plus OnTokens' own previous token).
class GapRecorder : public EngineObserver {
 public:
  void OnTokens(const Request& r, int64_t, int, SimTime t) override {
    Token(r.id, t);
    if (r.last_token != scheduler::kNoTime) grouped.push_back(t - r.last_token);
  }
  void OnIterationTokens(absl::Span<const EmittedToken> tokens, SimTime t) override {
    for (const auto& [r, index] : tokens) Token(r->id, t);
  }
  void OnIterationGaps(const scheduler::StepGaps& gaps, SimTime t) override {
    for (int64_t k = 0; k < gaps.continuing; ++k) grouped.push_back(t - gaps.previous);
    for (const scheduler::StepGap& g : gaps.others) {
      if (g.previous != scheduler::kNoTime) grouped.push_back(t - g.previous);
    }
  }
  void Token(RequestId id, SimTime t) {
    auto [it, first] = last.try_emplace(id, t);
    if (!first) per_token.push_back(t - it->second);
    it->second = t;
  }
  std::map<RequestId, SimTime> last;
  std::vector<SimTime> per_token, grouped;
};

// Runs the pressure workload event by event, aborting a random request after about one event
// in `abort_one_in` (none if 0), and checks that the grouped gaps are the per-token gaps.
void ExpectGroupedGapsArePerTokenGaps(const char* prefill, int abort_one_in) {
  SCOPED_TRACE(prefill);
  std::unique_ptr<Engine> e = MakeEngine(PressureOptions(prefill));
  ASSERT_NE(e, nullptr);
  GapRecorder gaps;
  e->set_observer(&gaps);
  ASSERT_TRUE(SubmitAll(*e, PressureWorkload()).ok());
  std::mt19937_64 rng(11);
  int aborted = 0;
  while (!e->Idle()) {
    ASSERT_TRUE(e->AdvanceTo(e->NextEventTime()).ok());
    if (abort_one_in > 0 && std::uniform_int_distribution<int>(1, abort_one_in)(rng) == 1) {
      const RequestId id = std::uniform_int_distribution<RequestId>(0, 127)(rng);
      if (e->Abort(id).ok()) ++aborted;
    }
  }
  EXPECT_GT(e->stats().preemptions, 0);
  EXPECT_EQ(e->stats().finished + e->stats().aborted, 128);
  if (abort_one_in > 0) {
    EXPECT_GT(aborted, 5);
  }
  std::sort(gaps.per_token.begin(), gaps.per_token.end());
  std::sort(gaps.grouped.begin(), gaps.grouped.end());
  EXPECT_GT(gaps.per_token.size(), abort_one_in > 0 ? 10000u : 30000u);
  EXPECT_EQ(gaps.grouped, gaps.per_token);
}

TEST(EnginePreemption, IterationGapsAreThePerTokenGaps) {
  for (const char* prefill : {"standalone", "local"}) ExpectGroupedGapsArePerTokenGaps(prefill, 0);
}

// With random aborts between events (waiting, prefilling and decoding requests, and those in
// the iteration in flight): an aborted request's tokens stop in both views alike.
TEST(EnginePreemption, IterationGapsAreThePerTokenGapsWithRandomAborts) {
  for (const char* prefill : {"standalone", "local"}) {
    ExpectGroupedGapsArePerTokenGaps(prefill, 31);
  }
}

// Counts tokens: per token (OnIterationTokens) when it wants the list, else from the gaps
// (continuing + others), and standalone prefills' tokens through OnTokens either way.
class TokenCounter : public EngineObserver {
 public:
  explicit TokenCounter(bool wants_list) : wants_list_(wants_list) {}
  bool WantsIterationTokens() const override { return wants_list_; }
  void OnTokens(const Request&, int64_t, int count, SimTime) override { tokens += count; }
  void OnIterationTokens(absl::Span<const EmittedToken> list, SimTime) override {
    ++list_calls;
    tokens += static_cast<int64_t>(list.size());
  }
  void OnIterationGaps(const scheduler::StepGaps& gaps, SimTime) override {
    if (!wants_list_) tokens += gaps.continuing + static_cast<int64_t>(gaps.others.size());
  }
  int64_t tokens = 0, list_calls = 0;

 private:
  bool wants_list_;
};

// An observer that wants no token list gets none, and the gaps count the same tokens.
TEST(EngineObserver, WithoutTheTokenListTheGapsCountTheSameTokens) {
  for (const char* prefill : {"standalone", "local"}) {
    SCOPED_TRACE(prefill);
    TokenCounter listed(true), counted(false);
    for (TokenCounter* observer : {&listed, &counted}) {
      std::unique_ptr<Engine> e = MakeEngine(PressureOptions(prefill));
      ASSERT_NE(e, nullptr);
      e->set_observer(observer);
      ASSERT_TRUE(SubmitAll(*e, PressureWorkload()).ok());
      while (!e->Idle()) ASSERT_TRUE(e->AdvanceTo(e->NextEventTime()).ok());
    }
    EXPECT_GT(listed.list_calls, 0);
    EXPECT_EQ(counted.list_calls, 0);
    EXPECT_GT(listed.tokens, 30000);
    EXPECT_EQ(counted.tokens, listed.tokens);
  }
}

// ---------------------------------------------------------------------------------------------
// Single-iteration study.

// 256 requests with sequence lengths spread over 20 .. 579 (mean 299.5), like the ShareGPT
// batch files (share-gpt2-bs256-ms7B-tp4-pp1-clb-0.csv: mean 307); channels by the mode's
// policy.
std::vector<Engine::StepRequest> ShareGptLikeBatch() {
  std::vector<Engine::StepRequest> batch;
  for (int i = 0; i < 256; ++i) batch.push_back({20 + (i * 7919) % 560, -1});
  return batch;
}

// Measured (gpt3-7b, TP 4, 32 layers each scheduled, no LM head): npu-only 17.57 ms, npu+pim
// 11.32 ms, neupims 9.32 ms. With the LM head (`neupims step --seq-lens ...`, layers = 0,
// timeline) 17.67 / 11.42 / 9.49 ms; the shared batch file gives 17.87 / 11.87 / 9.25 ms
// (`neupims step --batch-file ...`). The extrapolated path (timeline = false) gives 11.15 ms for
// neupims, only 2.4% under npu+pim: see the IterationModel test
// ExtrapolatedDurationMatchesTheFullScheduleWithSubBatchInterleaving.
TEST(EngineSimulateStep, ShareGptLikeBatchOrdersTheModes) {
  std::map<std::string, double> ns;
  for (const char* mode : {"npu-only", "npu+pim", "neupims"}) {
    EngineOptions o;
    o.mode = ModeNamed(mode);
    std::unique_ptr<Engine> e = MakeEngine(o);
    ASSERT_NE(e, nullptr);
    // All 32 layers, each one scheduled (timeline), without the LM head (layers = 0 would add
    // it; see IterationModel.FullTimelineWithTheLmHeadKeepsItsOpNames).
    absl::StatusOr<IterationCost> c =
        e->SimulateStep(ShareGptLikeBatch(), /*layers=*/32, /*timeline=*/true);
    ASSERT_TRUE(c.ok()) << c.status();
    ns[mode] = c->duration_ns;
    EXPECT_EQ(c->sub_batch_sizes[0] + c->sub_batch_sizes[1], 256);
    EXPECT_EQ(e->stats().iterations, 0);  // the engine's own state is untouched
  }
  std::printf("step: npu-only %.0f ns, npu+pim %.0f ns, neupims %.0f ns\n", ns["npu-only"],
              ns["npu+pim"], ns["neupims"]);
  EXPECT_GT(ns["npu-only"], 1.3 * ns["npu+pim"]);
  EXPECT_GT(ns["npu+pim"], 1.1 * ns["neupims"]);
}

TEST(EngineSimulateStep, SubBatchSizesFollowAlgorithm3) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  // 258 requests on fixed channels i % 32: channels 0 and 1 hold 9 (odd: ceil 5 then floor 4 to
  // SB1), the others 8 (4 + 4): SB1 = 5 + 4 + 30 x 4 = 129, SB2 = 4 + 5 + 30 x 4 = 129.
  std::vector<Engine::StepRequest> batch;
  std::vector<std::vector<int>> per_channel(32);
  for (int i = 0; i < 258; ++i) {
    batch.push_back({100 + i, i % 32});
    per_channel[i % 32].push_back(i);
  }
  const auto [sb1, sb2] = scheduler::PartitionSubBatches(per_channel);
  absl::StatusOr<IterationCost> c = e->SimulateStep(batch, 1, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sub_batch_sizes[0], static_cast<int64_t>(sb1.size()));
  EXPECT_EQ(c->sub_batch_sizes[1], static_cast<int64_t>(sb2.size()));
  EXPECT_EQ(c->sub_batch_sizes[0], 129);
  EXPECT_EQ(c->sub_batch_sizes[1], 129);

  // The blocked baseline does not split.
  EngineOptions o;
  o.mode = SystemModeKind::kNpuPim;
  std::unique_ptr<Engine> blocked = MakeEngine(o);
  ASSERT_NE(blocked, nullptr);
  c = blocked->SimulateStep(batch, 1, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sub_batch_sizes[0], 258);
  EXPECT_EQ(c->sub_batch_sizes[1], 0);
}

// Regression: lowered layers are cached in a pointer-stable map, so a fresh engine handles
// unequal sub-batches (129 + 128 requests) without touching freed memory.
TEST(EngineSimulateStep, UnequalSubBatchesOnAFreshEngine) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  std::vector<Engine::StepRequest> batch;
  for (int i = 0; i < 257; ++i) batch.push_back({100 + i, i % 32});
  absl::StatusOr<IterationCost> c = e->SimulateStep(batch, 1, false);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sub_batch_sizes[0], 129);
  EXPECT_EQ(c->sub_batch_sizes[1], 128);
}

TEST(EngineSimulateStep, RejectsBadBatches) {
  std::unique_ptr<Engine> e = MakeEngine({});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->SimulateStep({}, 0, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->SimulateStep({{0, -1}}, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->SimulateStep({{2049, -1}}, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status s = e->SimulateStep({{10, 32}}, 0, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("channel 32"));
}

}  // namespace
}  // namespace neupims::engine
