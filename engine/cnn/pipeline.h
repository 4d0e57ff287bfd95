// Pipeline: a discrete-event simulation of one CNN partition (scheduler::partition::Plan) serving
// a stream of inference requests, for the server's CNN models.
//
// Resources: each stage's compute is a server on its device and each stage's transfer to the
// next stage is a server on its link (a link is its own resource: stage k can compute image i+1
// while its link still ships image i). Every resource is a FIFO queue serving one image at a time:
// batch 1, because the Profile is per image (the FPGA's per-image time already amortises its
// waves of `cores` images, and the roofline, CIM and HPIM costs have no batch dimension), so a
// larger batch could only be priced as a multiple of the per-image time, which is what FIFO
// back-to-back service gives anyway.
//
// Requests arrive in non-decreasing time order; since every resource is FIFO, image order is
// kept end to end and a request's whole path is known when it arrives: Submit returns its
// completion time. AdvanceTo(t) hands back the completions up to t in time order and charges
// their busy time and energy to the resources. Simulated seconds only; never the wall clock.
//
// Closed forms (tests/engine/cnn/pipeline_test.cc): one request's latency is the sum of the
// stages' compute and transfer times; N back-to-back requests complete one per bottleneck time in
// steady state; each request costs the plan's energy.
#ifndef NEUPIMS_ENGINE_CNN_PIPELINE_H_
#define NEUPIMS_ENGINE_CNN_PIPELINE_H_

#include <cstdint>
#include <queue>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/partition/donna.h"
#include "scheduler/partition/profile.h"

namespace neupims::engine::cnn {

// One request's path through the pipeline (simulated seconds).
struct PipelineCompletion {
  int64_t id = 0;
  double arrival_s = 0;
  double completion_s = 0;
  double queue_s = 0;  // time spent waiting for busy resources, summed over the path
  double energy_j = 0;
  double latency_s() const { return completion_s - arrival_s; }
};

// A stage's compute or a transfer on a link.
struct PipelineResource {
  std::string name;    // "cim0" (compute) or "cim0->fpga0" (a link)
  std::string device;  // the device computing, or the link's sending device
  bool link = false;
  double service_s = 0;  // per image
  double energy_j = 0;   // per image
  // Charged when a completion is delivered (AdvanceTo).
  double busy_s = 0;
  double total_energy_j = 0;
};

class Pipeline {
 public:
  // InvalidArgument for a plan without stages or with negative times.
  static absl::StatusOr<Pipeline> Create(const scheduler::partition::Profile& profile,
                                         const scheduler::partition::Plan& plan);

  // Enters request `id` at `arrival_s` (>= every earlier arrival, else InvalidArgument) and
  // returns its completion.
  absl::StatusOr<PipelineCompletion> Submit(int64_t id, double arrival_s);
  // The earliest arrival at or after `after_s` that waits for no resource on its path.
  double EarliestUnqueuedArrival(double after_s) const;
  // Completions with completion_s <= t, in completion order; moves the clock to t.
  std::vector<PipelineCompletion> AdvanceTo(double t);

  double now_s() const { return now_s_; }
  double last_arrival_s() const { return last_arrival_s_; }
  int64_t in_flight() const { return static_cast<int64_t>(pending_.size()); }
  // The completion time of the next undelivered request; +infinity if none.
  double next_completion_s() const;
  // Compute stages and links in path order.
  const std::vector<PipelineResource>& resources() const { return resources_; }
  double latency_s() const;     // unloaded: the sum of service times
  double bottleneck_s() const;  // the slowest resource
  double energy_per_request_j() const;

 private:
  struct Later {
    bool operator()(const PipelineCompletion& a, const PipelineCompletion& b) const {
      return a.completion_s > b.completion_s || (a.completion_s == b.completion_s && a.id > b.id);
    }
  };

  std::vector<PipelineResource> resources_;
  std::vector<double> free_at_s_;  // when each resource finishes its last accepted image
  std::priority_queue<PipelineCompletion, std::vector<PipelineCompletion>, Later> pending_;
  double now_s_ = 0;
  double last_arrival_s_ = 0;
};

}  // namespace neupims::engine::cnn

#endif  // NEUPIMS_ENGINE_CNN_PIPELINE_H_
