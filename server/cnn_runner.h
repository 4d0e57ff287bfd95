// CnnRunner: the server's CNN models, each a partition (engine/cnn/plan.h) of its graph over the
// configured cluster simulated as a pipeline (engine/cnn/pipeline.h), with a thread-safe front
// for the KServe v2 service (cnn_service.h).
//
// Every model has its own copy of the cluster (one replica per model): models do not compete for
// devices. A request of N images (the batch dimension of its input) enters its model's pipeline
// as N images at one arrival; it completes when its last image does, and costs N times the plan's
// energy.
//
// Pacing (as EngineRunner's): realtime: a request arrives at the simulated time of the wall clock
// since the runner started (x speed) and its response is sent when the wall clock reaches its
// simulated completion (a runner thread waits for it). Fast: the pipeline runs flat out: a request
// arrives at the earliest simulated time at which it waits for no resource
// (Pipeline::EarliestUnqueuedArrival; back-to-back requests are admitted one bottleneck apart) and
// its response is sent at once. Fast pacing thus measures the partition's saturated throughput and
// unloaded latency, deterministically; realtime pacing shows queueing under the offered load. This
// and EngineRunner are the only places below gRPC that read the wall clock.
#ifndef NEUPIMS_SERVER_CNN_RUNNER_H_
#define NEUPIMS_SERVER_CNN_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/enum_names.h"
#include "engine/cnn/pipeline.h"
#include "engine/cnn/plan.h"
#include "server/engine_runner.h"  // Pacing

namespace neupims::server {

class ServerMetrics;

// The datatype of a CNN model's input tensor (the output is FP32): what clients send. The
// simulation is the same for both (the profile's cuts cross links in FP32).
enum class CnnDatatype { kFp32, kInt8 };
// "FP32", "INT8" (the protocol's spellings).
const EnumNames<CnnDatatype>& CnnDatatypeNames();

struct CnnOptions {
  std::vector<std::string> models;  // built-in graph names or graph JSON paths; empty: no CNNs
  std::string cluster = "donna-hetero";
  engine::cnn::PlanPolicy policy = engine::cnn::PlanPolicy::kDonna;
  double alpha = 1.0;
  int max_batch = 64;  // images per request (the input's batch dimension)
  CnnDatatype input_datatype = CnnDatatype::kFp32;
  bool any() const { return !models.empty(); }
};

// A tensor of the protocol: name, datatype ("FP32") and shape, -1 for the batch dimension.
struct CnnTensorSpec {
  std::string name;
  std::string datatype = "FP32";
  std::vector<int64_t> shape;
  int64_t elements_per_image() const;
};

// A served model, fixed at creation.
struct CnnModel {
  std::string name;
  CnnTensorSpec input;   // [-1, C, H, W]
  CnnTensorSpec output;  // [-1, classes] (or [-1, C, H, W] for a spatial output)
  scheduler::partition::Profile profile;
  scheduler::partition::Plan plan;
  std::string partition;  // engine::cnn::PartitionString
};

struct CnnResult {
  int64_t images = 0;
  double arrival_s = 0, completion_s = 0;
  double queue_s = 0;  // the first image's waiting for busy resources
  double energy_j = 0;
  double latency_s() const { return completion_s - arrival_s; }
};

class CnnRunner {
 public:
  using Done = std::function<void(absl::StatusOr<CnnResult>)>;

  // Loads every model, profiles it on the cluster and solves its plan: errors name the model,
  // the cluster or the policy.
  static absl::StatusOr<std::unique_ptr<CnnRunner>> Create(const CnnOptions& options, Pacing pacing,
                                                           double speed, ServerMetrics* metrics);
  ~CnnRunner();

  const CnnOptions& options() const { return options_; }
  const std::vector<std::unique_ptr<CnnModel>>& models() const { return models_; }
  // nullptr if no model is called `name`.
  const CnnModel* Find(const std::string& name) const;
  // "resnet50, vgg16".
  std::string ModelList() const;

  // Thread-safe. Enters `images` images of `model` (a served model) and calls `done` once with
  // the result: before Infer returns in fast pacing, on the runner thread in realtime. Returns
  // the request's ticket (for Cancel). An error return (UNAVAILABLE while draining) means `done`
  // is not called.
  absl::StatusOr<int64_t> Infer(const CnnModel& model, int64_t images, Done done);
  // Thread-safe. Ends the request of `ticket` now if it has not been answered: its `done` gets
  // CANCELLED (once; never the result) and it leaves the in-flight count. Its images stay in the
  // simulated pipeline: the devices were given them, and later requests still wait behind them,
  // so the simulation does not change. A request already answered: nothing.
  void Cancel(int64_t ticket);
  bool ready();
  // Requests entered and not yet answered.
  int64_t in_flight();
  void BeginDrain();
  // Waits until no request is in flight or `timeout` passes; true if drained.
  bool WaitDrained(std::chrono::milliseconds timeout);
  // Ends whatever is in flight with UNAVAILABLE and stops the runner thread. Idempotent.
  void Stop();

 private:
  struct Pending {
    CnnResult result;
    Done done;
  };
  struct ModelState {
    const CnnModel* model = nullptr;
    engine::cnn::Pipeline pipeline;
    // Keyed by the id of the request's last image (FIFO: it completes last).
    absl::flat_hash_map<int64_t, Pending> pending;
    std::vector<double> reported_busy_s, reported_energy_j;  // per resource, sent to metrics
  };
  using Delivery = std::pair<Done, CnnResult>;

  CnnRunner(const CnnOptions& options, Pacing pacing, double speed, ServerMetrics* metrics);
  void Loop();
  double WallSimSeconds() const;
  // Delivers `state`'s completions up to `t` into `out` and reports the growth of busy time
  // and energy to the metrics.
  void AdvanceLocked(ModelState& state, double t, std::vector<Delivery>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Deliver(std::vector<Delivery>& out);

  CnnOptions options_;
  Pacing pacing_;
  double speed_;
  ServerMetrics* metrics_;
  std::vector<std::unique_ptr<CnnModel>> models_;
  std::chrono::steady_clock::time_point wall_start_;

  absl::Mutex mu_;
  std::vector<ModelState> states_ ABSL_GUARDED_BY(mu_);
  int64_t next_image_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool kick_ ABSL_GUARDED_BY(mu_) = false;  // a new completion may be earlier than the wait
  std::thread thread_;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_CNN_RUNNER_H_
