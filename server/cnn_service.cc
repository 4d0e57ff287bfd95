#include "server/cnn_service.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "engine/cnn/plan.h"
#include "server/status_map.h"
#include "server/tsan_handover.h"

namespace neupims::server {
namespace {

constexpr char kServerName[] = "neupims-serve";
constexpr char kModelVersion[] = "1";
constexpr char kPlatform[] = "neupims_cnn_pipeline";
constexpr int64_t kFp32Bytes = 4;

// ModelInfer's reactor. A call its client cancels (or whose deadline passes) leaves the runner at
// once (CnnRunner::Cancel), instead of holding its place in the in-flight count, which drain
// waits on, until its simulated completion. gRPC calls neither OnCancel nor OnDone before
// ModelInfer has returned the reactor (ServerCallbackUnaryImpl::SetupReactor holds a reference
// and one of OnCancel's two conditions until then), so both see the ticket Started recorded,
// even when the runner answered (Finish) inside Infer in fast pacing. The reactor is still
// deleted only once both OnDone and Started have run: ModelInfer returns `reactor` after
// Started, so a delete in OnDone alone would rely on that ordering with nothing to show it.
class InferReactor : public grpc::ServerUnaryReactor {
 public:
  explicit InferReactor(CnnRunner* runner) : runner_(runner) {}

  // Once, after the call was entered (its ticket) or refused (nullopt).
  void Started(std::optional<int64_t> ticket) {
    bool cancel = false, last = false;
    {
      absl::MutexLock lock(&mu_);
      ticket_ = ticket;
      started_ = true;
      cancel = cancelled_ && ticket.has_value();
      last = done_;
    }
    if (cancel) runner_->Cancel(*ticket);
    if (last) delete this;
  }

  void OnCancel() override {
    std::optional<int64_t> ticket;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      ticket = ticket_;
    }
    if (ticket.has_value()) runner_->Cancel(*ticket);
    HandOver(this);
  }

  void OnDone() override {
    TakeOver(this);
    bool last = false;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      last = started_;
    }
    if (last) delete this;
  }

 private:
  CnnRunner* const runner_;
  absl::Mutex mu_;
  std::optional<int64_t> ticket_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

void SetTensor(const CnnTensorSpec& spec, inference::ModelMetadataResponse::TensorMetadata* t) {
  t->set_name(spec.name);
  t->set_datatype(spec.datatype);
  for (int64_t d : spec.shape) t->add_shape(d);
}

// Where a tensor of the input's datatype keeps its elements (KServe v2: INT8 in int_contents).
struct TypedContents {
  const char* field;
  int64_t count;
  int64_t bytes_per_element;
};

TypedContents ContentsOf(const std::string& datatype, const inference::InferTensorContents& c) {
  if (datatype == "INT8") return {"int_contents", c.int_contents_size(), 1};
  return {"fp32_contents", c.fp32_contents_size(), kFp32Bytes};
}

// The number of typed-content fields a tensor fills.
int FilledContents(const inference::InferTensorContents& c) {
  return (c.bool_contents_size() > 0) + (c.int_contents_size() > 0) +
         (c.int64_contents_size() > 0) + (c.uint_contents_size() > 0) +
         (c.uint64_contents_size() > 0) + (c.fp32_contents_size() > 0) +
         (c.fp64_contents_size() > 0) + (c.bytes_contents_size() > 0);
}

absl::Status CheckShape(const CnnModel& m, int max_batch,
                        const inference::ModelInferRequest::InferInputTensor& in) {
  const std::vector<int64_t>& want = m.input.shape;
  const std::vector<int64_t> got(in.shape().begin(), in.shape().end());
  bool ok = got.size() == want.size();
  for (size_t i = 1; ok && i < want.size(); ++i) ok = got[i] == want[i];
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("inputs[0].shape: ", ShapeString(got),
                                                   " does not match model '", m.name, "' input ",
                                                   ShapeString(want), " (-1: the batch)"));
  }
  if (got[0] < 1 || got[0] > max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs[0].shape[0]: batch ", got[0], " is not in [1, ", max_batch, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckRaw(const inference::ModelInferRequest& r, const TypedContents& typed,
                      int64_t elements, const std::string& datatype) {
  const auto& in = r.inputs(0);
  if (typed.count > 0) {
    return absl::InvalidArgumentError(
        "inputs[0].contents: set together with raw_input_contents (use one or the other)");
  }
  if (r.raw_input_contents_size() != r.inputs_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents: ", r.raw_input_contents_size(), " entries for ",
                     r.inputs_size(), " input"));
  }
  const int64_t bytes = static_cast<int64_t>(r.raw_input_contents(0).size());
  if (bytes != elements * typed.bytes_per_element) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents[0]: ", bytes, " bytes, but inputs[0].shape ",
                     ShapeString({in.shape().begin(), in.shape().end()}), " x ", datatype,
                     " needs ", elements * typed.bytes_per_element));
  }
  return absl::OkStatus();
}

