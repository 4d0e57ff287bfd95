// Integration tests of inference.GRPCInferenceService (KServe v2) for CNN models: the real
// server::Server on an ephemeral port, driven by the generated C++ stub. Fast pacing except the
// in-flight test, which runs realtime so that requests really wait for each other.
#include "server/cnn_service.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "neupims/v1/llm_service.grpc.pb.h"
#include "server/server.h"
#include "tests/server/server_test_util.h"
#include "tests/server/under_tsan.h"

namespace neupims::server {
namespace {

using inference::GRPCInferenceService;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kCnn[] = "resnet50";
constexpr int64_t kImageElements = 3 * 224 * 224;

ServerOptions CnnOptionsFor(Pacing pacing, bool metrics = false) {
  ServerOptions o;
  o.port = 0;
  o.metrics_port = metrics ? 0 : -1;
  o.http_port = std::nullopt;
  o.runner.pacing = pacing;
  o.drain_timeout = std::chrono::milliseconds(5000);
  o.cnn.models = {kCnn};
  o.cnn.cluster = "donna-hetero";
  o.cnn.policy = engine::cnn::PlanPolicy::kDonnaExact;
  o.cnn.alpha = 1.0;
  return o;
}

// A well-formed request of `images` images, elements in fp32_contents (or raw bytes).
ModelInferRequest InferRequest(int64_t images, bool raw = false) {
  ModelInferRequest r;
  r.set_model_name(kCnn);
  r.set_id("req-1");
  auto* in = r.add_inputs();
  in->set_name("data");
  in->set_datatype("FP32");
  for (int64_t d : {images, int64_t{3}, int64_t{224}, int64_t{224}}) in->add_shape(d);
  if (raw) {
    r.add_raw_input_contents(std::string(static_cast<size_t>(images * kImageElements * 4), '\0'));
  } else {
    in->mutable_contents()->mutable_fp32_contents()->Resize(
        static_cast<int>(images * kImageElements), 0.5f);
  }
  return r;
}

class CnnServiceTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  void StartServer(const ServerOptions& options) {
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = GRPCInferenceService::NewStub(channel_);
  }

  grpc::Status Infer(const ModelInferRequest& r, ModelInferResponse* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->ModelInfer(&ctx, r, out);
  }

  // INVALID_ARGUMENT (or `code`) whose message names `field`.
  void ExpectRefused(const ModelInferRequest& r, const std::string& field,
                     grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT) {
    ModelInferResponse out;
    const grpc::Status s = Infer(r, &out);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(field));
  }

  const CnnModel& Model() { return *server_->cnn_runner()->Find(kCnn); }

  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<GRPCInferenceService::Stub> stub_;
};

TEST_F(CnnServiceTest, ServerLiveReadyAndModelReady) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  grpc::ClientContext c1, c2, c3, c4, c5;
  inference::ServerLiveResponse live;
  ASSERT_TRUE(stub_->ServerLive(&c1, {}, &live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub_->ServerReady(&c2, {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  inference::ModelReadyRequest known, unknown;
  known.set_name(kCnn);
  unknown.set_name("resnet51");
  inference::ModelReadyResponse r1, r2;
  ASSERT_TRUE(stub_->ModelReady(&c3, known, &r1).ok());
  EXPECT_TRUE(r1.ready());
  ASSERT_TRUE(stub_->ModelReady(&c4, unknown, &r2).ok());
  EXPECT_FALSE(r2.ready());
  EXPECT_TRUE(server_->Drain());
  inference::ServerReadyResponse drained;
  ASSERT_TRUE(stub_->ServerReady(&c5, {}, &drained).ok());
  EXPECT_FALSE(drained.ready());
}

TEST_F(CnnServiceTest, ServerMetadataAndServerInfoNameTheCnnConfiguration) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  grpc::ClientContext ctx;
  inference::ServerMetadataResponse md;
  ASSERT_TRUE(stub_->ServerMetadata(&ctx, {}, &md).ok());
  EXPECT_EQ(md.name(), "neupims-serve");
  EXPECT_EQ(md.version(), kVersion);
  EXPECT_THAT(md.extensions(), Contains("neupims_cnn_models=resnet50"));
  EXPECT_THAT(md.extensions(), Contains("neupims_cnn_cluster=donna-hetero"));
  EXPECT_THAT(md.extensions(), Contains("neupims_cnn_policy=donna-exact"));

  auto llm = neupims::v1::LlmService::NewStub(channel_);
  grpc::ClientContext ctx2;
  neupims::v1::ServerInfo info;
  ASSERT_TRUE(llm->GetServerInfo(&ctx2, {}, &info).ok());
  EXPECT_THAT(info.cnn_models(), ElementsAre("resnet50"));
  EXPECT_EQ(info.cnn_cluster(), "donna-hetero");
  EXPECT_EQ(info.cnn_policy(), "donna-exact");
  EXPECT_EQ(info.cnn_alpha(), 1.0);
}

TEST_F(CnnServiceTest, ModelMetadataDescribesTheTensors) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest req;
  req.set_name(kCnn);
  inference::ModelMetadataResponse md;
  ASSERT_TRUE(stub_->ModelMetadata(&ctx, req, &md).ok());
  EXPECT_EQ(md.name(), kCnn);
  EXPECT_THAT(md.versions(), ElementsAre("1"));
  ASSERT_EQ(md.inputs_size(), 1);
  EXPECT_EQ(md.inputs(0).name(), "data");
  EXPECT_EQ(md.inputs(0).datatype(), "FP32");
  EXPECT_THAT(md.inputs(0).shape(), ElementsAre(-1, 3, 224, 224));
  ASSERT_EQ(md.outputs_size(), 1);
  EXPECT_EQ(md.outputs(0).name(), "prob");
  EXPECT_THAT(md.outputs(0).shape(), ElementsAre(-1, 1000));

  grpc::ClientContext ctx2;
  req.set_name("resnet51");
  const grpc::Status s = stub_->ModelMetadata(&ctx2, req, &md);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("served: resnet50"));
}

