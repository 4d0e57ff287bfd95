// LlmServiceImpl: neupims.v1.LlmService on the gRPC callback API (no thread per stream).
//
// Role: translates RPCs to EngineRunner calls and engine output to stream messages. A Generate
// stream is a ServerWriteReactor; the engine thread hands it tokens through a RequestSink and it
// keeps at most one write in flight, coalescing tokens that arrive meanwhile into one message.
// A client that stops reading (HTTP/2 flow control holds the writes back) lets at most
// max_stream_buffer tokens queue; then its stream ends with RESOURCE_EXHAUSTED and the request
// is aborted, so neither the engine nor other streams wait for it.
// A client cancel or an expired deadline aborts the request in the engine (its KV blocks are
// freed). Every error is an absl::Status mapped to a gRPC code in status_map.h.
#ifndef NEUPIMS_SERVER_LLM_SERVICE_H_
#define NEUPIMS_SERVER_LLM_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "server/cnn_runner.h"
#include "server/engine_runner.h"
#include "server/generate_request.h"
#include "server/metrics.h"

namespace neupims::server {

class LlmServiceImpl final : public neupims::v1::LlmService::CallbackService {
 public:
  // `max_stream_buffer`: ServerOptions::max_stream_buffer (0: unbounded). `max_message_bytes`:
  // ServerOptions::max_message_bytes, checked here too since CNN models can raise the port's
  // limit above it (a larger Generate / Complete request is RESOURCE_EXHAUSTED).
  LlmServiceImpl(EngineRunner* runner, ServerMetrics* metrics, std::string version,
                 int64_t max_stream_buffer, int64_t max_message_bytes);

  grpc::ServerWriteReactor<neupims::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx, const neupims::v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* ctx,
                                     const neupims::v1::GenerateRequest* request,
                                     neupims::v1::CompleteResponse* response) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* ctx,
                                  const neupims::v1::AbortRequest* request,
                                  neupims::v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx,
                                         const neupims::v1::GetModelInfoRequest* request,
                                         neupims::v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* ctx,
                                          const neupims::v1::GetServerInfoRequest* request,
                                          neupims::v1::ServerInfo* response) override;

  // The CNN models GetServerInfo reports (none without a call); set before serving.
  void SetCnnRunner(const CnnRunner* cnn) { cnn_ = cnn; }

  // The request as both front ends see it (generate_request.h; checked on submission).
  static GenerateInput ToInput(const neupims::v1::GenerateRequest& request);

 private:
  // RESOURCE_EXHAUSTED when `request` is over max_message_bytes_.
  absl::Status CheckSize(const neupims::v1::GenerateRequest& request) const;

  EngineRunner* runner_;
  ServerMetrics* metrics_;
  std::string version_;
  int64_t max_stream_buffer_;
  int64_t max_message_bytes_;
  const CnnRunner* cnn_ = nullptr;
};

neupims::v1::FinishReason ToProto(Finish f);

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_LLM_SERVICE_H_
