#include "scheduler/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/batching.h"

namespace neupims::scheduler {

namespace {
constexpr EnumName<ChannelPolicy> kChannelPolicies[] = {
    {"round_robin", ChannelPolicy::kRoundRobin},
    {"min_load", ChannelPolicy::kMinLoad},
    {"rr", ChannelPolicy::kRoundRobin},
    {"minload", ChannelPolicy::kMinLoad},
};

// running_ and decoders_ are in admission order (admitted requests are appended with the next
// Request::admission): a request is found by binary search, not a scan. end() if absent.
std::vector<Request*>::const_iterator FindAdmitted(const std::vector<Request*>& requests,
                                                   const Request* r) {
  auto it = std::lower_bound(
      requests.begin(), requests.end(), r->admission,
      [](const Request* a, int64_t admission) { return a->admission < admission; });
  return it != requests.end() && *it == r ? it : requests.end();
}
}  // namespace

const EnumNames<ChannelPolicy>& ChannelPolicyNames() {
  static constexpr EnumNames<ChannelPolicy> kNames("channel policy", kChannelPolicies);
  return kNames;
}

const char* ToString(ChannelPolicy p) { return ChannelPolicyNames().ToString(p); }

Scheduler::Scheduler(const SchedulerOptions& options, kv_cache::BlockManager* kv,
                     MhaEstimator* estimator)
    : options_(options),
      kv_(kv),
      estimator_(estimator),
      channel_decoders_(static_cast<size_t>(std::max(0, kv->channels()))) {}

absl::Status Scheduler::Add(Request* r) {
  if (r->state != RequestState::kWaiting) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", r->id, " is ", ToString(r->state), ", not waiting"));
  }
  // Requests mostly arrive in wait order (a replay submits them by arrival time, then id), so
  // the queue's end is the usual place: with it as the hint, std::set checks the last element
  // and links the new one there, instead of a search from the root (O(log n) comparisons, each
  // reading two requests). Anywhere else the hint costs one comparison and the search follows.
  const size_t before = waiting_.size();
  waiting_.insert(waiting_.end(), r);
  if (waiting_.size() == before) {
    return absl::AlreadyExistsError(absl::StrCat("request ", r->id, " is already queued"));
  }
  return absl::OkStatus();
}

void Scheduler::Record(const absl::Status& s, const char* what, const Request& r) {
  if (s.ok() || !fault_.ok()) return;
  fault_ = absl::Status(s.code(), absl::StrCat(what, " request ", r.id, ": ", s.message()));
}

absl::Status Scheduler::fault() const {
  if (!fault_.ok()) return fault_;
  return estimator_ != nullptr ? estimator_->status() : absl::OkStatus();
}

void Scheduler::RemoveRunning(Request* r) {
  auto it = FindAdmitted(running_, r);
  if (it != running_.end()) running_.erase(it);
  StopDecoding(r);
}

namespace {
// Inserts r into `requests` (in admission order) at its place; usually the latest admitted, so
// searched from the back.
void InsertAdmitted(std::vector<Request*>* requests, Request* r) {
  auto at = requests->end();
  while (at != requests->begin() && (*(at - 1))->admission > r->admission) --at;
  requests->insert(at, r);
}
}  // namespace

absl::Status Scheduler::StartDecoding(Request* r) {
  // An admitted request's channel is one the KV cache allocated on.
  if (r->channel < 0 || r->channel >= static_cast<int>(channel_decoders_.size())) {
    return absl::InternalError(absl::StrCat("request ", r->id, " decodes on channel ", r->channel,
                                            " of ", channel_decoders_.size()));
  }
  RETURN_IF_ERROR(kv_->JoinStream(r->id));
  InsertAdmitted(&decoders_, r);
  InsertAdmitted(&channel_decoders_[static_cast<size_t>(r->channel)], r);
  return absl::OkStatus();
}

void Scheduler::StopDecoding(Request* r) {
  auto it = FindAdmitted(decoders_, r);
  if (it != decoders_.end()) {
    decoders_.erase(it);
    // A decoding request's channel does not change until it stops decoding (Preempt resets it
    // after RemoveRunning).
    std::vector<Request*>& list = channel_decoders_[static_cast<size_t>(r->channel)];
    auto at = FindAdmitted(list, r);
    if (at != list.end()) list.erase(at);
  }
}

void Scheduler::ClearDecoders() {
  decoders_.clear();
  for (std::vector<Request*>& list : channel_decoders_) list.clear();
}