TEST_F(CnnServiceTest, ModelInferReturnsTheOutputAndTheSimulatedFigures) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  ModelInferResponse out;
  ASSERT_TRUE(Infer(InferRequest(2), &out).ok());
  EXPECT_EQ(out.model_name(), kCnn);
  EXPECT_EQ(out.id(), "req-1");
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).name(), "prob");
  EXPECT_EQ(out.outputs(0).datatype(), "FP32");
  EXPECT_THAT(out.outputs(0).shape(), ElementsAre(2, 1000));
  ASSERT_EQ(out.outputs(0).contents().fp32_contents_size(), 2000);
  EXPECT_FLOAT_EQ(out.outputs(0).contents().fp32_contents(1999), 0.001f);

  // Two images of the first request: the pipeline's latency, then one bottleneck behind.
  const CnnModel& m = Model();
  double latency = 0;
  for (const auto& s : m.plan.stages) latency += s.compute_s + s.transfer_s;
  const auto& p = out.parameters();
  ASSERT_TRUE(p.contains("sim_latency_ns") && p.contains("sim_energy_j") &&
              p.contains("partition") && p.contains("sim_queue_ns"));
  EXPECT_NEAR(p.at("sim_latency_ns").int64_param() * 1e-9, latency + m.plan.bottleneck_s, 2e-9);
  EXPECT_NEAR(std::stod(p.at("sim_energy_j").string_param()), 2 * m.plan.energy_j,
              1e-5 * m.plan.energy_j);
  EXPECT_EQ(p.at("sim_queue_ns").int64_param(), 0);
  EXPECT_EQ(p.at("partition").string_param(), m.partition);
  EXPECT_EQ(p.at("images").int64_param(), 2);
  EXPECT_EQ(p.at("policy").string_param(), "donna-exact");

  // Raw contents in, raw contents out.
  ModelInferResponse raw;
  ASSERT_TRUE(Infer(InferRequest(1, /*raw=*/true), &raw).ok());
  ASSERT_EQ(raw.raw_output_contents_size(), 1);
  ASSERT_EQ(raw.raw_output_contents(0).size(), 4000u);
  float v = 0;
  std::memcpy(&v, raw.raw_output_contents(0).data(), 4);
  EXPECT_FLOAT_EQ(v, 0.001f);
  EXPECT_EQ(raw.outputs(0).contents().fp32_contents_size(), 0);
}

