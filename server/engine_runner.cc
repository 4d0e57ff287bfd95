#include "server/engine_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "scheduler/request.h"
#include "server/metrics.h"
#include "server/start_thread.h"

namespace neupims::server {

namespace {

constexpr EnumName<Pacing> kPacings[] = {
    {"realtime", Pacing::kRealtime},
    {"fast", Pacing::kFast},
};

std::shared_ptr<const ServedEngine> DescribeServed(const engine::Engine& e) {
  auto served = std::make_shared<ServedEngine>();
  served->model = e.model();
  served->device = e.device();
  served->mode = e.mode().name;
  served->parallelism = e.parallelism();
  served->max_waiting = e.options().max_waiting.value_or(0);
  return served;
}

}  // namespace

const EnumNames<Pacing>& PacingNames() {
  static constexpr EnumNames<Pacing> kNames("pacing", kPacings);
  return kNames;
}

const char* ToString(Pacing p) { return PacingNames().ToString(p); }

// Engine observer: turns engine events into sink calls and metrics (engine thread).
class EngineRunner::Observer : public engine::EngineObserver {
 public:
  explicit Observer(EngineRunner* runner) : runner_(runner) {}

  void OnTokens(const engine::Request& r, int64_t first_index, int count,
                engine::SimTime t) override {
    auto it = runner_->live_.find(r.id);
    if (it == runner_->live_.end()) return;
    // Reused across calls (engine thread only): no allocation per stream and iteration.
    tokens_.clear();
    for (int i = 0; i < count; ++i) {
      const int64_t index = first_index + i;
      tokens_.push_back({index, SyntheticTokens::TokenId(it->second.seed, index), t / 1e9});
    }
    it->second.delivered += count;
    it->second.sink->OnTokens(tokens_);
    if (runner_->metrics_ != nullptr) runner_->metrics_->OnGenerationTokens(count);
  }

  void OnFinished(const engine::Request& r) override {
    auto it = runner_->live_.find(r.id);
    if (it == runner_->live_.end()) return;
    Completion c;
    c.request_id = it->second.id;
    switch (r.finish_reason) {
      case scheduler::FinishReason::kLength:
        c.reason = it->second.stop_early ? Finish::kStop : Finish::kLength;
        break;
      case scheduler::FinishReason::kRejected:
        c.reason = Finish::kRejected;
        break;
      default:
        c.reason = Finish::kAborted;
        break;
    }
    c.prompt_tokens = r.prompt_tokens;
    c.completion_tokens = it->second.delivered;
    const scheduler::RequestLatencies l = scheduler::Latencies(r);
    c.queue_time_s = static_cast<double>(l.queue_ns.value_or(0)) / 1e9;
    c.ttft_s = static_cast<double>(l.ttft_ns.value_or(0)) / 1e9;
    c.e2e_latency_s = static_cast<double>(l.e2e_ns.value_or(0)) / 1e9;
    c.tpot_s = l.tpot_ns.value_or(0) / 1e9;
    c.pim_channel = runner_->engine_->mode().pim_attention ? r.channel : -1;
    c.preemptions = r.preemptions;
    c.error = r.error;
    std::shared_ptr<RequestSink> sink = std::move(it->second.sink);
    runner_->by_name_.erase(it->second.id);
    runner_->live_.erase(it);
    {
      absl::MutexLock l(&runner_->mu_);
      --runner_->live_count_;
    }
    if (runner_->metrics_ != nullptr) runner_->metrics_->OnFinished(r, c);
    sink->OnComplete(c);
  }

  void OnIteration(const engine::IterationRecord& it) override {
    if (runner_->metrics_ != nullptr) {
      runner_->metrics_->OnIteration(it, runner_->engine_->stats());
    }
  }

