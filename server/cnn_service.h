// InferenceServiceImpl: inference.GRPCInferenceService (KServe v2 / Open Inference Protocol) on
// the gRPC callback API, serving the CNN models of a CnnRunner.
//
// ModelInfer checks the request against the model's metadata (one input: its name, datatype
// FP32, shape [N, C, H, W] with 1 <= N <= max batch, and an element count in `contents` or
// `raw_input_contents` that matches; requested outputs must name the model's output) and answers
// INVALID_ARGUMENT naming the field, NOT_FOUND for an unknown model or version. The output
// tensor has the model's output shape for N images; its values are synthetic (the engine models
// timing, not weights): every element is 1 / (elements per image), a uniform distribution over
// the classes. The response's parameters carry the simulated figures (docs/api.md). Statuses are
// mapped in status_map.h; every outcome is counted in the CNN metrics.
#ifndef NEUPIMS_SERVER_CNN_SERVICE_H_
#define NEUPIMS_SERVER_CNN_SERVICE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "server/cnn_runner.h"
#include "server/metrics.h"

namespace neupims::server {

class InferenceServiceImpl final : public inference::GRPCInferenceService::CallbackService {
 public:
  InferenceServiceImpl(CnnRunner* runner, ServerMetrics* metrics, std::string version);

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;

  // The served model `name` at `version` ("" or "1"): NOT_FOUND naming the choices otherwise.
  static absl::StatusOr<const CnnModel*> FindModel(const CnnRunner& runner, const std::string& name,
                                                   const std::string& version);
  // The images of a well-formed request for `model` (the input's batch dimension), or
  // INVALID_ARGUMENT naming the offending field.
  static absl::StatusOr<int64_t> CheckInferRequest(const CnnModel& model, int max_batch,
                                                   const inference::ModelInferRequest& request);
  // The largest ModelInfer message a well-formed request can need: the largest model's input at
  // `max_batch` images in the widest encoding its datatype allows (FP32: 4 bytes an element, raw
  // or packed fp32_contents; INT8: 10, the int_contents varint of a negative value), plus 64 KiB
  // for the rest of the message; capped at INT_MAX, gRPC's largest limit. The server raises the
  // port's receive limit to it, so --cnn-max-batch is never cut by --max-message-bytes.
  static int64_t MaxRequestBytes(const std::vector<const CnnModel*>& models, int max_batch,
                                 CnnDatatype datatype);

 private:
  CnnRunner* runner_;
  ServerMetrics* metrics_;
  std::string version_;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_CNN_SERVICE_H_