TEST_F(CnnServiceTest, ModelInferServesTheHypePolicy) {
  ServerOptions o = CnnOptionsFor(Pacing::kFast);
  o.cnn.cluster = "fpga-gpu";
  o.cnn.policy = engine::cnn::PlanPolicy::kHype;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  ModelInferResponse out;
  ASSERT_TRUE(Infer(InferRequest(1), &out).ok());
  const CnnModel& m = Model();
  double latency = 0;
  for (const auto& s : m.plan.stages) latency += s.compute_s + s.transfer_s;
  const auto& p = out.parameters();
  EXPECT_EQ(p.at("policy").string_param(), "hype");
  EXPECT_EQ(p.at("partition").string_param(), m.partition);
  EXPECT_THAT(m.partition, HasSubstr("gpu0:"));
  EXPECT_NEAR(p.at("sim_latency_ns").int64_param() * 1e-9, latency, 2e-9);
  EXPECT_NEAR(std::stod(p.at("sim_energy_j").string_param()), m.plan.energy_j,
              1e-5 * m.plan.energy_j);
}

TEST_F(CnnServiceTest, FastPacingAdmitsOneBottleneckApart) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  int64_t previous = -1;
  for (int i = 0; i < 5; ++i) {
    ModelInferResponse out;
    ASSERT_TRUE(Infer(InferRequest(1), &out).ok());
    const int64_t arrival = out.parameters().at("sim_arrival_ns").int64_param();
    if (previous >= 0) {
      EXPECT_NEAR((arrival - previous) * 1e-9, Model().plan.bottleneck_s, 2e-9);
    }
    previous = arrival;
  }
}

TEST_F(CnnServiceTest, MalformedTensorsAreInvalidArgumentNamingTheField) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  ModelInferRequest r = InferRequest(1);
  r.mutable_inputs(0)->mutable_contents()->mutable_fp32_contents()->RemoveLast();
  ExpectRefused(r, "inputs[0].contents.fp32_contents: 150527 elements");

  r = InferRequest(1, /*raw=*/true);
  r.mutable_raw_input_contents(0)->append("x");
  ExpectRefused(r, "raw_input_contents[0]: 602113 bytes");

  r = InferRequest(1);
  r.mutable_inputs(0)->set_datatype("INT8");
  ExpectRefused(r, "inputs[0].datatype: 'INT8'");

  r = InferRequest(1);
  r.mutable_inputs(0)->set_name("image");
  ExpectRefused(r, "inputs[0].name: 'image'");

  r = InferRequest(1);
  r.clear_inputs();
  ExpectRefused(r, "inputs: empty");

  r = InferRequest(1);
  r.mutable_inputs(0)->set_shape(2, 225);
  ExpectRefused(r, "inputs[0].shape: [1,3,225,224]");

  r = InferRequest(1);
  r.mutable_inputs(0)->set_shape(0, 0);
  ExpectRefused(r, "inputs[0].shape[0]: batch 0");

  r = InferRequest(1);
  r.add_outputs()->set_name("fc1000");
  ExpectRefused(r, "outputs[0].name: 'fc1000'");

  r = InferRequest(1);
  r.set_model_name("resnet51");
  ExpectRefused(r, "unknown model 'resnet51'", grpc::StatusCode::NOT_FOUND);

  r = InferRequest(1);
  r.set_model_version("7");
  ExpectRefused(r, "no version '7'", grpc::StatusCode::NOT_FOUND);
}

TEST_F(CnnServiceTest, AnInt8ModelTakesIntContentsOrOneByteAnElement) {
  ServerOptions o = CnnOptionsFor(Pacing::kFast);
  o.cnn.input_datatype = CnnDatatype::kInt8;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  grpc::ClientContext ctx;
  inference::ModelMetadataRequest req;
  req.set_name(kCnn);
  inference::ModelMetadataResponse md;
  ASSERT_TRUE(stub_->ModelMetadata(&ctx, req, &md).ok());
  EXPECT_EQ(md.inputs(0).datatype(), "INT8");
  EXPECT_EQ(md.outputs(0).datatype(), "FP32");

  ModelInferRequest r = InferRequest(1);
  r.mutable_inputs(0)->set_datatype("INT8");
  ExpectRefused(r, "an INT8 tensor's elements go in int_contents only");
  r.mutable_inputs(0)->mutable_contents()->clear_fp32_contents();
  r.mutable_inputs(0)->mutable_contents()->mutable_int_contents()->Resize(kImageElements, 7);
  ModelInferResponse out;
  ASSERT_TRUE(Infer(r, &out).ok());
  EXPECT_THAT(out.outputs(0).shape(), ElementsAre(1, 1000));
  r.mutable_inputs(0)->mutable_contents()->set_int_contents(5, 300);
  ExpectRefused(r, "inputs[0].contents.int_contents[5]: 300 is not an INT8");

  ModelInferRequest raw = InferRequest(1, /*raw=*/true);
  raw.mutable_inputs(0)->set_datatype("INT8");
  ExpectRefused(raw,
                "raw_input_contents[0]: 602112 bytes, but inputs[0].shape [1,3,224,224] x "
                "INT8 needs 150528");
  raw.mutable_raw_input_contents(0)->resize(kImageElements);
  ASSERT_TRUE(Infer(raw, &out).ok());
}