 private:
  EngineRunner* runner_;
  std::vector<GeneratedToken> tokens_;  // OnTokens' scratch
};

EngineRunner::EngineRunner(const RunnerOptions& options, ServerMetrics* metrics)
    : options_(options), metrics_(metrics) {}

absl::StatusOr<std::unique_ptr<EngineRunner>> EngineRunner::Create(const RunnerOptions& options,
                                                                   ServerMetrics* metrics) {
  if (!(options.speed > 0) || !std::isfinite(options.speed)) {
    return absl::InvalidArgumentError("speed must be a positive number");
  }
  // Debian's Abseil tracks every Mutex in a deadlock-detection graph; with a mutex per stream
  // that bookkeeping sits on the token path, so turn it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::unique_ptr<EngineRunner> r(new EngineRunner(options, metrics));
  ASSIGN_OR_RETURN(r->engine_, engine::Engine::Create(options.engine));
  r->served_ = DescribeServed(*r->engine_);
  {
    absl::MutexLock l(&r->mu_);
    r->snapshot_.served = r->served_;
  }
  r->observer_ = std::make_unique<Observer>(r.get());
  r->engine_->set_observer(r->observer_.get());
  r->wall_start_ = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(r->thread_, StartThread("the engine thread", [p = r.get()] { p->Loop(); }));
  return r;
}

EngineRunner::~EngineRunner() { Stop(); }

engine::SimTime EngineRunner::SimNow() const {
  return static_cast<engine::SimTime>(WallSeconds() * 1e9 * options_.speed);
}

double EngineRunner::WallSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
}

double EngineRunner::CurrentSimSeconds() const {
  const engine::SimTime engine_now = engine_->now();
  if (options_.pacing == Pacing::kFast) return static_cast<double>(engine_now) / 1e9;
  return static_cast<double>(std::max(engine_now, SimNow())) / 1e9;
}

bool EngineRunner::HasWork() const {
  return !live_.empty() || engine_->NextEventTime() != scheduler::kNoTime;
}

void EngineRunner::ObserveBusy() {
  busy_ = HasWork();
  busy_clock_.Observe(busy_, {.wall_s = WallSeconds(), .sim_s = CurrentSimSeconds()});
}

void EngineRunner::Post(std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  commands_.push_back({std::move(fn)});
}

void EngineRunner::Call(std::function<void()> fn) {
  absl::Notification done;
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    commands_.push_back({[&] {
      fn();
      done.Notify();
    }});
  }
  done.WaitForNotification();
}

absl::StatusOr<std::string> EngineRunner::Submit(const SubmitArgs& args,
                                                 std::shared_ptr<RequestSink> sink) {
  {
    absl::MutexLock l(&mu_);
    if (!fault_.ok()) {
      return absl::UnavailableError(
          absl::StrCat("the engine has faulted and accepts no requests: ", fault_.message()));
    }
    if (draining_ || stop_) {
      return absl::UnavailableError("the server is shutting down; not accepting new requests");
    }
  }
  absl::StatusOr<std::string> result = absl::UnavailableError("the engine has stopped");
  Call([&] {
    engine::SubmitSpec spec;
    spec.prompt_tokens = args.prompt_tokens;
    spec.max_new_tokens = args.max_new_tokens;
    spec.priority = args.priority;
    // The request as the client asked for it, before the synthetic end of sequence shortens it.
    if (absl::Status s = engine_->CheckRequest(spec); !s.ok()) {
      result = s;
      return;
    }
    std::string name = args.request_id;
    if (name.empty()) name = absl::StrCat("req-", next_name_++);
    if (by_name_.contains(name)) {
      result = absl::AlreadyExistsError(absl::StrCat("request '", name, "' is already live"));
      return;
    }
    int64_t max_new = args.max_new_tokens;
    bool stop_early = false;
    if (!args.ignore_eos) {
      const int64_t stop = SyntheticTokens::StopLength(args.seed, options_.mean_output_tokens);
      if (stop < max_new) {
        max_new = stop;
        stop_early = true;
      }
    }
    const int64_t id = next_engine_id_++;
    spec.id = id;
    spec.max_new_tokens = max_new;
    spec.arrival =
        options_.pacing == Pacing::kRealtime ? std::max(SimNow(), engine_->now()) : engine_->now();
    absl::Status s = engine_->Submit(spec);
    if (!s.ok()) {
      result = s;
      return;
    }
    sink->OnAccepted(name);
    live_[id] = Live{name, std::move(sink), args.seed, stop_early};
    by_name_[name] = id;
    {
      absl::MutexLock l(&mu_);
      ++live_count_;
    }
    if (metrics_ != nullptr) metrics_->OnPromptTokens(args.prompt_tokens);
    result = name;
  });
  return result;
}