absl::Status Scheduler::Abort(Request* r) {
  if (r->terminal()) {
    return absl::FailedPreconditionError(absl::StrCat("request ", r->id, " already ended"));
  }
  if (r->state == RequestState::kWaiting) waiting_.erase(r);
  if (r->state == RequestState::kPrefilling) --prefilling_;
  aborted_since_schedule_ = true;
  RemoveRunning(r);
  if (kv_->Has(r->id)) {
    absl::Status s = kv_->Free(r->id);
    if (!s.ok()) return s;
  }
  // `channel` keeps the channel that held the KV cache (reported with the result).
  r->finish_reason = FinishReason::kAborted;
  return Transition(*r, RequestState::kAborted);
}

void Scheduler::Preempt(Request* r, ScheduleOutput* out) {
  // Recompute preemption: the KV cache is dropped and rebuilt by a new prefill later.
  RemoveRunning(r);
  Record(kv_->Free(r->id), "preempting", *r);
  Record(Transition(*r, RequestState::kWaiting), "preempting", *r);
  r->channel = -1;
  r->needs_prefill = true;
  ++r->preemptions;
  waiting_.insert(r);
  out->preempted.push_back(r);
}

ScheduleOutput Scheduler::Schedule(SimTime now) {
  ScheduleOutput out;
  Schedule(now, &out);
  return out;
}

void Scheduler::Schedule(SimTime now, ScheduleOutput* out_ptr) {
  ScheduleOutput& out = *out_ptr;
  // decode and the sub-batches keep their previous contents until they are overwritten and cut
  // to length below: clearing them made every step value-initialise the whole list again when
  // it was resized for writing by index.
  out.prefill.clear();
  out.preempted.clear();
  out.rejected.clear();
  aborted_since_schedule_ = false;
  // 1. Reserve the next token's slot for every decoding request, oldest first; on a full
  //    channel preempt the youngest request of that channel until it fits.
  if (!AppendStream(&out)) {
    // A channel lacks blocks for the requests that start one: the per-request pass, in the
    // same order, which preempts; then the decoding requests join the stream again.
    kv_->EndStream();
    const size_t first_refused = AppendAllOrStop(&out);
    if (first_refused < running_.size()) AppendWithPreemption(first_refused, &out);
    ClearDecoders();
    for (Request* r : out.decode) Record(StartDecoding(r), "streaming", *r);
  }

  // 2. Admission, FCFS within priority, only when nothing had to be preempted (and, which
  //    changes nothing but skips the per-channel counts, when someone waits and there is room).
  std::vector<Request*>& admitted = admitted_;
  admitted.clear();
  if (out.preempted.empty() && !waiting_.empty() &&
      static_cast<int64_t>(running_.size()) < options_.max_batch) {
    Admit(now, &out);
  }

  // 3. Channels for the admitted requests.
  if (!admitted.empty()) AssignChannels(now, &out);

  // 4. Sub-batches (Algorithm 3) over the decoding requests, grouped by channel.
  if (options_.sub_batches &&
      static_cast<int64_t>(out.decode.size()) >= options_.sub_batch_min_decode) {
    PartitionByChannel(&out);
  } else {
    out.sub_batch[0].assign(out.decode.begin(), out.decode.end());
    out.sub_batch[1].clear();
  }
}

void Scheduler::PartitionByChannel(ScheduleOutput* out) {
  // The decode list is decoders_ (both branches of step 1 leave them equal), and each channel's
  // list holds its requests in that order: the halves are PartitionSubBatchesByChannel's, and
  // PartitionSubBatches' over channel_decoders_. Not a call to the latter: its appends and a
  // second pass for the (since removed) per-request sub-batch marks cost 26.5 M instead of
  // 14.0 M in the 10,000-request run (docs/benchmarks.md, tenth step, part S).
  std::vector<Request*>& first = out->sub_batch[0];
  std::vector<Request*>& second = out->sub_batch[1];
  // The sizes from the channels' counts, then every entry overwritten by index.
  bool turn = true;
  size_t first_size = 0;
  for (const std::vector<Request*>& list : channel_decoders_) {
    first_size += SubBatchHalf(list.size(), &turn);
  }
  first.resize(first_size);
  second.resize(decoders_.size() - first_size);
  Request** to_first = first.data();
  Request** to_second = second.data();
  turn = true;
  for (const std::vector<Request*>& list : channel_decoders_) {
    Request* const* r = list.data();
    Request* const* const end = r + list.size();
    // Plain loops: a list holds about batch / channels requests, too few for a memmove call.
    for (Request* const* const half = r + SubBatchHalf(list.size(), &turn); r < half;) {
      *to_first++ = *r++;
    }
    while (r < end) *to_second++ = *r++;
  }
}