// --cnn-max-batch is a promise to KServe clients: a request of that many images fits the port's
// message limit even above --max-message-bytes (8 ResNet50 images in FP32 are 4.8 MB, over the
// 4 MiB default), raw or typed; the LLM service keeps --max-message-bytes for its own requests.
TEST_F(CnnServiceTest, ARequestOfCnnMaxBatchImagesFitsTheMessageLimit) {
  ServerOptions o = CnnOptionsFor(Pacing::kFast);
  o.cnn.max_batch = 8;
  ASSERT_GT(8 * kImageElements * 4, o.max_message_bytes);
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  for (bool raw : {true, false}) {
    ModelInferResponse out;
    const grpc::Status s = Infer(InferRequest(8, raw), &out);
    ASSERT_TRUE(s.ok()) << "raw " << raw << ": " << s.error_code() << " " << s.error_message();
    EXPECT_THAT(out.outputs(0).shape(), ElementsAre(8, 1000));
  }
  auto llm = neupims::v1::LlmService::NewStub(channel_);
  neupims::v1::GenerateRequest big;
  big.set_text(std::string(static_cast<size_t>(o.max_message_bytes) + 1, 'a'));
  big.set_max_new_tokens(1);
  grpc::ClientContext ctx;
  neupims::v1::CompleteResponse done;
  const grpc::Status s = llm->Complete(&ctx, big, &done);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--max-message-bytes"));
}

TEST(CnnMessageLimit, CoversTheLargestModelAtTheMaxBatchInItsWidestEncoding) {
  CnnModel resnet, vgg8;
  resnet.input.shape = {-1, 3, 224, 224};
  vgg8.input.shape = {-1, 3, 32, 32};
  const std::vector<const CnnModel*> models = {&vgg8, &resnet};
  // FP32: 4 bytes an element, raw or packed fp32_contents; INT8: up to 10 bytes an element
  // (int_contents varints of negative values are sign-extended to 64 bits).
  EXPECT_GE(InferenceServiceImpl::MaxRequestBytes(models, 64, CnnDatatype::kFp32),
            64 * kImageElements * 4);
  EXPECT_LT(InferenceServiceImpl::MaxRequestBytes(models, 64, CnnDatatype::kFp32),
            64 * kImageElements * 4 + (1 << 20));
  EXPECT_GE(InferenceServiceImpl::MaxRequestBytes(models, 2, CnnDatatype::kInt8),
            2 * kImageElements * 10);
  // gRPC's limit is an int.
  EXPECT_EQ(InferenceServiceImpl::MaxRequestBytes(models, 4096, CnnDatatype::kInt8),
            std::numeric_limits<int>::max());
}

// A ModelInfer on the callback API that records its status.
struct AsyncInfer {
  grpc::ClientContext ctx;
  ModelInferRequest request;
  ModelInferResponse response;
  grpc::Status status;
};

TEST_F(CnnServiceTest, HundredRequestsInFlightAreAllAnswered) {
  // At a quarter of real speed ResNet50's bottleneck stage takes ~15 ms of wall time, far longer
  // than sending a request, so the requests pile up in the pipeline. Under ThreadSanitizer a
  // request takes ~45 ms to send, so the pipeline runs at 1/30 of real speed (~125 ms a
  // bottleneck stage, ~13 s for the hundred) for them to pile up as well.
  ServerOptions o = CnnOptionsFor(Pacing::kRealtime);
  o.runner.speed = testing_util::kThreadSanitizer ? 1.0 / 30 : 0.25;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  constexpr int kN = 100;
  std::vector<std::unique_ptr<AsyncInfer>> calls;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  for (int i = 0; i < kN; ++i) {
    auto c = std::make_unique<AsyncInfer>();
    c->request = InferRequest(1);
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    AsyncInfer* raw = c.get();
    stub_->async()->ModelInfer(&raw->ctx, &raw->request, &raw->response,
                               [raw, &mu, &cv, &done](grpc::Status s) {
                                 std::lock_guard<std::mutex> l(mu);
                                 raw->status = std::move(s);
                                 ++done;
                                 cv.notify_all();
                               });
    calls.push_back(std::move(c));
  }
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(60), [&] { return done == kN; })) << done;
  }
  int64_t queued = 0;
  for (const auto& c : calls) {
    ASSERT_TRUE(c->status.ok()) << c->status.error_message();
    EXPECT_THAT(c->response.outputs(0).shape(), ElementsAre(1, 1000));
    queued += c->response.parameters().at("sim_queue_ns").int64_param() > 0;
  }
  // They arrived faster than the bottleneck serves them: most waited.
  EXPECT_GT(queued, 0);
}