absl::Status CheckContents(const inference::ModelInferRequest& r, int64_t elements,
                           const std::string& datatype) {
  const auto& in = r.inputs(0);
  const TypedContents typed = ContentsOf(datatype, in.contents());
  if (FilledContents(in.contents()) > (typed.count > 0 ? 1 : 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs[0].contents: an ", datatype, " tensor's elements go in ", typed.field, " only"));
  }
  if (r.raw_input_contents_size() > 0) return CheckRaw(r, typed, elements, datatype);
  if (typed.count != elements) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inputs[0].contents.", typed.field, ": ", typed.count, " elements, but inputs[0].shape ",
        ShapeString({in.shape().begin(), in.shape().end()}), " has ", elements));
  }
  if (datatype == "INT8") {
    for (int i = 0; i < in.contents().int_contents_size(); ++i) {
      const int32_t v = in.contents().int_contents(i);
      if (v < -128 || v > 127) {
        return absl::InvalidArgumentError(
            absl::StrCat("inputs[0].contents.int_contents[", i, "]: ", v, " is not an INT8"));
      }
    }
  }
  return absl::OkStatus();
}

void SetParam(inference::ModelInferResponse* out, const std::string& key, int64_t v) {
  (*out->mutable_parameters())[key].set_int64_param(v);
}

void SetParam(inference::ModelInferResponse* out, const std::string& key, const std::string& v) {
  (*out->mutable_parameters())[key].set_string_param(v);
}

int64_t Ns(double s) { return static_cast<int64_t>(s * 1e9 + 0.5); }

// The output tensor (synthetic values, see the header) and the simulated figures.
void FillResponse(const CnnModel& m, const CnnOptions& o, const inference::ModelInferRequest& r,
                  const CnnResult& res, inference::ModelInferResponse* out) {
  out->set_model_name(m.name);
  out->set_model_version(kModelVersion);
  out->set_id(r.id());
  inference::ModelInferResponse::InferOutputTensor* t = out->add_outputs();
  t->set_name(m.output.name);
  t->set_datatype(m.output.datatype);
  t->add_shape(res.images);
  for (size_t i = 1; i < m.output.shape.size(); ++i) t->add_shape(m.output.shape[i]);
  const int64_t per_image = m.output.elements_per_image();
  const int64_t n = per_image * res.images;
  const float value = 1.0f / static_cast<float>(per_image);
  if (r.raw_input_contents_size() > 0) {  // answer in the form asked (as Triton does)
    std::string raw(static_cast<size_t>(n * kFp32Bytes), '\0');
    for (int64_t i = 0; i < n; ++i) std::memcpy(&raw[i * kFp32Bytes], &value, kFp32Bytes);
    out->add_raw_output_contents(std::move(raw));
  } else {
    t->mutable_contents()->mutable_fp32_contents()->Resize(static_cast<int>(n), value);
  }
  SetParam(out, "sim_latency_ns", Ns(res.latency_s()));
  SetParam(out, "sim_queue_ns", Ns(res.queue_s));
  SetParam(out, "sim_arrival_ns", Ns(res.arrival_s));
  SetParam(out, "sim_completion_ns", Ns(res.completion_s));
  SetParam(out, "sim_energy_j", absl::StrFormat("%.6g", res.energy_j));
  SetParam(out, "images", res.images);
  SetParam(out, "partition", m.partition);
  SetParam(out, "policy", engine::cnn::PlanPolicyNames().ToString(o.policy));
  SetParam(out, "cluster", o.cluster);
}

}  // namespace

