#include "server/llm_service.h"

#include <deque>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/generate_request.h"
#include "server/status_map.h"
#include "server/tsan_handover.h"

namespace neupims::server {
namespace {

using neupims::v1::GenerateRequest;
using neupims::v1::GenerateResponse;

void FillComplete(const Completion& c, neupims::v1::GenerateComplete* out) {
  out->set_request_id(c.request_id);
  out->set_finish_reason(ToProto(c.reason));
  out->set_prompt_tokens(c.prompt_tokens);
  out->set_completion_tokens(c.completion_tokens);
  out->set_queue_time_s(c.queue_time_s);
  out->set_ttft_s(c.ttft_s);
  out->set_tpot_s(c.tpot_s);
  out->set_e2e_latency_s(c.e2e_latency_s);
  out->set_pim_channel(c.pim_channel);
  out->set_preemptions(c.preemptions);
  out->set_error(c.error);
}

void FillToken(const GeneratedToken& t, const ByteTokenizer& tok, neupims::v1::Token* out) {
  out->set_index(t.index);
  out->set_id(t.id);
  out->set_text(tok.Decode(t.id));
  out->set_sim_time_s(t.sim_time_s);
}

// Ends a request in the engine (frees its KV blocks) when its call is cancelled, its deadline
// expires or its stream overflows. Whichever of that and the engine's acceptance comes second
// aborts: a cancel that arrives before the request id is held until the id is known. At most once,
// and never after the request ended: a client may reuse its request id at once.
class AbortLatch {
 public:
  explicit AbortLatch(EngineRunner* runner) : runner_(runner) {}

  // The engine accepted the request under `id`.
  void SetId(const std::string& id) {
    {
      absl::MutexLock l(&mu_);
      id_ = id;
      if (!wanted_ || done_) return;
      done_ = true;
    }
    runner_->AbortAsync(id);
  }

  // The request ended: a later cancel must not abort a new request under the same id.
  void Disarm() {
    absl::MutexLock l(&mu_);
    done_ = true;
  }

  void Abort() {
    std::string id;
    {
      absl::MutexLock l(&mu_);
      wanted_ = true;
      if (id_.empty() || done_) return;
      done_ = true;
      id = id_;
    }
    runner_->AbortAsync(id);
  }

 private:
  EngineRunner* runner_;
  absl::Mutex mu_;
  std::string id_ ABSL_GUARDED_BY(mu_);
  bool wanted_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

// Shared between a Generate reactor and the engine thread; outlives either. Decisions are made
// under the lock; calls into gRPC (StartWrite, Finish) happen after releasing it, and the
// in_flight_ / finished_ flags make sure only one thread issues each.
// The largest token chunk a stream keeps for reuse (StreamState::RecycleChunkLocked): more than
// one iteration's tokens, which is all a stream that keeps up has in a message.
constexpr int kMaxRecycledTokens = 64;

class StreamState : public RequestSink {
 public:
  // `max_buffer`: tokens queued behind gRPC (written or not yet acknowledged) beyond which the
  // client is taken to have stopped reading; 0: unbounded.
  StreamState(grpc::ServerWriteReactor<GenerateResponse>* reactor, EngineRunner* runner,
              ServerMetrics* metrics, int64_t max_buffer)
      : reactor_(reactor),
        runner_(runner),
        metrics_(metrics),
        tok_(&runner->tokenizer()),
        max_buffer_(max_buffer),
        abort_(runner) {}

  // The engine accepted the request under this id (on the engine thread, before its first
  // token); a cancel that came first aborts it now.
  void OnAccepted(const std::string& id) override { abort_.SetId(id); }
  // The client cancelled or its deadline expired.
  void AbortRequest() { abort_.Abort(); }

  void OnTokens(const std::vector<GeneratedToken>& tokens) override {
    Action a;
    {
      absl::MutexLock l(&mu_);
      if (reactor_ == nullptr || finished_) return;
      // Coalesce into the last queued message unless that one is being written.
      if (pending_.empty() || (in_flight_ && pending_.size() == 1) ||
          !pending_.back().has_tokens()) {
        pending_.emplace_back();
        AttachChunkLocked(&pending_.back());
      }
      for (const GeneratedToken& t : tokens) {
        FillToken(t, *tok_, pending_.back().mutable_tokens()->add_tokens());
      }
      queued_tokens_ += static_cast<int64_t>(tokens.size());
      a = max_buffer_ > 0 && queued_tokens_ > max_buffer_ ? OverflowLocked() : NextLocked();
    }
    Run(a);
  }