TEST_F(CnnServiceTest, DrainLetsInFlightRequestsFinishAndRefusesNewOnes) {
  // At 1/100 of real speed one ResNet50 inference takes ~0.1-0.2 s of wall time.
  ServerOptions o = CnnOptionsFor(Pacing::kRealtime);
  o.runner.speed = 0.01;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  AsyncInfer call;
  call.request = InferRequest(1);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub_->async()->ModelInfer(&call.ctx, &call.request, &call.response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> l(mu);
    call.status = std::move(s);
    done = true;
    cv.notify_all();
  });
  // Drain only once the request is in the pipeline: it is then waited for.
  while (server_->cnn_runner()->in_flight() == 0) std::this_thread::yield();
  EXPECT_TRUE(server_->Drain());
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return done; }));
  }
  EXPECT_TRUE(call.status.ok()) << call.status.error_message();
  ModelInferResponse out;
  const grpc::Status late = Infer(InferRequest(1), &out);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::UNAVAILABLE) << late.error_message();
}

TEST_F(CnnServiceTest, ShutdownEndsRequestsStillInThePipelineWithUnavailable) {
  ServerOptions o = CnnOptionsFor(Pacing::kRealtime);
  o.runner.speed = 1e-4;  // ~10 s of wall time per image: it cannot finish on its own
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  AsyncInfer call;
  call.request = InferRequest(1);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  stub_->async()->ModelInfer(&call.ctx, &call.request, &call.response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> l(mu);
    call.status = std::move(s);
    done = true;
    cv.notify_all();
  });
  while (server_->cnn_runner()->in_flight() == 0) std::this_thread::yield();
  server_->Shutdown();
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return done; }));
  EXPECT_EQ(call.status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A call its client cancels (or whose deadline passes) while it waits in the pipeline ends at
// once: it leaves the in-flight count (which drain waits on) and is counted once, as CANCELLED.
// Its images stay in the simulated pipeline (the devices were already given them): the
// simulation does not change. Before, the call held its place until its simulated completion
// (here ~10 s of wall time an image), drain waited for it, and it was counted a success.
TEST_F(CnnServiceTest, ACancelledCallLeavesTheInFlightCountAtOnceAndIsCountedOnce) {
  ServerOptions o = CnnOptionsFor(Pacing::kRealtime, /*metrics=*/true);
  o.runner.speed = 1e-4;  // ~10 s of wall time per image: none can finish on its own
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  constexpr int kN = 20;
  std::vector<std::unique_ptr<AsyncInfer>> calls;
  std::mutex mu;
  std::condition_variable cv;
  int ended = 0;
  for (int i = 0; i < kN; ++i) {
    calls.push_back(std::make_unique<AsyncInfer>());
    AsyncInfer* c = calls.back().get();
    c->request = InferRequest(1);
    stub_->async()->ModelInfer(&c->ctx, &c->request, &c->response, [&, c](grpc::Status st) {
      std::lock_guard<std::mutex> l(mu);
      c->status = std::move(st);
      ++ended;
      cv.notify_all();
    });
  }
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // hang guard
  while (server_->cnn_runner()->in_flight() < kN && std::chrono::steady_clock::now() < guard) {
    std::this_thread::yield();
  }
  ASSERT_EQ(server_->cnn_runner()->in_flight(), kN);
  for (auto& c : calls) c->ctx.TryCancel();
  {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_until(l, guard, [&] { return ended == kN; }));
  }
  for (auto& c : calls) EXPECT_EQ(c->status.error_code(), grpc::StatusCode::CANCELLED);
  while (server_->cnn_runner()->in_flight() > 0 && std::chrono::steady_clock::now() < guard) {
    std::this_thread::yield();
  }
  EXPECT_EQ(server_->cnn_runner()->in_flight(), 0) << "cancelled calls still hold their place";
  // A later call is admitted (behind the cancelled calls' images in the simulated pipeline).
  AsyncInfer later;
  later.request = InferRequest(1);
  stub_->async()->ModelInfer(&later.ctx, &later.request, &later.response, [&](grpc::Status st) {
    std::lock_guard<std::mutex> l(mu);
    later.status = std::move(st);
    ++ended;
    cv.notify_all();
  });
  while (server_->cnn_runner()->in_flight() == 0 && std::chrono::steady_clock::now() < guard) {
    std::this_thread::yield();
  }
  EXPECT_EQ(server_->cnn_runner()->in_flight(), 1);
  using testing_util::Metric;
  const std::string http = testing_util::HttpGet(server_->metrics_port(), "/metrics");
  const size_t body = http.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << http;
  const auto m = testing_util::ParsePrometheus(http.substr(body + 4));
  EXPECT_EQ(
      Metric(m, "neupims:cnn_requests_total", {{"model_name", kCnn}, {"outcome", "CANCELLED"}}),
      kN);
  // Counted once: no other outcome (no success when the last image's time comes).
  double requests = 0;
  for (const auto& sample : m) {
    if (sample.name == "neupims:cnn_requests_total") requests += sample.value;
  }
  EXPECT_EQ(requests, kN);
  later.ctx.TryCancel();
  std::unique_lock<std::mutex> l(mu);
  ASSERT_TRUE(cv.wait_until(l, guard, [&] { return ended == kN + 1; }));
}