bool Scheduler::AppendStream(ScheduleOutput* out) {
  const size_t n = running_.size();
  // Every running request prefilling elsewhere: nobody decodes (and nobody streams).
  if (static_cast<int64_t>(n) == prefilling_) {
    out->decode.clear();
    return true;
  }
  if (!kv_->AppendStream()) return false;
  // The decode list: the streaming requests, in running_ order, as decoders_ keeps them.
  out->decode.assign(decoders_.begin(), decoders_.end());
  return true;
}

size_t Scheduler::AppendAllOrStop(ScheduleOutput* out) {
  // The fallback after a tick the KV cache's stream refused (AppendStream, which also handles
  // the step in which every running request prefills elsewhere): the decoding requests'
  // appends one by one in running_ order, as AppendWithPreemption would take them, up to the
  // first that does not fit. The decode list is written through a plain pointer and cut to
  // length at the end.
  const size_t n = running_.size();
  Request* const* running = running_.data();
  // Room for every running request; only a list shorter than that grows (and value-initialises
  // the new part), as the entries are overwritten below.
  if (out->decode.size() < n) out->decode.resize(n);
  Request** decode = out->decode.data();
  size_t taken = 0, i = 0;
  while (i < n) {
    // Appends into the room of the last block: no call in this loop, and the block tables'
    // location in the appender's registers.
    kv_cache::BlockManager::RoomAppender in_room = kv_->InRoomAppender();
    for (; i < n; ++i) {
      Request* r = running[i];
      if (!r->decoding()) continue;
      if (!in_room.TryAppend(r->id, r->kv_slot)) break;
      decode[taken++] = r;
    }
    if (i == n) break;
    // running[i] needs a new block (or its hint is stale): the whole append.
    Request* r = running[i];
    if (!kv_->TryAppendSlot(r->id, r->kv_slot)) break;  // a failed append changes nothing
    decode[taken++] = r;
    ++i;
  }
  out->decode.resize(taken);
  return i;
}

void Scheduler::AppendWithPreemption(size_t from, ScheduleOutput* out_ptr) {
  ScheduleOutput& out = *out_ptr;
  // The decoding requests from running_[from] on, listed before any preemption changes
  // running_ (a preemption removes its victim from running_).
  std::vector<Request*>& decoding = decoding_;
  decoding.clear();
  for (size_t i = from; i < running_.size(); ++i) {
    Request* r = running_[i];
    if (r->decoding()) decoding.push_back(r);
  }
  for (Request* r : decoding) {
    if (r->state != RequestState::kRunning) continue;  // preempted as a victim meanwhile
    while (!kv_->TryAppendSlot(r->id, r->kv_slot)) {
      Request* victim = nullptr;
      for (Request* c : running_) {
        if (c->channel == r->channel && c->state == RequestState::kRunning &&
            (victim == nullptr || WaitOrder()(victim, c))) {
          victim = c;
        }
      }
      Preempt(victim, &out);
      // A victim that already reserved its slot earlier in this step leaves the decode list.
      out.decode.erase(std::remove(out.decode.begin(), out.decode.end(), victim), out.decode.end());
      if (victim == r) break;
    }
    if (r->state != RequestState::kRunning) continue;  // it was its own channel's victim
    out.decode.push_back(r);
  }
}

void Scheduler::Admit(SimTime now, ScheduleOutput* out_ptr) {
  ScheduleOutput& out = *out_ptr;
  std::vector<Request*>& admitted = admitted_;
  int64_t budget = options_.max_prefill_tokens;
  int64_t batch = static_cast<int64_t>(running_.size());
  // Tentative free blocks per channel, to decide feasibility before assigning channels.
  std::vector<int64_t>& free = free_scratch_;
  free.resize(static_cast<size_t>(kv_->channels()));
  for (int c = 0; c < kv_->channels(); ++c) free[c] = kv_->FreeBlocks(c);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Request* r = *it;
    if (batch >= options_.max_batch) break;
    const int64_t tokens = r->context_tokens();
    if (!admitted.empty() && tokens > budget) break;
    bool never = true, fits = false;
    for (int c = 0; c < kv_->channels(); ++c) {
      const kv_cache::AllocStatus s = kv_->CanAllocate(c, tokens);
      if (s != kv_cache::AllocStatus::kNever) never = false;
      if (s == kv_cache::AllocStatus::kOk && free[c] >= kv_->BlocksFor(tokens)) {
        fits = true;  // and `never` is false: the other channels change neither
        break;
      }
    }
    if (never) {
      r->error = absl::StrCat("request needs ", kv_->BlocksFor(tokens),
                              " KV blocks, more than any PIM channel holds");
      r->finish_reason = FinishReason::kRejected;
      r->finished = now;
      Record(Transition(*r, RequestState::kFinished), "rejecting", *r);
      out.rejected.push_back(r);
      it = waiting_.erase(it);
      continue;
    }
    if (!fits) break;  // head-of-line: wait for blocks to free up
    // Reserve on the channel with the most free blocks for the feasibility count; the real
    // channel is chosen below by the policy.
    const int best = static_cast<int>(std::max_element(free.begin(), free.end()) - free.begin());
    free[best] -= kv_->BlocksFor(tokens);
    admitted.push_back(r);
    budget -= tokens;
    ++batch;
    it = waiting_.erase(it);
  }
}