  void OnComplete(const Completion& c) override {
    abort_.Disarm();
    Action a;
    {
      absl::MutexLock l(&mu_);
      if (reactor_ == nullptr || finished_) return;
      if (c.status.ok()) {
        pending_.emplace_back();
        FillComplete(c, pending_.back().mutable_complete());
      } else {
        // The engine faulted: the tokens already queued go out, then the call ends with the
        // error (INTERNAL) instead of a completion message.
        final_status_ = ToGrpcStatus(c.status);
      }
      completed_ = true;
      a = NextLocked();
    }
    Run(a);
  }

  // gRPC: the previous write finished (ok = false: the client is gone).
  void WriteDone(bool ok) {
    Action a;
    {
      absl::MutexLock l(&mu_);
      in_flight_ = false;
      if (!pending_.empty()) {
        if (pending_.front().has_tokens()) {
          queued_tokens_ -= pending_.front().tokens().tokens_size();
          RecycleChunkLocked(&pending_.front());
        }
        pending_.pop_front();
      }
      if (reactor_ == nullptr || finished_) return;
      if (!ok) {
        pending_.clear();
        finished_ = true;
        a.finish = true;
        a.status = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        a.reactor = reactor_;
      } else {
        a = NextLocked();
      }
    }
    Run(a);
  }

  // Fails the stream before any write (validation or admission error).
  void FinishWith(const grpc::Status& s) {
    Action a;
    {
      absl::MutexLock l(&mu_);
      if (reactor_ == nullptr || finished_) return;
      finished_ = true;
      a.finish = true;
      a.status = s;
      a.reactor = reactor_;
    }
    Run(a);
  }

  void Detach() {
    absl::MutexLock l(&mu_);
    reactor_ = nullptr;
  }

 private:
  struct Action {
    grpc::ServerWriteReactor<GenerateResponse>* reactor = nullptr;
    const GenerateResponse* write = nullptr;
    bool finish = false;
    grpc::Status status;
    bool overflow = false;  // count it and abort the request
  };

  // The client stopped reading (HTTP/2 flow control holds our writes back) and the buffer is
  // full: end the stream rather than let it grow, and free the request's KV in the engine. The
  // status reaches the client after what gRPC already holds, if it ever reads again.
  Action OverflowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Action a;
    a.reactor = reactor_;
    a.finish = true;
    a.overflow = true;
    a.status = ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "the client is not reading: ", queued_tokens_,
        " tokens pending, over the stream buffer of ", max_buffer_, " (--max-stream-buffer)")));
    finished_ = true;
    // Only the message gRPC is writing stays (it must outlive the write).
    pending_.resize(in_flight_ ? 1 : 0);
    return a;
  }

  // Token messages reuse the chunk of a message already written: a cleared TokenChunk keeps its
  // Token objects and their text strings, so a stream's steady state allocates nothing per token
  // (four allocations and frees a message otherwise; issue 18, docs/benchmarks.md).
  void AttachChunkLocked(GenerateResponse* msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (spare_chunk_ == nullptr) {
      msg->mutable_tokens();
      return;
    }
    msg->set_allocated_tokens(spare_chunk_.release());
  }

  // `msg` has been written: keep its chunk for the next message (one spare is enough, since a
  // stream has at most one write in flight). Not a chunk of more than kMaxRecycledTokens: a
  // cleared chunk keeps all its Token objects, and one large coalesced message (a slow reader
  // with no buffer bound) would otherwise stay allocated until the stream ends.
  void RecycleChunkLocked(GenerateResponse* msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (spare_chunk_ != nullptr || msg->tokens().tokens_size() > kMaxRecycledTokens) return;
    spare_chunk_.reset(msg->release_tokens());
    spare_chunk_->Clear();
  }

  Action NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Action a;
    a.reactor = reactor_;
    if (in_flight_ || finished_) return a;
    if (!pending_.empty()) {
      in_flight_ = true;
      a.write = &pending_.front();  // stays put until WriteDone pops it
      return a;
    }
    if (completed_) {
      finished_ = true;
      a.finish = true;
      a.status = final_status_;
    }
    return a;
  }

  void Run(const Action& a) {
    if (a.reactor == nullptr) return;
    if (a.write != nullptr) {
      if (a.write->has_tokens() && a.write->tokens().tokens_size() > 0) {
        runner_->RecordSendLag(a.write->tokens().tokens(0).sim_time_s());
      }
      a.reactor->StartWrite(a.write);
    }
    if (a.finish) a.reactor->Finish(a.status);
    if (a.overflow) {
      if (metrics_ != nullptr) metrics_->OnStreamBufferOverflow(ServerMetrics::FrontEnd::kGrpc);
      abort_.Abort();
    }
  }

  absl::Mutex mu_;
  grpc::ServerWriteReactor<GenerateResponse>* reactor_ ABSL_GUARDED_BY(mu_);
  EngineRunner* runner_;
  ServerMetrics* metrics_;
  const ByteTokenizer* tok_;
  const int64_t max_buffer_;
  std::deque<GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);  // front is in flight if in_flight_
  int64_t queued_tokens_ ABSL_GUARDED_BY(mu_) = 0;             // tokens in pending_
  std::unique_ptr<neupims::v1::TokenChunk> spare_chunk_ ABSL_GUARDED_BY(mu_);  // cleared, reused
  AbortLatch abort_;
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool completed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);  // OK unless the engine faulted
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

