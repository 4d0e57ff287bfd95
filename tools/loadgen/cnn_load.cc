#include "tools/loadgen/cnn_load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/option_ranges.h"
#include "common/splitmix64.h"
#include "grpcpp/grpcpp.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "tools/loadgen/loadgen.h"

namespace neupims::loadgen {
namespace {

using inference::GRPCInferenceService;
using Clock = std::chrono::steady_clock;

// One answered request.
struct Sample {
  bool ok = false;
  std::string error;
  double client_s = 0;
  double sim_latency_s = 0, sim_queue_s = 0, sim_arrival_s = 0, sim_completion_s = 0;
  double energy_j = 0;
  int64_t images = 0;
};

std::chrono::system_clock::time_point DeadlineIn(double s) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(s));
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The request every client sends: zeros in raw_input_contents, of the model's input shape.
absl::StatusOr<inference::ModelInferRequest> BuildRequest(GRPCInferenceService::Stub& stub,
                                                          const CnnLoadOptions& o) {
  grpc::ClientContext ctx;
  Authorize(o.auth_token, &ctx);
  ctx.set_deadline(DeadlineIn(o.connect_timeout_s));
  inference::ModelMetadataRequest req;
  req.set_name(o.model);
  inference::ModelMetadataResponse md;
  const grpc::Status s = stub.ModelMetadata(&ctx, req, &md);
  if (!s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("--cnn-model ", o.model, ": ModelMetadata failed: ", s.error_message()));
  }
  const std::string datatype = md.inputs_size() == 1 ? md.inputs(0).datatype() : "";
  if (datatype != "FP32" && datatype != "INT8") {
    return absl::FailedPreconditionError(
        absl::StrCat("--cnn-model ", o.model, ": not a model with one FP32 or INT8 input"));
  }
  inference::ModelInferRequest r;
  r.set_model_name(o.model);
  auto* in = r.add_inputs();
  in->set_name(md.inputs(0).name());
  in->set_datatype(datatype);
  int64_t elements = 1;
  for (int64_t d : md.inputs(0).shape()) {
    const int64_t v = d < 0 ? o.batch : d;
    in->add_shape(v);
    elements *= v;
  }
  const int64_t bytes = datatype == "INT8" ? 1 : 4;
  r.add_raw_input_contents(std::string(static_cast<size_t>(elements * bytes), '\0'));
  return r;
}

double Param(const inference::ModelInferResponse& r, const std::string& key) {
  auto it = r.parameters().find(key);
  if (it == r.parameters().end()) return 0;
  if (it->second.has_string_param()) return std::atof(it->second.string_param().c_str());
  return static_cast<double>(it->second.int64_param());
}

Sample ToSample(const grpc::Status& s, const inference::ModelInferResponse& r, double client_s) {
  Sample x{.ok = s.ok(), .client_s = client_s};
  if (!s.ok()) {
    x.error = absl::StrCat(s.error_code(), ": ", s.error_message());
    return x;
  }
  x.sim_latency_s = Param(r, "sim_latency_ns") * 1e-9;
  x.sim_queue_s = Param(r, "sim_queue_ns") * 1e-9;
  x.sim_arrival_s = Param(r, "sim_arrival_ns") * 1e-9;
  x.sim_completion_s = Param(r, "sim_completion_ns") * 1e-9;
  x.energy_j = Param(r, "sim_energy_j");
  x.images = static_cast<int64_t>(Param(r, "images"));
  return x;
}

// N clients, each sending its next request when the previous one is answered.
std::vector<Sample> ClosedLoop(GRPCInferenceService::Stub& stub,
                               const inference::ModelInferRequest& req, const CnnLoadOptions& o) {
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::vector<Sample> samples;
  std::vector<std::thread> clients;
  for (int c = 0; c < o.concurrency; ++c) {
    clients.emplace_back([&] {
      while (next.fetch_add(1) < o.requests) {
        grpc::ClientContext ctx;
        Authorize(o.auth_token, &ctx);
        ctx.set_deadline(DeadlineIn(o.timeout_s));
        inference::ModelInferResponse resp;
        const Clock::time_point t0 = Clock::now();
        const grpc::Status s = stub.ModelInfer(&ctx, req, &resp);
        Sample x = ToSample(s, resp, Seconds(Clock::now() - t0));
        std::lock_guard<std::mutex> l(mu);
        samples.push_back(std::move(x));
      }
    });
  }
  for (std::thread& t : clients) t.join();
  return samples;
}

