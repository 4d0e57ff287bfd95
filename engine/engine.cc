#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/request_field.h"
#include "common/status_macros.h"
#include "hw/registry.h"
#include "scheduler/batching.h"

namespace neupims::engine {
namespace {

// The mode with the ablation overrides of `o` applied (Figure 13).
SystemMode ResolveMode(const EngineOptions& o) {
  SystemMode mode = SystemModeFor(o.mode);
  if (o.dual_row_buffers.has_value()) mode.dual_row_buffers = *o.dual_row_buffers;
  if (o.sub_batch_interleaving.has_value()) {
    mode.sub_batch_interleaving = *o.sub_batch_interleaving != SubBatchInterleaving::kOff;
    mode.adaptive_sub_batches = *o.sub_batch_interleaving == SubBatchInterleaving::kAuto;
  }
  if (o.channel_policy.has_value()) mode.channel_policy = *o.channel_policy;
  if (!mode.pim_attention) mode.sub_batch_interleaving = false;
  return mode;
}

SimTime CeilNs(double ns) { return static_cast<SimTime>(std::ceil(ns - 1e-9)); }

// `field`: the request field the refusal concerns (common/request_field.h).
absl::Status TooLarge(absl::string_view field, absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kRequestTooLargePayload, absl::Cord());
  return WithRequestField(std::move(s), field);
}

absl::Status BadField(absl::string_view field, absl::string_view message) {
  return WithRequestField(absl::InvalidArgumentError(message), field);
}

}  // namespace

bool IsRequestTooLarge(const absl::Status& status) {
  return status.GetPayload(kRequestTooLargePayload).has_value();
}