absl::Status EngineRunner::Abort(const std::string& request_id) {
  absl::Status result = absl::UnavailableError("the engine has stopped");
  Call([&] {
    auto it = by_name_.find(request_id);
    if (it == by_name_.end()) {
      result = absl::NotFoundError(absl::StrCat("no live request '", request_id, "'"));
      return;
    }
    result = engine_->Abort(it->second);
  });
  return result;
}

void EngineRunner::AbortAsync(const std::string& request_id) {
  Post([this, request_id] {
    auto it = by_name_.find(request_id);
    if (it != by_name_.end()) (void)engine_->Abort(it->second);
  });
}

void EngineRunner::RecordSendLag(double first_token_sim_time_s) {
  if (options_.pacing != Pacing::kRealtime) return;
  const double lag_s = WallSeconds() - first_token_sim_time_s / options_.speed;
  if (metrics_ != nullptr) metrics_->OnTokenSendLag(lag_s);
  if (options_.record_send_lag) {
    absl::MutexLock l(&lag_mu_);
    send_lags_.push_back(lag_s);
  }
}

std::vector<double> EngineRunner::TakeSendLags() {
  absl::MutexLock l(&lag_mu_);
  std::vector<double> out;
  out.swap(send_lags_);
  return out;
}

void EngineRunner::SetMetrics(ServerMetrics* metrics) {
  Call([this, metrics] { metrics_ = metrics; });
}

ServerSnapshot EngineRunner::Snapshot() {
  absl::MutexLock l(&mu_);
  ServerSnapshot s = snapshot_;
  // Realtime: the simulated clock runs on between the engine thread's updates.
  if (options_.pacing == Pacing::kRealtime) {
    s.sim_time_s = std::max(s.sim_time_s, static_cast<double>(SimNow()) / 1e9);
  }
  s.live = live_count_;
  s.draining = draining_;
  s.faulted = !fault_.ok();
  return s;
}

void EngineRunner::UpdateLoadMetrics() {
  const engine::EngineLoad load = engine_->Load();
  ServerSnapshot s;
  s.running = load.running;
  s.waiting = load.waiting;
  s.prefilling = load.prefilling;
  s.kv_usage = load.kv_usage;
  s.channel_kv_usage = load.channel_kv_usage;
  s.kv_blocks_used = load.kv_blocks_used;
  s.kv_blocks_total = load.kv_blocks_total;
  s.sim_time_s = CurrentSimSeconds();
  s.iterations = engine_->stats().iterations;
  s.served = served_;
  ObserveBusy();
  if (metrics_ != nullptr) metrics_->SetLoad(load, s.sim_time_s, busy_clock_.ratio());
  absl::MutexLock l(&mu_);
  snapshot_ = std::move(s);
}

void EngineRunner::Loop() {
  const bool fast = options_.pacing == Pacing::kFast;
  int64_t loops = 0;
  while (true) {
    std::deque<Command> cmds;
    {
      absl::MutexLock l(&mu_);
      cmds.swap(commands_);
      if (stop_ && cmds.empty()) break;
    }
    for (Command& c : cmds) c.run();
    // The busy clock hears of every change between idle and busy, and of the load updates.
    if (HasWork() != busy_) ObserveBusy();
    bool progressed = false;
    absl::Status advanced;
    if (!engine_->fault().ok()) {
      // Stopped for good: only commands (answered with errors) are served.
    } else if (fast) {
      if (engine_->NextEventTime() != scheduler::kNoTime) {
        advanced = engine_->AdvanceTo(engine_->NextEventTime());
        progressed = advanced.ok();
      }
    } else {
      advanced = engine_->AdvanceTo(SimNow());
    }
    if (!advanced.ok()) EnterFault(advanced);
    // Load gauges: every loop in realtime; every 64 event batches when running flat out.
    if (!fast || !progressed || (++loops & 63) == 0) UpdateLoadMetrics();
    if (fast && progressed) continue;
    // Sleep until the next simulated event is due on the wall clock, or a command arrives. The
    // sleep ends a little early and the last stretch is a yielding spin: timed waits wake up
    // late by tens of microseconds to milliseconds on a busy machine, which would delay tokens.
    constexpr double kSpinNs = 300e3;
    absl::Duration wait = absl::InfiniteDuration();
    const engine::SimTime next =
        engine_->fault().ok() ? engine_->NextEventTime() : scheduler::kNoTime;
    if (!fast && next != scheduler::kNoTime) {
      const double wall_target_ns = static_cast<double>(next) / options_.speed;
      auto wall_now_ns = [this] {
        return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() -
                                                        wall_start_)
            .count();
      };
      const double remaining = wall_target_ns - wall_now_ns();
      if (remaining <= kSpinNs) {
        while (wall_now_ns() < wall_target_ns) {
          {
            absl::MutexLock l(&mu_);
            if (!commands_.empty() || stop_) break;
          }
          std::this_thread::yield();
        }
        continue;
      }
      wait = absl::Nanoseconds(remaining - kSpinNs);
    }
    if (!fast) wait = std::min(wait, kIdleRefresh);
    absl::MutexLock l(&mu_);
    auto ready = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !commands_.empty() || stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
  }
}