// Poisson arrivals at o.rate on the callback API: nothing waits for an answer to send.
std::vector<Sample> OpenLoop(GRPCInferenceService::Stub& stub,
                             const inference::ModelInferRequest& req, const CnnLoadOptions& o) {
  struct Call {
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    Clock::time_point sent;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Sample> samples;
  std::vector<std::unique_ptr<Call>> calls;
  Clock::time_point at = Clock::now();
  for (int64_t i = 0; i < o.requests; ++i) {
    // Exponential gap from a uniform in (0, 1) (SplitMix64 of the seed and the index).
    const double u =
        (static_cast<double>(SplitMix64(o.seed * 0x9E3779B97F4A7C15ull + i) >> 11) + 0.5) /
        9007199254740992.0;
    at += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(-std::log(u) / o.rate));
    std::this_thread::sleep_until(at);
    auto c = std::make_unique<Call>();
    c->ctx.set_deadline(DeadlineIn(o.timeout_s));
    Authorize(o.auth_token, &c->ctx);
    c->sent = Clock::now();
    Call* raw = c.get();
    stub.async()->ModelInfer(&raw->ctx, &req, &raw->resp,
                             [raw, &mu, &cv, &samples](grpc::Status s) {
                               Sample x = ToSample(s, raw->resp, Seconds(Clock::now() - raw->sent));
                               std::lock_guard<std::mutex> l(mu);
                               samples.push_back(std::move(x));
                               cv.notify_all();
                             });
    calls.push_back(std::move(c));
  }
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return static_cast<int64_t>(samples.size()) == o.requests; });
  return samples;
}

CnnLoadResult Aggregate(const std::vector<Sample>& samples, double wall_s) {
  CnnLoadResult r;
  r.wall_s = wall_s;
  std::vector<double> client, sim, queue;
  double first = std::numeric_limits<double>::infinity(), last = 0, energy = 0;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++r.failed;
      if (r.first_error.empty()) r.first_error = s.error;
      continue;
    }
    ++r.ok;
    r.images += s.images;
    client.push_back(s.client_s);
    sim.push_back(s.sim_latency_s);
    queue.push_back(s.sim_queue_s);
    first = std::min(first, s.sim_arrival_s);
    last = std::max(last, s.sim_completion_s);
    energy += s.energy_j;
  }
  r.client_latency_s = neupims::Summarize(client);
  r.sim_latency_s = neupims::Summarize(sim);
  r.sim_queue_s = neupims::Summarize(queue);
  r.client_images_per_s = wall_s > 0 ? r.images / wall_s : 0;
  r.sim_images_per_s = last > first ? r.images / (last - first) : 0;
  r.sim_energy_per_image_j = r.images > 0 ? energy / r.images : 0;
  return r;
}

// The flags' ranges again, for library callers (as ValidateOptions in the LLM mode): a rate of
// 1e-308 or a timeout of 1e308 s overflows the int64 nanoseconds it is converted to.
absl::Status CheckCnnLoadOptions(const CnnLoadOptions& o) {
  const IntRange requests = option_ranges::kCnnRequests;
  if (o.requests < requests.min || o.requests > requests.max) {
    return absl::InvalidArgumentError(absl::StrCat("--cnn-requests: value ", o.requests,
                                                   " must be in [", requests.min, ", ",
                                                   requests.max, "]"));
  }
  // A rate of 0: the closed loop.
  if (o.rate != 0) {
    if (const std::string problem = DoubleRangeProblem(o.rate, option_ranges::kCnnRateRps);
        !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--cnn-rate: value ", o.rate, " ", problem));
    }
  }
  return CheckTimeouts(o.timeout_s, o.connect_timeout_s);
}

}  // namespace