TEST_F(CnnServiceTest, MetricsCountRequestsLatencyDeviceTimeAndEnergy) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast, /*metrics=*/true)));
  constexpr int kN = 3;
  for (int i = 0; i < kN; ++i) {
    ModelInferResponse out;
    ASSERT_TRUE(Infer(InferRequest(1), &out).ok());
  }
  ModelInferRequest bad = InferRequest(1);
  bad.mutable_inputs(0)->set_datatype("FP16");
  ModelInferResponse out;
  EXPECT_FALSE(Infer(bad, &out).ok());

  using testing_util::Metric;
  const std::string http = testing_util::HttpGet(server_->metrics_port(), "/metrics");
  const size_t body = http.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << http;
  const auto m = testing_util::ParsePrometheus(http.substr(body + 4));
  const std::map<std::string, std::string> model{{"model_name", kCnn}};
  EXPECT_EQ(Metric(m, "neupims:cnn_requests_total", {{"model_name", kCnn}, {"outcome", "success"}}),
            kN);
  EXPECT_EQ(Metric(m, "neupims:cnn_requests_total",
                   {{"model_name", kCnn}, {"outcome", "INVALID_ARGUMENT"}}),
            1);
  EXPECT_EQ(Metric(m, "neupims:cnn_images_total", model), kN);
  EXPECT_EQ(Metric(m, "neupims:cnn_request_latency_seconds_count", model), kN);
  EXPECT_GT(Metric(m, "neupims:cnn_sim_time_seconds", model), 0);
  double energy = 0;
  for (const auto& r : Model().plan.stages) {
    const std::string device = Model().profile.devices[r.device].name;
    const std::map<std::string, std::string> labels{
        {"model_name", kCnn}, {"device", device}, {"kind", "compute"}};
    EXPECT_NEAR(Metric(m, "neupims:cnn_device_busy_seconds_total", labels), kN * r.compute_s, 1e-9);
    const double u = Metric(m, "neupims:cnn_device_utilization", labels);
    EXPECT_GT(u, 0);
    EXPECT_LE(u, 1);
    energy += Metric(m, "neupims:cnn_device_energy_joules_total", labels);
  }
  for (const auto& s : m) {
    if (s.name == "neupims:cnn_device_energy_joules_total" && s.labels.at("kind") == "link") {
      energy += s.value;
    }
  }
  EXPECT_NEAR(energy, kN * Model().plan.energy_j, 1e-6 * kN * Model().plan.energy_j);
}