void Scheduler::AssignChannels(SimTime now, ScheduleOutput* out_ptr) {
  ScheduleOutput& out = *out_ptr;
  std::vector<Request*>& admitted = admitted_;
  std::vector<double>& loads = loads_scratch_;
  if (options_.channel_policy == ChannelPolicy::kMinLoad) {
    // Algorithm 2 takes the longest request first.
    std::stable_sort(admitted.begin(), admitted.end(), [](const Request* a, const Request* b) {
      return a->context_tokens() > b->context_tokens();
    });
    ChannelLoads(&loads);
  }
  std::vector<int64_t>& free = free_scratch_;
  free.resize(static_cast<size_t>(kv_->channels()));
  for (int c = 0; c < kv_->channels(); ++c) free[c] = kv_->FreeBlocks(c);
  auto fits = [&](int i, int c) {
    const int64_t tokens = admitted[i]->context_tokens();
    return kv_->CanAllocate(c, tokens) == kv_cache::AllocStatus::kOk &&
           free[c] >= kv_->BlocksFor(tokens);
  };
  std::vector<int>& channel = channel_scratch_;
  channel.assign(admitted.size(), -1);
  // Assign one at a time so each choice sees the blocks the previous ones took.
  for (size_t i = 0; i < admitted.size(); ++i) {
    auto one = [&](int c) { return fits(static_cast<int>(i), c); };
    if (options_.channel_policy == ChannelPolicy::kMinLoad) {
      const double load = estimator_->Estimate(admitted[i]->context_tokens());
      channel[i] = MinLoadChannel(loads, one);
      if (channel[i] >= 0) loads[channel[i]] += load;
    } else {
      channel[i] = RoundRobinChannel(kv_->channels(), &rr_cursor_, one);
    }
    if (channel[i] >= 0) free[channel[i]] -= kv_->BlocksFor(admitted[i]->context_tokens());
  }
  for (size_t i = 0; i < admitted.size(); ++i) {
    Request* r = admitted[i];
    const absl::Status allocated = channel[i] < 0
                                       ? absl::ResourceExhaustedError("no channel fits")
                                       : kv_->Allocate(r->id, channel[i], r->context_tokens());
    if (!allocated.ok()) {
      // Fragmentation across channels: try again next step. Any other error (the request
      // already holds blocks, a bad channel) is a broken invariant.
      if (!absl::IsResourceExhausted(allocated)) Record(allocated, "admitting", *r);
      waiting_.insert(r);
      continue;
    }
    r->channel = channel[i];
    r->kv_slot = kv_->SlotOf(r->id);
    r->needs_prefill = true;
    if (r->first_admitted == kNoTime) r->first_admitted = now;
    if (options_.standalone_prefill) {
      Record(Transition(*r, RequestState::kPrefilling), "admitting", *r);
      ++prefilling_;
    } else {
      Record(Transition(*r, RequestState::kRunning), "admitting", *r);
    }
    r->admission = admissions_++;
    running_.push_back(r);
    out.prefill.push_back(r);
  }
}

absl::Status Scheduler::Finish(Request* r, SimTime now) {
  RemoveRunning(r);
  if (kv_->Has(r->id)) {
    absl::Status s = kv_->Free(r->id);
    if (!s.ok()) return s;
  }
  r->finish_reason = FinishReason::kLength;
  r->finished = now;
  return Transition(*r, RequestState::kFinished);
}