InferenceServiceImpl::InferenceServiceImpl(CnnRunner* runner, ServerMetrics* metrics,
                                           std::string version)
    : runner_(runner), metrics_(metrics), version_(std::move(version)) {}

absl::StatusOr<const CnnModel*> InferenceServiceImpl::FindModel(const CnnRunner& runner,
                                                                const std::string& name,
                                                                const std::string& version) {
  const CnnModel* m = runner.Find(name);
  if (m == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown model '", name, "' (served: ", runner.ModelList(), ")"));
  }
  if (!version.empty() && version != kModelVersion) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version '", version,
                                            "' (served: ", kModelVersion, ")"));
  }
  return m;
}

int64_t InferenceServiceImpl::MaxRequestBytes(const std::vector<const CnnModel*>& models,
                                              int max_batch, CnnDatatype datatype) {
  // Per element: FP32 raw bytes and packed fp32_contents both take 4; an INT8 int_contents
  // varint takes up to 10 (a negative int32 is sign-extended to 64 bits), raw takes 1.
  const int64_t per_element = datatype == CnnDatatype::kFp32 ? kFp32Bytes : 10;
  // Names, shape, parameters, field tags and lengths: small beside the tensor.
  constexpr int64_t kEnvelopeBytes = 64 << 10;
  constexpr int64_t kCap = std::numeric_limits<int>::max();
  int64_t largest = 0;
  for (const CnnModel* m : models) largest = std::max(largest, m->input.elements_per_image());
  // A graph's dimensions go up to 2^20 each, so the product can overflow: compare by division.
  if (largest > 0 && max_batch > (kCap - kEnvelopeBytes) / per_element / largest) return kCap;
  return std::min(kCap, max_batch * largest * per_element + kEnvelopeBytes);
}