TEST_F(CnnServiceTest, LlmAndCnnTrafficAtOnceAreBothAnswered) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  auto llm = neupims::v1::LlmService::NewStub(channel_);
  std::atomic<int> llm_ok{0};
  std::thread generator([&] {
    for (int i = 0; i < 5; ++i) {
      grpc::ClientContext ctx;
      neupims::v1::GenerateRequest g;
      g.set_prompt_length(32);
      g.set_max_new_tokens(16);
      g.set_ignore_eos(true);
      neupims::v1::CompleteResponse done;
      if (llm->Complete(&ctx, g, &done).ok() && done.tokens_size() == 16) ++llm_ok;
    }
  });
  int cnn_ok = 0;
  for (int i = 0; i < 10; ++i) {
    ModelInferResponse out;
    cnn_ok += Infer(InferRequest(1), &out).ok();
  }
  generator.join();
  EXPECT_EQ(cnn_ok, 10);
  EXPECT_EQ(llm_ok.load(), 5);
}

// gRPC Generate streams, HTTP SSE streams (some of whose clients hang up) and KServe ModelInfer
// calls at once, in realtime: every call is answered or aborted, and /metrics counts each once:
// `length` = the LLM calls read to their end on both front ends, `abort` = the HTTP hang-ups,
// `cnn_requests_total{outcome="success"}` = the CNN calls; nothing is left in either engine.
TEST_F(CnnServiceTest, MixedGrpcHttpAndKserveLoadIsCountedOnceEach) {
  ServerOptions o = CnnOptionsFor(Pacing::kRealtime, /*metrics=*/true);
  o.runner.speed = 1;
  o.http_port = 0;
  o.http_threads = 32;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  constexpr int kGrpc = 8, kHttp = 8, kHttpHangUps = 4, kCnnCalls = 20;
  constexpr int64_t kTokens = 48;
  auto llm = neupims::v1::LlmService::NewStub(channel_);
  std::atomic<int> grpc_ok{0}, http_ok{0}, http_gone{0}, cnn_ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kGrpc; ++i) {
    clients.emplace_back([&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      neupims::v1::GenerateRequest g;
      g.set_prompt_length(16);
      g.set_max_new_tokens(kTokens);
      g.set_ignore_eos(true);
      auto reader = llm->Generate(&ctx, g);
      neupims::v1::GenerateResponse resp;
      int64_t tokens = 0, reported = -1;
      while (reader->Read(&resp)) {
        tokens += resp.tokens().tokens_size();
        if (resp.has_complete()) reported = resp.complete().completion_tokens();
      }
      if (reader->Finish().ok() && tokens == kTokens && reported == kTokens) ++grpc_ok;
    });
  }
  for (int i = 0; i < kHttp + kHttpHangUps; ++i) {
    clients.emplace_back([&, hang_up = i >= kHttp] {
      httplib::Client c("127.0.0.1", *server_->http_port());
      c.set_read_timeout(60, 0);
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = absl::StrCat(R"({"prompt": "hi", "ignore_eos": true, "stream": true, )",
                              R"("stream_options": {"include_usage": true}, "max_tokens": )",
                              kTokens, "}");
      req.set_header("Content-Type", "application/json");
      std::string raw;
      req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        raw.append(data, n);
        return !hang_up;  // a hang-up leaves after its first token events
      };
      httplib::Result r = c.send(req);
      if (hang_up) {
        http_gone += !r;
      } else if (r && r->status == 200 && absl::EndsWith(raw, "data: [DONE]\n\n") &&
                 absl::StrContains(raw, absl::StrCat(R"("completion_tokens":)", kTokens))) {
        ++http_ok;
      }
    });
  }
  for (int i = 0; i < kCnnCalls; ++i) {
    clients.emplace_back([&] {
      ModelInferResponse out;
      cnn_ok += Infer(InferRequest(1), &out).ok();
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(grpc_ok, kGrpc);
  EXPECT_EQ(http_ok, kHttp);
  EXPECT_EQ(http_gone, kHttpHangUps);
  EXPECT_EQ(cnn_ok, kCnnCalls);
  const auto guard = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  ServerSnapshot s = server_->runner().Snapshot();
  while ((s.live != 0 || s.kv_blocks_used != 0) && std::chrono::steady_clock::now() < guard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = server_->runner().Snapshot();
  }
  EXPECT_EQ(s.live, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_EQ(server_->cnn_runner()->in_flight(), 0);
  using testing_util::Metric;
  const std::string http = testing_util::HttpGet(server_->metrics_port(), "/metrics");
  const size_t body = http.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << http;
  const auto m = testing_util::ParsePrometheus(http.substr(body + 4));
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "length"}}),
            kGrpc + kHttp);
  EXPECT_EQ(Metric(m, "neupims:request_success_total", {{"finished_reason", "abort"}}),
            kHttpHangUps);
  EXPECT_EQ(Metric(m, "neupims:cnn_requests_total", {{"model_name", kCnn}, {"outcome", "success"}}),
            kCnnCalls);
}