Engine::Engine(const EngineOptions& options) : options_(options) {}
Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& o) {
  if (o.max_batch < 1) return absl::InvalidArgumentError("max_batch must be >= 1");
  if (o.max_prefill_tokens < 1)
    return absl::InvalidArgumentError("max_prefill_tokens must be >= 1");
  if (o.prefill_groups < 1) return absl::InvalidArgumentError("prefill_groups must be >= 1");
  if (o.max_prompt_tokens.has_value() && *o.max_prompt_tokens < 1) {
    return absl::InvalidArgumentError("max_prompt_tokens must be >= 1");
  }
  if (o.prefill_batch_tokens < 1) {
    return absl::InvalidArgumentError("prefill_batch_tokens must be >= 1");
  }
  if (!(o.prefill_link.gb_per_s > 0) || !(o.interconnect.gb_per_s > 0)) {
    return absl::InvalidArgumentError("link bandwidths must be > 0");
  }
  RETURN_IF_ERROR(CheckDualRowBuffers(o.mode, o.dual_row_buffers));
  std::unique_ptr<Engine> e(new Engine(o));
  const SystemMode mode = ResolveMode(o);
  IterationModelOptions io;
  ASSIGN_OR_RETURN(io.model, models::LoadModelConfig(o.model));
  if (o.device_config.has_value()) {
    io.device = *o.device_config;
  } else {
    ASSIGN_OR_RETURN(io.device, hw::LoadDeviceConfig(o.device.value_or(mode.default_device())));
  }
  // The row-buffer ablation changes the device's banks.
  if (mode.pim_attention && io.device.hbm.pim.enabled) {
    io.device.hbm.pim.row_buffers =
        mode.dual_row_buffers ? hw::RowBufferMode::kDual : hw::RowBufferMode::kSingle;
  }
  io.parallelism = {o.tp.value_or(io.model.default_tp), o.pp.value_or(io.model.default_pp)};
  io.mode = mode;
  io.level = o.level;
  io.interconnect = o.interconnect;
  ASSIGN_OR_RETURN(e->iteration_, IterationModel::Create(io));

  if (o.prefill == PrefillPlacement::kStandalone) {
    IterationModelOptions po = io;
    po.mode = SystemModeFor(SystemModeKind::kNpuOnly);
    ASSIGN_OR_RETURN(po.device, hw::LoadDeviceConfig("npu-only"));
    po.device.npu = io.device.npu;  // the same NPU, without PIM
    ASSIGN_OR_RETURN(e->prefill_model_, IterationModel::Create(po));
    e->prefill_free_at_.assign(o.prefill_groups, 0);
  }

  // KV cache: per PIM channel, the channel's capacity minus its share of the weights (spread
  // over every channel). Without PIM attention the KV cache is one device-wide pool.
  const models::ModelConfig& m = io.model;
  const models::Parallelism& p = io.parallelism;
  const hw::HbmOrganization& org = io.device.hbm.org;
  const int64_t weights = models::DeviceWeightBytes(m, p);
  const int64_t kv_per_token = models::KvBytesPerToken(m, p);
  const int64_t block_bytes = kv_per_token * o.block_tokens;
  const int channels = mode.pim_attention ? org.channels : 1;
  const int64_t capacity = org.channel_capacity_bytes() * org.channels;
  if (weights >= capacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", m.name, " needs ", weights, " bytes of weights per device (tp ", p.tp, ", pp ",
        p.pp, ") but a device holds ", capacity, " bytes: raise --tp or --pp"));
  }
  const int64_t per_channel = (capacity - weights) / channels / block_bytes;
  if (per_channel < 1) {
    return absl::InvalidArgumentError("no room for a single KV block per channel");
  }
  kv_cache::BlockManagerOptions ko;
  ko.block_tokens = o.block_tokens;
  ko.blocks_per_channel.assign(channels, per_channel);
  ko.watermark = o.kv_watermark;
  ASSIGN_OR_RETURN(kv_cache::BlockManager kv, kv_cache::BlockManager::Create(ko));
  e->kv_ = std::make_unique<kv_cache::BlockManager>(std::move(kv));

  // MHA estimate for channel load balancing.
  const models::AttentionDims d = models::DeviceAttentionDims(m, p);
  const hw::AttentionShape dims{1, d.heads, d.kv_heads, d.head_dim};
  if (o.mha_estimator == MhaEstimatorKind::kAlgorithm1 && mode.pim_attention) {
    e->estimator_ = std::make_unique<scheduler::Algorithm1Estimator>(
        scheduler::Algorithm1Params::FromHardware(io.device.hbm, dims));
  } else {
    hw::DeviceConfig est_dev = io.device;
    if (!est_dev.hbm.pim.enabled) {
      ASSIGN_OR_RETURN(est_dev, hw::LoadDeviceConfig("neupims"));  // any PIM geometry works
    }
    ASSIGN_OR_RETURN(e->estimator_pim_, hw::CreatePimModel("analytic", est_dev));
    e->estimator_ = std::make_unique<scheduler::PimModelEstimator>(e->estimator_pim_.get(), dims);
  }
  scheduler::SchedulerOptions so;
  so.max_batch = o.max_batch;
  so.max_prefill_tokens = o.max_prefill_tokens;
  so.channel_policy = mode.channel_policy;
  so.sub_batches = mode.sub_batch_interleaving;
  so.sub_batch_min_decode =
      mode.adaptive_sub_batches ? static_cast<int64_t>(o.sbi_min_batch) * io.parallelism.pp : 0;
  so.standalone_prefill = o.prefill == PrefillPlacement::kStandalone;
  e->scheduler_ = std::make_unique<scheduler::Scheduler>(so, e->kv_.get(), e->estimator_.get());
  return e;
}

int Engine::kv_channels() const { return kv_->channels(); }
int64_t Engine::kv_blocks_per_channel() const { return kv_->TotalBlocks(0); }

void Engine::Push(SimTime t, EventKind kind, int64_t arg) {
  events_.push({t, event_seq_++, kind, arg});
}