absl::StatusOr<int64_t> InferenceServiceImpl::CheckInferRequest(
    const CnnModel& m, int max_batch, const inference::ModelInferRequest& r) {
  const std::string takes = absl::StrCat("model '", m.name, "' takes one input '", m.input.name,
                                         "' ", m.input.datatype, " ", ShapeString(m.input.shape));
  if (r.inputs_size() == 0)
    return absl::InvalidArgumentError(absl::StrCat("inputs: empty; ", takes));
  if (r.inputs_size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs: ", r.inputs_size(), " tensors; ", takes));
  }
  const auto& in = r.inputs(0);
  if (in.name() != m.input.name) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs[0].name: '", in.name(), "' is not an input of model; ", takes));
  }
  if (in.datatype() != m.input.datatype) {
    return absl::InvalidArgumentError(absl::StrCat("inputs[0].datatype: '", in.datatype(),
                                                   "', but model '", m.name, "' takes ",
                                                   m.input.datatype));
  }
  if (absl::Status s = CheckShape(m, max_batch, in); !s.ok()) return s;
  const int64_t images = in.shape(0);
  if (absl::Status s = CheckContents(r, images * m.input.elements_per_image(), m.input.datatype);
      !s.ok()) {
    return s;
  }
  for (int i = 0; i < r.outputs_size(); ++i) {
    if (r.outputs(i).name() != m.output.name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].name: '", r.outputs(i).name(), "' is not an output of model '", m.name,
          "' (its output: '", m.output.name, "')"));
    }
  }
  return images;
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerLive(grpc::CallbackServerContext* ctx,
                                                           const inference::ServerLiveRequest*,
                                                           inference::ServerLiveResponse* out) {
  out->set_live(true);
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerReady(grpc::CallbackServerContext* ctx,
                                                            const inference::ServerReadyRequest*,
                                                            inference::ServerReadyResponse* out) {
  out->set_ready(runner_->ready());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelReady(grpc::CallbackServerContext* ctx,
                                                           const inference::ModelReadyRequest* r,
                                                           inference::ModelReadyResponse* out) {
  // An unknown model is simply not ready (as Triton answers), not an error.
  out->set_ready(FindModel(*runner_, r->name(), r->version()).ok() && runner_->ready());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ServerMetadata(
    grpc::CallbackServerContext* ctx, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* out) {
  out->set_name(kServerName);
  out->set_version(version_);
  // The protocol has no field for a server's configuration: these informational entries name
  // no protocol extension, so clients that look for extensions ignore them.
  const CnnOptions& o = runner_->options();
  out->add_extensions(absl::StrCat("neupims_cnn_models=", absl::StrJoin(o.models, ",")));
  out->add_extensions(absl::StrCat("neupims_cnn_cluster=", o.cluster));
  out->add_extensions(
      absl::StrCat("neupims_cnn_policy=", engine::cnn::PlanPolicyNames().ToString(o.policy)));
  out->add_extensions(absl::StrCat("neupims_cnn_alpha=", o.alpha));
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelMetadata(
    grpc::CallbackServerContext* ctx, const inference::ModelMetadataRequest* r,
    inference::ModelMetadataResponse* out) {
  absl::StatusOr<const CnnModel*> m = FindModel(*runner_, r->name(), r->version());
  if (!m.ok()) return FinishNow(ctx, m.status());
  out->set_name((*m)->name);
  *out->add_versions() = std::string(kModelVersion);
  out->set_platform(kPlatform);
  SetTensor((*m)->input, out->add_inputs());
  SetTensor((*m)->output, out->add_outputs());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceServiceImpl::ModelInfer(grpc::CallbackServerContext* /*ctx*/,
                                                           const inference::ModelInferRequest* r,
                                                           inference::ModelInferResponse* out) {
  auto* reactor = new InferReactor(runner_);
  absl::StatusOr<const CnnModel*> found = FindModel(*runner_, r->model_name(), r->model_version());
  // Unknown names share one label: a client must not create series at will.
  const absl::string_view label = found.ok() ? absl::string_view((*found)->name) : "(unknown)";
  auto refuse = [&](const absl::Status& s) {
    if (metrics_ != nullptr) {
      metrics_->OnCnnRequest(std::string(label), absl::StatusCodeToString(s.code()), nullptr);
    }
    reactor->Finish(ToGrpcStatus(s));
    reactor->Started(std::nullopt);
    return reactor;
  };
  if (!found.ok()) return refuse(found.status());
  const CnnModel& m = **found;
  absl::StatusOr<int64_t> images = CheckInferRequest(m, runner_->options().max_batch, *r);
  if (!images.ok()) return refuse(images.status());
  // `r` and `out` live until Finish; the runner calls back once (with CANCELLED after a Cancel).
  absl::StatusOr<int64_t> ticket =
      runner_->Infer(m, *images, [this, reactor, r, out, &m](absl::StatusOr<CnnResult> res) {
        if (res.ok()) FillResponse(m, runner_->options(), *r, *res, out);
        if (metrics_ != nullptr) {
          metrics_->OnCnnRequest(
              m.name, res.ok() ? "success" : absl::StatusCodeToString(res.status().code()),
              res.ok() ? &*res : nullptr);
        }
        reactor->Finish(ToGrpcStatus(res.status()));
      });
  if (!ticket.ok()) return refuse(ticket.status());
  reactor->Started(*ticket);
  return reactor;
}

}  // namespace neupims::server