std::vector<Request*> Scheduler::CompleteStep(const ScheduleOutput& out, SimTime now,
                                              std::vector<StepToken>* tokens) {
  std::vector<Request*> finished;
  // A token whose request's previous token was at the previous step's time continues the
  // common gap; the others (first tokens, tokens after a prefill or a skipped step) are listed
  // with their previous token's time.
  const SimTime previous = step_time_;
  gap_others_.clear();
  const bool list = list_step_tokens_ || tokens != nullptr;
  // Only an Abort between Schedule and this call leaves a listed decode that is not running.
  const bool check = aborted_since_schedule_;
  const size_t produced = list    ? (check ? ProduceTokens<true, true>(out, now, &finished)
                                           : ProduceTokens<true, false>(out, now, &finished))
                          : check ? ProduceTokens<false, true>(out, now, &finished)
                                  : ProduceTokens<false, false>(out, now, &finished);
  gaps_previous_ = previous;
  gaps_continuing_ = static_cast<int64_t>(produced - gap_others_.size());
  step_time_ = now;
  if (tokens != nullptr) tokens->insert(tokens->end(), step_tokens_.begin(), step_tokens_.end());
  return finished;
}

template <bool kListTokens, bool kCheckState>
size_t Scheduler::ProduceTokens(const ScheduleOutput& out, SimTime now,
                                std::vector<Request*>* finished) {
  // The tokens go to step_tokens_ through a plain pointer, into room made up front and cut to
  // length at the end (an emplace_back per token reloaded the vector's ends after every store).
  // The list is kept between steps, so making room value-initialises only what it grows by.
  // Without the list (nobody reads it) only the count is kept: the pair stores were a fifth
  // of the per-token work.
  if constexpr (kListTokens) {
    const size_t room = out.decode.size() + out.prefill.size();
    if (step_tokens_.size() < room) step_tokens_.resize(room);
  } else {
    step_tokens_.clear();
  }
  StepToken* next = step_tokens_.data();
  // A request has a first token exactly when it has a last one (both are set together, here
  // and in PrefillDone), so the first-token check is needed only for the others. The loop keeps
  // the request's new count in a register and counts only the rare skipped requests (aborted
  // since Schedule); the rare cases are out of line.
  const SimTime previous = step_time_;
  Request* const* decode = out.decode.data();
  const size_t decodes = out.decode.size();
  size_t skipped = 0;
  for (size_t i = 0; i < decodes; ++i) {
    Request* const r = decode[i];
    if (kCheckState && r->state != RequestState::kRunning) {
      ++skipped;
      continue;
    }
    if constexpr (kListTokens) *next++ = {r, r->generated};
    const int64_t generated = ++r->generated;
    if (r->last_token != previous) NoteOtherGap(r, now);
    r->last_token = now;
    if (r->DoneAt(generated)) FinishProduced(r, now, finished);
  }
  size_t count = decodes - skipped;
  if (!options_.standalone_prefill) {
    for (Request* r : out.prefill) {
      if (r->state != RequestState::kRunning) continue;
      r->needs_prefill = false;
      if constexpr (kListTokens) *next++ = {r, r->generated};
      ++count;
      ++r->generated;
      if (r->last_token != previous) NoteOtherGap(r, now);
      r->last_token = now;
      if (r->done()) {
        FinishProduced(r, now, finished);
      } else {
        // It decodes from the next step on.
        Record(StartDecoding(r), "streaming", *r);
      }
    }
  }
  if constexpr (kListTokens) step_tokens_.resize(count);
  return count;
}

void Scheduler::FinishProduced(Request* r, SimTime now, std::vector<Request*>* finished) {
  const absl::Status s = Finish(r, now);
  Record(s, "finishing", *r);
  if (s.ok()) finished->push_back(r);
}

void Scheduler::NoteOtherGap(Request* r, SimTime now) {
  gap_others_.push_back({r, r->last_token});
  if (r->first_token == kNoTime) r->first_token = now;
}

absl::Status Scheduler::PrefillDone(Request* r, SimTime now) {
  absl::Status s = Transition(*r, RequestState::kRunning);
  if (!s.ok()) return s;
  --prefilling_;
  r->needs_prefill = false;
  ++r->generated;
  if (r->first_token == kNoTime) r->first_token = now;
  r->last_token = now;
  if (r->done()) return Finish(r, now);
  return StartDecoding(r);  // it decodes from the next step on
}