Request* Engine::Get(RequestId id) {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

const Request* Engine::Find(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

absl::Status Engine::CheckRequest(const SubmitSpec& spec) const {
  const models::ModelConfig& m = model();
  if (spec.prompt_tokens < 1) {
    return BadField(kPromptTokensField,
                    absl::StrCat("prompt_tokens must be >= 1, got ", spec.prompt_tokens,
                                 spec.prompt_tokens == 0 ? " (the prompt is empty)" : ""));
  }
  if (options_.max_prompt_tokens.has_value() && spec.prompt_tokens > *options_.max_prompt_tokens) {
    return TooLarge(kPromptTokensField,
                    absl::StrCat("prompt (", spec.prompt_tokens,
                                 " tokens) exceeds the server's max_prompt_tokens (",
                                 *options_.max_prompt_tokens, ")"));
  }
  if (spec.max_new_tokens < 1) {
    return BadField(kMaxNewTokensField,
                    absl::StrCat("max_new_tokens must be >= 1, got ", spec.max_new_tokens));
  }
  // Written as a difference: a sum of two client-chosen int64 counts can overflow.
  if (spec.max_new_tokens > m.max_seq_len - spec.prompt_tokens) {
    // The field to change: the prompt when it leaves no room for even one new token.
    return TooLarge(spec.prompt_tokens >= m.max_seq_len ? kPromptTokensField : kMaxNewTokensField,
                    absl::StrCat("prompt (", spec.prompt_tokens, " tokens) + max_new_tokens (",
                                 spec.max_new_tokens, ") exceeds the context of ", m.name, " (",
                                 m.max_seq_len, " tokens)"));
  }
  const int64_t blocks = kv_->BlocksFor(spec.prompt_tokens + spec.max_new_tokens);
  if (blocks > kv_->TotalBlocks(0)) {
    const bool prompt_alone = kv_->BlocksFor(spec.prompt_tokens + 1) > kv_->TotalBlocks(0);
    return TooLarge(prompt_alone ? kPromptTokensField : kMaxNewTokensField,
                    absl::StrCat("request needs ", blocks, " KV blocks but a PIM channel holds ",
                                 kv_->TotalBlocks(0)));
  }
  return absl::OkStatus();
}

absl::Status Engine::Submit(const SubmitSpec& spec) {
  if (!fault_.ok()) {
    return absl::UnavailableError(absl::StrCat("the engine has faulted: ", fault_.message()));
  }
  RETURN_IF_ERROR(CheckRequest(spec));
  if (requests_.contains(spec.id)) {
    return absl::AlreadyExistsError(absl::StrCat("request id ", spec.id, " is already in flight"));
  }
  // Queued = waiting for admission, counting submitted requests that have not arrived yet but
  // not those the free batch slots will take at once.
  const int64_t free_slots = std::max<int64_t>(0, options_.max_batch - scheduler_->running());
  const int64_t queued =
      scheduler_->waiting() + std::max<int64_t>(0, pending_arrivals_ - free_slots);
  if (options_.max_waiting.has_value() && queued >= *options_.max_waiting) {
    return absl::ResourceExhaustedError(
        absl::StrCat("waiting queue is full (", *options_.max_waiting, " requests); retry later"));
  }
  auto r = std::make_unique<Request>();
  r->id = spec.id;
  r->prompt_tokens = spec.prompt_tokens;
  r->max_new_tokens = spec.max_new_tokens;
  r->priority = spec.priority;
  r->arrival = std::max(spec.arrival, now_);
  Push(r->arrival, EventKind::kArrival, r->id);
  ++pending_arrivals_;
  requests_.emplace(spec.id, std::move(r));
  ++stats_.submitted;
  return absl::OkStatus();
}

void Engine::Notify(Request* r) {
  switch (r->finish_reason) {
    case scheduler::FinishReason::kLength:
      ++stats_.finished;
      break;
    case scheduler::FinishReason::kAborted:
      ++stats_.aborted;
      break;
    case scheduler::FinishReason::kRejected:
      ++stats_.rejected;
      break;
    case scheduler::FinishReason::kNone:
      break;
  }
  if (observer_ != nullptr) observer_->OnFinished(*r);
  Release(r);
}

void Engine::Release(Request* r) {
  auto it = requests_.find(r->id);
  if (it == requests_.end()) return;
  graveyard_.push_back(std::move(it->second));
  requests_.erase(it);
}

absl::Status Engine::Abort(RequestId id) {
  Request* r = Get(id);
  if (r == nullptr || r->terminal()) {
    return absl::NotFoundError(absl::StrCat("no live request with id ", id));
  }
  if (r->state == scheduler::RequestState::kWaiting && r->arrival > now_) {
    // Not arrived yet: it never reaches the scheduler (its arrival event is ignored).
    --pending_arrivals_;
    r->finish_reason = scheduler::FinishReason::kAborted;
    r->finished = now_;
    RETURN_IF_ERROR(scheduler::Transition(*r, scheduler::RequestState::kAborted));
  } else {
    auto q = std::find(prefill_queue_.begin(), prefill_queue_.end(), id);
    if (q != prefill_queue_.end()) prefill_queue_.erase(q);
    prefill_token_time_.erase(id);
    RETURN_IF_ERROR(scheduler_->Abort(r));
    r->finished = now_;
  }
  Notify(r);
  return absl::OkStatus();
}

SimTime Engine::NextEventTime() const {
  return events_.empty() ? scheduler::kNoTime : events_.top().time;
}

absl::Status Engine::AdvanceTo(SimTime t) {
  if (!fault_.ok()) return fault_;
  while (!events_.empty() && events_.top().time <= t) {
    const Event e = events_.top();
    events_.pop();
    now_ = std::max(now_, e.time);
    if (stats_.first_event < 0) stats_.first_event = now_;
    stats_.last_event = now_;
    absl::Status s = Process(e);
    if (s.ok()) s = scheduler_->fault();
    if (!s.ok()) {
      fault_ = s;
      return s;
    }
  }
  now_ = std::max(now_, t);
  return absl::OkStatus();
}

absl::Status Engine::RunToCompletion() {
  while (!events_.empty()) {
    RETURN_IF_ERROR(AdvanceTo(events_.top().time));
  }
  return absl::OkStatus();
}

absl::Status Engine::Process(const Event& e) {
  switch (e.kind) {
    case EventKind::kArrival: {
      Request* r = Get(e.arg);
      if (r == nullptr || r->terminal()) return absl::OkStatus();  // aborted before arriving
      --pending_arrivals_;
      RETURN_IF_ERROR(scheduler_->Add(r));
      return MaybeStartIteration();
    }
    case EventKind::kIterationEnd:
      RETURN_IF_ERROR(EndIteration());
      RETURN_IF_ERROR(DispatchPrefill());
      return MaybeStartIteration();
    case EventKind::kPrefillDone: {
      auto it = prefill_batches_.find(e.arg);
      if (it == prefill_batches_.end()) return absl::OkStatus();
      PrefillBatch batch = std::move(it->second);
      prefill_batches_.erase(it);
      const models::ModelConfig& m = model();
      const models::Parallelism& p = parallelism();
      for (RequestId id : batch.requests) {
        Request* r = Get(id);
        if (r == nullptr || r->state != scheduler::RequestState::kPrefilling) continue;
        // The prefill produced the next token (the first, unless this is a recompute after a
        // preemption); decoding needs the KV cache on the device.
        prefill_token_time_[id] = now_;
        if (observer_ != nullptr) observer_->OnTokens(*r, r->generated, 1, now_);
        if (r->max_new_tokens - r->generated <= 1) {
          prefill_token_time_.erase(id);
          RETURN_IF_ERROR(scheduler_->PrefillDone(r, now_));
          if (r->terminal()) Notify(r);
          continue;
        }
        const double bytes =
            static_cast<double>(r->context_tokens() * models::KvBytesPerToken(m, p));
        Push(now_ + CeilNs(options_.prefill_link.TransferNs(bytes)), EventKind::kKvReady, id);
      }
      GiveBackRequestList(std::move(batch.requests));
      RETURN_IF_ERROR(DispatchPrefill());
      return MaybeStartIteration();
    }
    case EventKind::kKvReady: {
      Request* r = Get(e.arg);
      if (r == nullptr || r->state != scheduler::RequestState::kPrefilling) return absl::OkStatus();
      auto t = prefill_token_time_.find(r->id);
      const SimTime token_time = t != prefill_token_time_.end() ? t->second : now_;
      if (t != prefill_token_time_.end()) prefill_token_time_.erase(t);
      RETURN_IF_ERROR(scheduler_->PrefillDone(r, token_time));
      if (r->terminal()) Notify(r);
      return MaybeStartIteration();
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::MaybeStartIteration() {
  if (in_flight_) return absl::OkStatus();
  graveyard_.clear();
  // Into the in-flight step's buffers (none is in flight): no allocation per iteration.
  scheduler::ScheduleOutput& out = current_;
  scheduler_->Schedule(now_, &out);
  RETURN_IF_ERROR(scheduler_->fault());
  for (Request* r : out.rejected) Notify(r);
  stats_.preemptions += static_cast<int64_t>(out.preempted.size());
  const bool local = options_.prefill == PrefillPlacement::kLocal;
  if (!local) {
    for (Request* r : out.prefill) prefill_queue_.push_back(r->id);
    RETURN_IF_ERROR(DispatchPrefill());
  }
  IterationInput& in = iteration_input_;  // reused: no allocation in steady state
  // The model reads the scheduler's lists in place (out lives until EndIteration). The scheduler
  // reserved this iteration's slot: the KV cache holds each request's whole context
  // (kv_->TokensOf(id) == context_tokens(), which the model reads, without a lookup).
  for (int s = 0; s < 2; ++s) in.decode[s] = out.sub_batch[s];
  in.prefill_prompts.clear();
  if (local) {
    for (Request* r : out.prefill) in.prefill_prompts.push_back(r->context_tokens());
  }
  if (in.decode[0].empty() && in.decode[1].empty() && in.prefill_prompts.empty()) {
    return absl::OkStatus();  // nothing to run until an arrival or a prefill completes
  }
  in.record_timeline = stats_.iterations < timeline_iterations_;
  ASSIGN_OR_RETURN(current_cost_, iteration_->Run(in));
  in_flight_ = true;
  iteration_start_ = now_;
  Push(now_ + std::max<SimTime>(1, CeilNs(current_cost_.duration_ns)), EventKind::kIterationEnd, 0);
  return absl::OkStatus();
}

absl::Status Engine::EndIteration() {
  in_flight_ = false;
  const scheduler::ScheduleOutput& out = current_;
  const IterationCost& c = current_cost_;
  const bool local = options_.prefill == PrefillPlacement::kLocal;
  int64_t prefill_tokens = 0;  // of the local prefills, counted before they produce a token
  if (local) {
    for (Request* r : out.prefill) {
      if (r->state == scheduler::RequestState::kRunning) prefill_tokens += r->context_tokens();
    }
  }
  // Tokens of this iteration (requests aborted meanwhile produce nothing), listed by the
  // scheduler as it counts them: decodes, then local prefills (Scheduler::step_tokens).
  const bool list_tokens = observer_ != nullptr && observer_->WantsIterationTokens();
  scheduler_->set_list_step_tokens(list_tokens);
  std::vector<Request*> finished = scheduler_->CompleteStep(out, now_);
  RETURN_IF_ERROR(scheduler_->fault());
  if (observer_ != nullptr) {
    if (list_tokens) observer_->OnIterationTokens(scheduler_->step_tokens(), now_);
    observer_->OnIterationGaps(scheduler_->step_gaps(), now_);
  }
  // Statistics.
  ++stats_.iterations;
  stats_.busy_ns += now_ - iteration_start_;
  stats_.decode_tokens += static_cast<int64_t>(out.decode.size());
  stats_.prompt_tokens_computed += prefill_tokens;
  stats_.batch_sum += static_cast<int64_t>(out.decode.size());
  for (int s = 0; s < 2; ++s) stats_.sub_batch_sum[s] += c.sub_batch_sizes[s];
  if (!out.decode.empty() && mode().pim_attention) {
    stats_.channel_imbalance_sum += c.channel_imbalance;
    ++stats_.pim_iterations;
  }
  static_cast<HwCost&>(stats_) += c;
  if (observer_ != nullptr) {
    IterationRecord rec;
    rec.index = stats_.iterations - 1;
    rec.start = iteration_start_;
    rec.end = now_;
    rec.decode = static_cast<int64_t>(out.decode.size());
    rec.prefill = static_cast<int64_t>(out.prefill.size());
    rec.preempted = static_cast<int64_t>(out.preempted.size());
    rec.sub_batch = c.sub_batch_sizes;
    rec.prefill_tokens = prefill_tokens;
    rec.kv_usage = kv_->Usage();
    rec.cost = &c;
    observer_->OnIteration(rec);
  }
  for (Request* r : finished) Notify(r);
  return absl::OkStatus();
}

absl::Status Engine::DispatchPrefill() {
  if (prefill_model_ == nullptr) return absl::OkStatus();
  for (size_t g = 0; g < prefill_free_at_.size() && !prefill_queue_.empty(); ++g) {
    if (prefill_free_at_[g] > now_) continue;
    // The prompts straight into the reused input, the ids into a list a finished batch gave
    // back: no allocation per batch in steady state.
    std::vector<int64_t>& prompts = prefill_input_.prefill_prompts;
    prompts.clear();
    std::vector<RequestId> requests = TakeRequestList();
    int64_t tokens = 0;
    while (!prefill_queue_.empty()) {
      Request* r = Get(prefill_queue_.front());
      if (r == nullptr || r->state != scheduler::RequestState::kPrefilling) {
        prefill_queue_.pop_front();
        continue;
      }
      const int64_t t = r->context_tokens();
      if (!prompts.empty() && tokens + t > options_.prefill_batch_tokens) break;
      prompts.push_back(t);
      tokens += t;
      requests.push_back(r->id);
      prefill_queue_.pop_front();
    }
    if (prompts.empty()) {
      GiveBackRequestList(std::move(requests));
      break;
    }
    ASSIGN_OR_RETURN(const IterationCost* c, prefill_model_->RunPrefill(prefill_input_));
    const SimTime done = now_ + std::max<SimTime>(1, CeilNs(c->duration_ns));
    prefill_free_at_[g] = done;
    stats_.prefill_busy_ns += c->duration_ns;
    stats_.prefill_j += c->energy_j();
    stats_.prompt_tokens_computed += tokens;
    const int64_t id = next_prefill_batch_++;
    prefill_batches_.emplace(id, PrefillBatch{std::move(requests), static_cast<int>(g)});
    Push(done, EventKind::kPrefillDone, id);
  }
  return absl::OkStatus();
}

std::vector<RequestId> Engine::TakeRequestList() {
  if (spare_request_lists_.empty()) return {};
  std::vector<RequestId> list = std::move(spare_request_lists_.back());
  spare_request_lists_.pop_back();
  return list;
}

void Engine::GiveBackRequestList(std::vector<RequestId> list) {
  list.clear();
  spare_request_lists_.push_back(std::move(list));
}

absl::Status Engine::CheckStepRequest(const StepRequest& r) const {
  if (r.seq_len < 1 || r.seq_len > model().max_seq_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("seq_len ", r.seq_len, " outside [1, ", model().max_seq_len, "]"));
  }
  const int channels = device().hbm.org.channels;
  if (mode().pim_attention && (r.channel >= channels || r.channel < -1)) {  // -1: the policy's
    return absl::InvalidArgumentError(
        absl::StrCat("channel ", r.channel, " outside [0, ", channels - 1, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<IterationCost> Engine::SimulateStep(const std::vector<StepRequest>& batch,
                                                   int layers, bool timeline) {
  if (batch.empty()) return absl::InvalidArgumentError("the batch is empty");
  const int channels = mode().pim_attention ? device().hbm.org.channels : 1;
  std::vector<int> channel(batch.size(), -1);
  std::vector<size_t> unassigned;
  std::vector<double> loads(channels, 0.0);
  for (size_t i = 0; i < batch.size(); ++i) {
    const StepRequest& r = batch[i];
    if (absl::Status s = CheckStepRequest(r); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("request ", i, ": ", s.message()));
    }
    if (!mode().pim_attention) {
      channel[i] = 0;  // no PIM: the KV cache is one device-wide pool
      continue;
    }
    if (r.channel >= 0) {
      channel[i] = r.channel;
      loads[r.channel] += estimator_->Estimate(r.seq_len);
    } else {
      unassigned.push_back(i);
    }
  }
  auto any = [](int, int) { return true; };
  if (mode().channel_policy == scheduler::ChannelPolicy::kMinLoad) {
    std::stable_sort(unassigned.begin(), unassigned.end(),
                     [&](size_t a, size_t b) { return batch[a].seq_len > batch[b].seq_len; });
    std::vector<double> req_loads;
    for (size_t i : unassigned) req_loads.push_back(estimator_->Estimate(batch[i].seq_len));
    std::vector<int> got = scheduler::GreedyMinLoad(loads, req_loads, any);
    for (size_t k = 0; k < unassigned.size(); ++k) channel[unassigned[k]] = got[k];
  } else {
    int cursor = 0;
    std::vector<int> got =
        scheduler::RoundRobin(channels, static_cast<int>(unassigned.size()), &cursor, any);
    for (size_t k = 0; k < unassigned.size(); ++k) channel[unassigned[k]] = got[k];
  }
  IterationInput in;
  const bool interleave = mode().sub_batch_interleaving &&
                          (!mode().adaptive_sub_batches ||
                           static_cast<int64_t>(batch.size()) >=
                               static_cast<int64_t>(options_.sbi_min_batch) * parallelism().pp);
  if (interleave) {
    std::vector<std::vector<DecodeItem>> per_channel(channels);
    for (size_t i = 0; i < batch.size(); ++i) {
      per_channel[channel[i]].push_back({batch[i].seq_len, channel[i]});
    }
    auto [a, b] = scheduler::PartitionSubBatches(per_channel);
    in.sub_batches[0] = std::move(a);
    in.sub_batches[1] = std::move(b);
  } else {
    for (size_t i = 0; i < batch.size(); ++i) {
      in.sub_batches[0].push_back({batch[i].seq_len, channel[i]});
    }
  }
  in.layers = layers;
  in.record_timeline = timeline;
  return iteration_->Run(in);
}

absl::Status Engine::CheckInvariants() const {
  if (!fault_.ok()) return fault_;
  if (absl::Status s = kv_->CheckInvariants(); !s.ok()) return s;
  if (absl::Status s = scheduler_->CheckInvariants(); !s.ok()) return s;
  int64_t live_with_kv = 0, decoding = 0;
  for (const auto& [id, request] : requests_) {
    if (!kv_->Has(id)) continue;
    ++live_with_kv;
    const bool decodes = request->decoding();
    decoding += decodes ? 1 : 0;
    if (decodes != kv_->Streaming(id)) {
      return absl::InternalError(absl::StrCat(
          "request ", id, (decodes ? " decodes but is not" : " does not decode but is"),
          " in the KV cache's stream"));
    }
  }
  if (live_with_kv != kv_->requests()) {
    return absl::InternalError(absl::StrCat("the KV cache holds blocks of ", kv_->requests(),
                                            " requests, of which only ", live_with_kv,
                                            " are live"));
  }
  if (decoding != kv_->streaming()) {
    return absl::InternalError(absl::StrCat(kv_->streaming(),
                                            " requests in the KV cache's stream, ", decoding,
                                            " live requests decode"));
  }
  const int64_t queued = scheduler_->running() + scheduler_->waiting();
  if (queued > static_cast<int64_t>(requests_.size())) {
    return absl::InternalError(absl::StrCat("the scheduler holds ", queued, " requests but only ",
                                            requests_.size(), " are live"));
  }
  return absl::OkStatus();
}

EngineLoad Engine::Load() const {
  EngineLoad l;
  l.running = scheduler_->running() - scheduler_->prefilling();
  l.prefilling = scheduler_->prefilling();
  l.waiting = scheduler_->waiting();
  l.kv_usage = kv_->Usage();
  for (int c = 0; c < kv_->channels(); ++c) {
    const int64_t total = kv_->TotalBlocks(c);
    l.channel_kv_usage.push_back(total > 0 ? static_cast<double>(kv_->UsedBlocks(c)) / total : 0);
    l.kv_blocks_used += kv_->UsedBlocks(c);
    l.kv_blocks_total += total;
  }
  return l;
}

}  // namespace neupims::engine