void EngineRunner::SetFaultHandler(std::function<void(const absl::Status&)> handler) {
  Call([this, &handler] { fault_handler_ = std::move(handler); });
}

absl::Status EngineRunner::CheckInvariants() {
  absl::Status result = absl::UnavailableError("the engine runner has stopped");
  Call([&] { result = engine_->CheckInvariants(); });
  return result;
}

void EngineRunner::InjectKvFaultForTesting() {
  Call([this] { engine_->InjectKvFaultForTesting(); });
}

void EngineRunner::EnterFault(const absl::Status& error) {
  const absl::Status internal = absl::InternalError(
      absl::StrCat("the engine stopped on a broken invariant: ", error.message()));
  {
    absl::MutexLock l(&mu_);
    fault_ = internal;
  }
  std::fprintf(stderr,
               "neupims: ENGINE FAULT at simulated %.6f s: %s; %zu live request(s) end with "
               "INTERNAL, no new requests are admitted, health is NOT_SERVING\n",
               static_cast<double>(engine_->now()) / 1e9, internal.ToString().c_str(),
               live_.size());
  if (metrics_ != nullptr) metrics_->OnEngineFault();
  // Health first: a client that sees its stream end with INTERNAL then finds NOT_SERVING.
  if (fault_handler_) fault_handler_(internal);
  absl::flat_hash_map<int64_t, Live> live;
  live.swap(live_);
  by_name_.clear();
  {
    absl::MutexLock l(&mu_);
    live_count_ -= static_cast<int64_t>(live.size());
  }
  for (auto& [engine_id, l] : live) {
    Completion c;
    c.request_id = l.id;
    c.reason = Finish::kAborted;
    c.completion_tokens = l.delivered;
    c.error = std::string(internal.message());
    c.status = internal;
    if (metrics_ != nullptr) metrics_->OnRequestError("INTERNAL");
    l.sink->OnComplete(c);
  }
}

void EngineRunner::BeginDrain() {
  absl::MutexLock l(&mu_);
  draining_ = true;
}

bool EngineRunner::WaitDrained(std::chrono::milliseconds timeout) {
  absl::MutexLock l(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_count_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&drained), absl::FromChrono(timeout));
}

void EngineRunner::Stop() {
  if (!thread_.joinable()) return;
  BeginDrain();
  Call([this] {
    std::vector<int64_t> ids;
    for (const auto& [id, live] : live_) ids.push_back(id);
    for (int64_t id : ids) (void)engine_->Abort(id);
  });
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
  // A Submit that passed the draining check just before BeginDrain can queue its command behind
  // the abort above: its request is live but the engine thread is gone. End its stream here (the
  // thread is joined, so its state is ours), or its client would wait forever.
  for (auto& [engine_id, live] : live_) {
    Completion c;
    c.request_id = live.id;
    c.reason = Finish::kAborted;
    c.completion_tokens = live.delivered;
    c.error = "the server stopped";
    live.sink->OnComplete(c);
  }
  live_.clear();
  by_name_.clear();
}

}  // namespace neupims::server
