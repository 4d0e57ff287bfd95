// EngineRunner with its metrics, without gRPC: the clocks and gauges a dashboard plots while the
// server is idle (docs/metrics.md).
#include "server/engine_runner.h"

#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "hw/device.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "server/metrics.h"

namespace neupims::server {
namespace {

using std::chrono::milliseconds;

// Counts completions.
class CountingSink : public RequestSink {
 public:
  explicit CountingSink(absl::Mutex* mu, int* done) : mu_(mu), done_(done) {}
  void OnTokens(const std::vector<GeneratedToken>&) override {}
  void OnComplete(const Completion&) override {
    absl::MutexLock l(mu_);
    ++*done_;
  }

 private:
  absl::Mutex* mu_;
  int* done_;
};

class EngineRunnerTest : public ::testing::Test {
 protected:
  void Start(Pacing pacing, double speed) {
    RunnerOptions o;
    o.pacing = pacing;
    o.speed = speed;
    absl::StatusOr<hw::DeviceConfig> device = hw::LoadDeviceConfig("neupims");
    ASSERT_TRUE(device.ok()) << device.status();
    registry_ = std::make_shared<prometheus::Registry>();
    metrics_ = std::make_unique<ServerMetrics>(registry_, "gpt3-7b", *device, 4);
    absl::StatusOr<std::unique_ptr<EngineRunner>> r = EngineRunner::Create(o, metrics_.get());
    ASSERT_TRUE(r.ok()) << r.status();
    runner_ = *std::move(r);
  }

  // Submits `n` short requests and waits (up to 20 s) until they completed.
  void RunBurst(int n) {
    for (int i = 0; i < n; ++i) {
      SubmitArgs a;
      a.prompt_tokens = 16;
      a.max_new_tokens = 8;
      a.ignore_eos = true;
      ASSERT_TRUE(runner_->Submit(a, std::make_shared<CountingSink>(&mu_, &done_)).ok());
    }
    absl::MutexLock l(&mu_);
    auto all = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ == n; };
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(20)));
    done_ = 0;
  }

  // The value of an unlabelled (but for model_name) series, NaN if absent.
  double Value(const std::string& name) const {
    prometheus::TextSerializer serializer;
    const std::string text = "\n" + serializer.Serialize(registry_->Collect());
    const std::string key = "\n" + name + "{model_name=\"gpt3-7b\"} ";
    const size_t at = text.find(key);
    if (at == std::string::npos) return std::numeric_limits<double>::quiet_NaN();
    return std::strtod(text.c_str() + at + key.size(), nullptr);
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<EngineRunner> runner_;
  absl::Mutex mu_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
};

// A sink that aborts its own request at its first tokens, by the id it learnt at acceptance (as
// a gRPC stream does when it overflows its buffer).
class AbortAtFirstTokensSink : public RequestSink {
 public:
  explicit AbortAtFirstTokensSink(EngineRunner* runner) : runner_(runner) {}
  void OnAccepted(const std::string& request_id) override {
    absl::MutexLock l(&mu_);
    id_ = request_id;
  }
  void OnTokens(const std::vector<GeneratedToken>& tokens) override {
    absl::MutexLock l(&mu_);
    if (tokens_ == 0) id_at_first_tokens_ = id_;
    tokens_ += static_cast<int64_t>(tokens.size());
    if (!abort_sent_ && !id_.empty()) {
      abort_sent_ = true;
      runner_->AbortAsync(id_);
    }
  }
  void OnComplete(const Completion& c) override {
    absl::MutexLock l(&mu_);
    completion_ = c;
  }
  // Waits (up to 20 s) for the completion.
  std::optional<Completion> Await() {
    absl::MutexLock l(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return completion_.has_value(); };
    mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(20));
    return completion_;
  }
  std::string id_at_first_tokens() {
    absl::MutexLock l(&mu_);
    return id_at_first_tokens_;
  }

 private:
  EngineRunner* runner_;
  absl::Mutex mu_;
  std::string id_ ABSL_GUARDED_BY(mu_);
  std::string id_at_first_tokens_ ABSL_GUARDED_BY(mu_);
  int64_t tokens_ ABSL_GUARDED_BY(mu_) = 0;
  bool abort_sent_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<Completion> completion_ ABSL_GUARDED_BY(mu_);
};

// The engine tells a sink its request's id before the request's first token, so that a sink can
// abort its request at once (before, a gRPC stream learnt it only when Submit returned on its
// own thread, and a fast-paced engine could finish a 2,000-token request first: the stream's
// overflow then aborted nothing, 1 run in 3 to 14 of H2AttackTest's zero-window test).
TEST_F(EngineRunnerTest, ASinkKnowsItsRequestIdBeforeTheFirstTokenAndCanAbortAtOnce) {
  Start(Pacing::kFast, 1.0);
  for (int i = 0; i < 20; ++i) {
    auto sink = std::make_shared<AbortAtFirstTokensSink>(runner_.get());
    SubmitArgs a;
    a.prompt_tokens = 16;
    a.max_new_tokens = 2000;
    a.ignore_eos = true;
    absl::StatusOr<std::string> id = runner_->Submit(a, sink);
    ASSERT_TRUE(id.ok()) << id.status();
    const std::optional<Completion> c = sink->Await();
    ASSERT_TRUE(c.has_value()) << "request " << i << " did not end";
    EXPECT_EQ(sink->id_at_first_tokens(), *id) << "request " << i;
    EXPECT_EQ(c->reason, Finish::kAborted) << "request " << i;
    EXPECT_LT(c->completion_tokens, 2000) << "request " << i;
  }
}

TEST_F(EngineRunnerTest, RealtimeIdleServerKeepsItsClockAndDecaysItsGaugesToZero) {
  // Speed 4: one idle simulated second (the gauges' window) passes in 0.25 wall seconds.
  Start(Pacing::kRealtime, 4.0);
  RunBurst(2);
  ASSERT_GT(Value("neupims:iterations_total"), 0);
  // While idle, the simulated clock goes on at the pacing speed, in ServerInfo and in the gauge.
  const double info_before = runner_->Snapshot().sim_time_s;
  const double gauge_before = Value("neupims:sim_time_seconds");
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_GT(runner_->Snapshot().sim_time_s - info_before, 1.0);
  EXPECT_GT(Value("neupims:sim_time_seconds") - gauge_before, 1.0);
  // The window holds no iteration any more: utilisation and power read 0.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Value("neupims:power_watts") != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  for (const char* gauge :
       {"neupims:power_watts", "neupims:pim_utilization", "neupims:npu_systolic_utilization",
        "neupims:npu_vector_utilization", "neupims:hbm_bandwidth_utilization"}) {
    EXPECT_EQ(Value(gauge), 0) << gauge;
  }
  // Under realtime pacing the busy-time ratio is the speed (the engine keeps up with it).
  EXPECT_NEAR(Value("neupims:sim_wall_time_ratio"), 4.0, 0.5);
}

TEST_F(EngineRunnerTest, SimWallTimeRatioCountsOnlyBusyWallTime) {
  Start(Pacing::kFast, 1.0);
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(300));  // idle before the burst
  RunBurst(4);
  std::this_thread::sleep_for(milliseconds(300));  // and after it
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double sim_s = Value("neupims:sim_time_seconds");
  const double ratio = Value("neupims:sim_wall_time_ratio");
  ASSERT_GT(sim_s, 0);
  // The 0.6 s of idling would more than halve a ratio over the whole wall time.
  EXPECT_GT(ratio, 2 * sim_s / wall_s) << "sim " << sim_s << " s in " << wall_s << " wall s";
}

}  // namespace
}  // namespace neupims::server