TEST_F(CnnServiceTest, ReflectionListsTheInferenceServiceOnlyWhenCnnsAreServed) {
  ASSERT_NO_FATAL_FAILURE(StartServer(CnnOptionsFor(Pacing::kFast)));
  EXPECT_THAT(testing_util::ReflectionListServices(channel_),
              Contains("inference.GRPCInferenceService"));
  server_->Shutdown();
  server_.reset();

  ServerOptions plain = CnnOptionsFor(Pacing::kFast);
  plain.cnn.models.clear();
  ASSERT_NO_FATAL_FAILURE(StartServer(plain));
  EXPECT_THAT(testing_util::ReflectionListServices(channel_),
              Not(Contains("inference.GRPCInferenceService")));
  grpc::ClientContext ctx;
  inference::ServerLiveResponse live;
  EXPECT_EQ(stub_->ServerLive(&ctx, {}, &live).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_F(CnnServiceTest, TheBearerTokenGuardsTheInferenceService) {
  const std::string token_file = ::testing::TempDir() + "cnn_token";
  std::ofstream(token_file) << "cnn-secret\n";
  ServerOptions o = CnnOptionsFor(Pacing::kFast);
  o.security.auth_token_file = token_file;
  ASSERT_NO_FATAL_FAILURE(StartServer(o));
  grpc::ClientContext without;
  inference::ServerLiveResponse live;
  EXPECT_EQ(stub_->ServerLive(&without, {}, &live).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext with;
  with.AddMetadata("authorization", "Bearer cnn-secret");
  EXPECT_TRUE(stub_->ServerLive(&with, {}, &live).ok());
  grpc::Status st;
  EXPECT_EQ(testing_util::HealthCheck(channel_, "inference.GRPCInferenceService", &st), 1)
      << st.error_message();
}

TEST(CnnServerConfig, ReadsTheCnnFieldsAndNamesBadOnes) {
  ServerOptions o;
  ASSERT_TRUE(ParseServerConfig(R"({"cnn_models": ["resnet50", "vgg16"], "cnn_cluster":
      "fpga-gpu", "cnn_policy": "gpu-only", "cnn_alpha": 0.8, "cnn_max_batch": 8})",
                                "cnn.json", &o)
                  .ok());
  EXPECT_THAT(o.cnn.models, ElementsAre("resnet50", "vgg16"));
  EXPECT_EQ(o.cnn.cluster, "fpga-gpu");
  EXPECT_EQ(o.cnn.policy, engine::cnn::PlanPolicy::kGpuOnly);
  EXPECT_EQ(o.cnn.alpha, 0.8);
  EXPECT_EQ(o.cnn.max_batch, 8);
  ServerOptions bad;
  absl::Status s = ParseServerConfig(R"({"cnn_policy": "hyper"})", "cnn.json", &bad);
  EXPECT_THAT(s.message(), HasSubstr("cnn_policy"));
  ASSERT_TRUE(ParseServerConfig(R"({"cnn_policy": "hype"})", "cnn.json", &bad).ok());
  EXPECT_EQ(bad.cnn.policy, engine::cnn::PlanPolicy::kHype);
  s = ParseServerConfig(R"({"cnn_alpha": 1.5})", "cnn.json", &bad);
  EXPECT_THAT(s.message(), HasSubstr("cnn_alpha"));
  s = ParseServerConfig(R"({"cnn_models": "resnet50"})", "cnn.json", &bad);
  EXPECT_THAT(s.message(), HasSubstr("cnn_models"));
}

TEST(CnnServerStart, AnUnknownModelOrUnrunnablePolicyIsRefusedNamingIt) {
  ServerOptions o = CnnOptionsFor(Pacing::kFast);
  o.cnn.models = {"resnet51"};
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("CNN model 'resnet51'"));
  o.cnn.models = {"resnet50"};
  o.cnn.cluster = "fpga-gpu";
  o.cnn.policy = engine::cnn::PlanPolicy::kFpgaOnly;
  s = Server::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("fpga-only"));
}

}  // namespace
}  // namespace neupims::server