class GenerateReactor : public grpc::ServerWriteReactor<GenerateResponse> {
 public:
  GenerateReactor(EngineRunner* runner, ServerMetrics* metrics, int64_t max_stream_buffer)
      : runner_(runner),
        metrics_(metrics),
        state_(std::make_shared<StreamState>(this, runner, metrics, max_stream_buffer)) {}

  void Start(const GenerateInput& input) {
    absl::StatusOr<std::string> id = SubmitGenerate(runner_, metrics_, input, state_);
    if (!id.ok()) state_->FinishWith(ToGrpcStatus(id.status()));
  }

  void OnWriteDone(bool ok) override { state_->WriteDone(ok); }

  // gRPC orders OnCancel before OnDone with an atomic TSan cannot see (tsan_handover.h).
  void OnCancel() override {
    state_->AbortRequest();
    HandOver(this);
  }

  void OnDone() override {
    TakeOver(this);
    state_->Detach();
    delete this;
  }

 private:
  EngineRunner* runner_;
  ServerMetrics* metrics_;
  std::shared_ptr<StreamState> state_;
};

// Complete's reactor: like Generate, a client cancel or an expired deadline aborts the request
// in the engine (frees its KV blocks); the abort then finishes the call through CompleteSink.
class CompleteReactor : public grpc::ServerUnaryReactor {
 public:
  explicit CompleteReactor(EngineRunner* runner) : abort_(runner) {}

  // Called once the engine has accepted the request; a cancel that came first aborts it now.
  void set_request_id(const std::string& id) { abort_.SetId(id); }

  // gRPC orders OnCancel before OnDone with an atomic TSan cannot see (tsan_handover.h).
  void OnCancel() override {
    abort_.Abort();
    HandOver(this);
  }
  // The request ended (CompleteSink): a later cancel aborts nothing.
  void Disarm() { abort_.Disarm(); }

  void OnDone() override {
    TakeOver(this);
    delete this;
  }

 private:
  AbortLatch abort_;
};

// Complete: collects the stream and answers once.
class CompleteSink : public RequestSink {
 public:
  CompleteSink(CompleteReactor* reactor, neupims::v1::CompleteResponse* response,
               const ByteTokenizer* tok)
      : reactor_(reactor), response_(response), tok_(tok) {}
  void OnTokens(const std::vector<GeneratedToken>& tokens) override {
    for (const GeneratedToken& t : tokens) {
      FillToken(t, *tok_, response_->add_tokens());
      response_->mutable_text()->append(tok_->Decode(t.id));
    }
  }
  void OnComplete(const Completion& c) override {
    reactor_->Disarm();
    if (!c.status.ok()) {
      reactor_->Finish(ToGrpcStatus(c.status));
      return;
    }
    FillComplete(c, response_->mutable_complete());
    reactor_->Finish(grpc::Status::OK);
  }

 private:
  CompleteReactor* reactor_;
  neupims::v1::CompleteResponse* response_;
  const ByteTokenizer* tok_;
};

}  // namespace

neupims::v1::FinishReason ToProto(Finish f) {
  switch (f) {
    case Finish::kLength:
      return neupims::v1::FINISH_REASON_LENGTH;
    case Finish::kStop:
      return neupims::v1::FINISH_REASON_STOP;
    case Finish::kAborted:
      return neupims::v1::FINISH_REASON_ABORTED;
    case Finish::kRejected:
      return neupims::v1::FINISH_REASON_REJECTED;
  }
  return neupims::v1::FINISH_REASON_UNSPECIFIED;
}

LlmServiceImpl::LlmServiceImpl(EngineRunner* runner, ServerMetrics* metrics, std::string version,
                               int64_t max_stream_buffer, int64_t max_message_bytes)
    : runner_(runner),
      metrics_(metrics),
      version_(std::move(version)),
      max_stream_buffer_(max_stream_buffer),
      max_message_bytes_(max_message_bytes) {}

absl::Status LlmServiceImpl::CheckSize(const GenerateRequest& request) const {
  const size_t bytes = request.ByteSizeLong();
  if (bytes <= static_cast<size_t>(max_message_bytes_)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "request of ", bytes, " bytes is over --max-message-bytes (", max_message_bytes_, ")"));
}