absl::Status Scheduler::CheckInvariants() const {
  int64_t decoding = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    const Request* r = running_[i];
    decoding += r->decoding() ? 1 : 0;
    // ChannelLoads adds each running request's estimate to its channel's entry unchecked.
    if (r->channel < 0 || r->channel >= kv_->channels()) {
      return absl::InternalError(absl::StrCat("running request ", r->id, " is on channel ",
                                              r->channel, " of ", kv_->channels()));
    }
    // FindAdmitted's binary search relies on it (RemoveRunning, StopDecoding).
    if (i > 0 && running_[i - 1]->admission >= r->admission) {
      return absl::InternalError(
          absl::StrCat("the running requests are not in admission order at request ", r->id));
    }
  }
  for (size_t i = 0; i < decoders_.size(); ++i) {
    const Request* r = decoders_[i];
    if (!r->decoding()) {
      return absl::InternalError(absl::StrCat("request ", r->id, " is listed as decoding but is ",
                                              ToString(r->state),
                                              r->needs_prefill ? ", waiting for its prefill" : ""));
    }
    if (i > 0 && decoders_[i - 1]->admission >= r->admission) {
      return absl::InternalError(
          absl::StrCat("the decoding requests are not in admission order at request ", r->id));
    }
    if (FindAdmitted(running_, r) == running_.end()) {
      return absl::InternalError(
          absl::StrCat("request ", r->id, " is listed as decoding but is not running"));
    }
    if (!kv_->Streaming(r->id)) {
      return absl::InternalError(
          absl::StrCat("request ", r->id, " decodes but is not in the KV cache's stream"));
    }
  }
  if (decoding != static_cast<int64_t>(decoders_.size()) || decoding != kv_->streaming()) {
    return absl::InternalError(absl::StrCat(decoding, " running requests decode, ",
                                            decoders_.size(), " listed as decoding, ",
                                            kv_->streaming(), " in the KV cache's stream"));
  }
  return CheckChannelDecoders();
}

absl::Status Scheduler::CheckChannelDecoders() const {
  // Each channel's list in admission order, of decoding requests of that channel, and together
  // as many as decoders_: then they split decoders_ exactly, each in its order.
  size_t listed = 0;
  for (size_t c = 0; c < channel_decoders_.size(); ++c) {
    const std::vector<Request*>& list = channel_decoders_[c];
    for (size_t i = 0; i < list.size(); ++i) {
      const Request* r = list[i];
      if (r->channel != static_cast<int>(c) || FindAdmitted(decoders_, r) == decoders_.end()) {
        return absl::InternalError(
            absl::StrCat("request ", r->id, " is listed as decoding on channel ", c, " but is on ",
                         r->channel, " or not listed as decoding"));
      }
      if (i > 0 && list[i - 1]->admission >= r->admission) {
        return absl::InternalError(absl::StrCat(
            "channel ", c, "'s decoding requests are not in admission order at request ", r->id));
      }
    }
    listed += list.size();
  }
  if (listed != decoders_.size()) {
    return absl::InternalError(absl::StrCat(listed, " requests listed by channel, ",
                                            decoders_.size(), " listed as decoding"));
  }
  return absl::OkStatus();
}

std::vector<double> Scheduler::ChannelLoads() {
  std::vector<double> loads;
  ChannelLoads(&loads);
  return loads;
}

void Scheduler::ChannelLoads(std::vector<double>* loads) {
  loads->assign(static_cast<size_t>(kv_->channels()), 0.0);
  double* const load = loads->data();
  // EstimateFast's answer for each request, with the memo's start and bound held in registers
  // between estimates that were not memoised (through EstimateFast they were reloaded per
  // request, since its fallback may grow the memo): 0 <= seq_len < size as one unsigned
  // compare. Unlike EstimateFast this also reads the memo at 0: an entry there is Estimate(0)'s
  // answer or negative (not known), like every other. Same values, same order of the sums.
  const double* memo = nullptr;
  size_t size = 0;
  auto reload = [&] {
    const absl::Span<const double> known = estimator_->known();
    memo = known.data();
    size = known.size();
  };
  reload();
  // A running request always has its channel: AssignChannels sets it before the request joins
  // running_, and Preempt resets it only after taking the request out (CheckInvariants checks
  // it), so there is no test for a missing one here.
  for (const Request* r : running_) {
    const int channel = r->channel;
    const int64_t seq_len = r->context_tokens();
    double estimate = -1;
    if (static_cast<size_t>(seq_len) < size) estimate = memo[seq_len];
    if (estimate < 0) {
      estimate = estimator_->Estimate(seq_len);
      reload();
    }
    load[channel] += estimate;
  }
}

}  // namespace neupims::scheduler