absl::StatusOr<CnnLoadResult> RunCnnLoad(const CnnLoadOptions& o) {
  if (absl::Status s = CheckCnnLoadOptions(o); !s.ok()) return s;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = ChannelCredentials(o.tls);
  if (!creds.ok()) return creds.status();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(o.server, *creds, args);
  if (!channel->WaitForConnected(DeadlineIn(o.connect_timeout_s))) {
    return absl::UnavailableError(absl::StrCat("--server ", o.server, ": no connection within ",
                                               o.connect_timeout_s, " s", TlsHint(o.tls)));
  }
  std::unique_ptr<GRPCInferenceService::Stub> stub = GRPCInferenceService::NewStub(channel);
  absl::StatusOr<inference::ModelInferRequest> req = BuildRequest(*stub, o);
  if (!req.ok()) return req.status();
  const Clock::time_point t0 = Clock::now();
  const std::vector<Sample> samples =
      o.rate > 0 ? OpenLoop(*stub, *req, o) : ClosedLoop(*stub, *req, o);
  CnnLoadResult r = Aggregate(samples, Seconds(Clock::now() - t0));
  r.model = o.model;
  // The partition and policy, from one more request's parameters.
  grpc::ClientContext ctx;
  Authorize(o.auth_token, &ctx);
  ctx.set_deadline(DeadlineIn(o.timeout_s));
  inference::ModelInferResponse resp;
  if (stub->ModelInfer(&ctx, *req, &resp).ok()) {
    r.partition = resp.parameters().at("partition").string_param();
    r.policy = resp.parameters().at("policy").string_param();
  }
  return r;
}

void PrintCnnSummary(const CnnLoadOptions& o, const CnnLoadResult& r, FILE* out) {
  std::fprintf(out, "============ CNN serving benchmark (KServe v2) ============\n");
  std::fprintf(out, "%-36s %s\n", "Model:", r.model.c_str());
  std::fprintf(out, "%-36s %s\n", "Policy:", r.policy.c_str());
  std::fprintf(out, "%-36s %s\n", "Partition:", r.partition.c_str());
  const std::string load = o.rate > 0 ? absl::StrCat("Poisson, ", o.rate, " requests/s")
                                      : absl::StrCat("closed loop, ", o.concurrency, " in flight");
  std::fprintf(out, "%-36s %s\n", "Load:", load.c_str());
  std::fprintf(out, "%-36s %lld x %lld image(s)\n", "Requests (ok):", static_cast<long long>(r.ok),
               static_cast<long long>(o.batch));
  std::fprintf(out, "%-36s %lld\n", "Failed:", static_cast<long long>(r.failed));
  if (!r.first_error.empty())
    std::fprintf(out, "%-36s %s\n", "First error:", r.first_error.c_str());
  std::fprintf(out, "%-36s %.3f\n", "Wall time (s):", r.wall_s);
  std::fprintf(out, "%-36s %.2f\n", "Images/s (client, wall clock):", r.client_images_per_s);
  std::fprintf(out, "%-36s %.2f\n", "Images/s (simulated):", r.sim_images_per_s);
  std::fprintf(out, "%-36s %.4f\n", "Energy per image (simulated, J):", r.sim_energy_per_image_j);
  std::fprintf(out, "%-22s %10s %10s %10s %10s\n", "Latency (ms)", "mean", "p50", "p90", "p99");
  for (const auto& [name, s] :
       {std::pair{"simulated", &r.sim_latency_s}, std::pair{"simulated queue", &r.sim_queue_s},
        std::pair{"client", &r.client_latency_s}}) {
    std::fprintf(out, "%-22s %10.3f %10.3f %10.3f %10.3f\n", name, s->mean * 1e3, s->median * 1e3,
                 s->p90 * 1e3, s->p99 * 1e3);
  }
}

}  // namespace neupims::loadgen