GenerateInput LlmServiceImpl::ToInput(const GenerateRequest& req) {
  GenerateInput in;
  in.request_id = req.request_id();
  in.model = req.model();
  in.max_new_tokens = req.max_new_tokens();
  in.ignore_eos = req.ignore_eos();
  in.seed = req.seed();
  in.priority = req.priority();
  switch (req.prompt_case()) {
    case GenerateRequest::kText:
      in.prompt = req.text();
      break;
    case GenerateRequest::kTokenIds:
      in.prompt = std::vector<int64_t>(req.token_ids().ids().begin(), req.token_ids().ids().end());
      break;
    case GenerateRequest::kPromptLength:
      in.prompt = PromptLength{req.prompt_length()};
      break;
    case GenerateRequest::PROMPT_NOT_SET:
      in.prompt = PromptLength{0};
      break;
  }
  return in;
}

grpc::ServerWriteReactor<GenerateResponse>* LlmServiceImpl::Generate(
    grpc::CallbackServerContext* ctx, const GenerateRequest* request) {
  (void)ctx;
  auto* reactor = new GenerateReactor(runner_, metrics_, max_stream_buffer_);
  if (absl::Status s = CheckSize(*request); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  reactor->Start(ToInput(*request));
  return reactor;
}

grpc::ServerUnaryReactor* LlmServiceImpl::Complete(grpc::CallbackServerContext* ctx,
                                                   const GenerateRequest* request,
                                                   neupims::v1::CompleteResponse* response) {
  (void)ctx;
  auto* reactor = new CompleteReactor(runner_);
  if (absl::Status s = CheckSize(*request); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  auto sink = std::make_shared<CompleteSink>(reactor, response, &runner_->tokenizer());
  absl::StatusOr<std::string> id = SubmitGenerate(runner_, metrics_, ToInput(*request), sink);
  if (!id.ok()) {
    reactor->Finish(ToGrpcStatus(id.status()));
    return reactor;
  }
  reactor->set_request_id(*id);
  return reactor;
}

grpc::ServerUnaryReactor* LlmServiceImpl::Abort(grpc::CallbackServerContext* ctx,
                                                const neupims::v1::AbortRequest* request,
                                                neupims::v1::AbortResponse*) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (request->request_id().empty()) {
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError("request_id is empty")));
    return reactor;
  }
  reactor->Finish(ToGrpcStatus(runner_->Abort(request->request_id())));
  return reactor;
}

grpc::ServerUnaryReactor* LlmServiceImpl::GetModelInfo(grpc::CallbackServerContext* ctx,
                                                       const neupims::v1::GetModelInfoRequest*,
                                                       neupims::v1::ModelInfo* out) {
  const std::shared_ptr<const ServedEngine> served = runner_->Snapshot().served;
  const models::ModelConfig& m = served->model;
  out->set_name(m.name);
  out->set_layers(m.layers);
  out->set_heads(m.heads);
  out->set_kv_heads(m.kv_heads);
  out->set_hidden(m.hidden);
  out->set_ffn_hidden(m.ffn_hidden);
  out->set_vocab(m.vocab);
  out->set_max_seq_len(m.max_seq_len);
  out->set_tensor_parallel(served->parallelism.tp);
  out->set_pipeline_parallel(served->parallelism.pp);
  out->set_tokenizer(runner_->tokenizer().name());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* LlmServiceImpl::GetServerInfo(grpc::CallbackServerContext* ctx,
                                                        const neupims::v1::GetServerInfoRequest*,
                                                        neupims::v1::ServerInfo* out) {
  const ServerSnapshot s = runner_->Snapshot();
  out->set_version(version_);
  out->set_device(s.served->device.name);
  out->set_mode(s.served->mode);
  out->set_pacing(ToString(runner_->options().pacing));
  out->set_speed(runner_->options().speed);
  out->set_running(s.running);
  out->set_waiting(s.waiting);
  out->set_prefilling(s.prefilling);
  out->set_kv_cache_usage(s.kv_usage);
  for (double u : s.channel_kv_usage) out->add_channel_kv_usage(u);
  out->set_kv_blocks_total(s.kv_blocks_total);
  out->set_kv_blocks_used(s.kv_blocks_used);
  out->set_sim_time_s(s.sim_time_s);
  out->set_iterations(s.iterations);
  out->set_max_waiting(s.served->max_waiting);
  out->set_draining(s.draining);
  if (cnn_ != nullptr) {
    for (const auto& m : cnn_->models()) out->add_cnn_models(m->name);
    out->set_cnn_cluster(cnn_->options().cluster);
    out->set_cnn_policy(engine::cnn::PlanPolicyNames().ToString(cnn_->options().policy));
    out->set_cnn_alpha(cnn_->options().alpha);
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace neupims::server
