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
// A device hosting several stages of one plan (a hype plan: gpu, fpga, gpu) is one resource: its
// stages share its time line, so its per-image service is the sum of its stages and the busy time
// it accumulates adds up (likewise a link used twice in one direction). The path then visits the
// resource more than once per image.
//
// Requests arrive in non-decreasing time order and a request's whole path is booked when it
// arrives: each step takes the earliest idle interval of its resource, at or after the step is
// ready, that is long enough (non-preemptive, so a later image may use a gap an earlier image
// leaves while it is elsewhere in the path). Where each resource is visited once per path this
// is plain FIFO (an earlier image's step was booked at the first fit, so no gap before it can hold
// a later one) and image order is kept end to end. Submit returns the completion time. AdvanceTo(t)
// hands back the completions up to t in time order and charges their busy time and energy to the
// resources. Simulated seconds only; never the wall clock.
//
// Closed forms (tests/engine/cnn/pipeline_test.cc): one request's latency is the sum of the
// stages' compute and transfer times; N back-to-back requests complete one per bottleneck time in
// steady state, the bottleneck being the busiest resource (a shared device's stages summed); each
// request costs the plan's energy.
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

// A device's compute (all its stages) or a directed link (all its transfers).
struct PipelineResource {
  std::string name;    // "cim0" (compute) or "cim0->fpga0" (a link)
  std::string device;  // the device computing, or the link's sending device
  bool link = false;
  double service_s = 0;  // per image, summed over the path's visits
  double energy_j = 0;   // per image, summed over the path's visits
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
  // Devices and links in order of first use on the path.
  const std::vector<PipelineResource>& resources() const { return resources_; }
  double latency_s() const;     // unloaded: the sum of service times
  double bottleneck_s() const;  // the busiest resource (its per-image service summed)
  double energy_per_request_j() const;

 private:
  struct Later {
    bool operator()(const PipelineCompletion& a, const PipelineCompletion& b) const {
      return a.completion_s > b.completion_s || (a.completion_s == b.completion_s && a.id > b.id);
    }
  };

  // One visit of the path: a stage's compute or a transfer.
  struct Step {
    int resource = 0;
    double service_s = 0;
    double energy_j = 0;
  };
  struct Interval {
    double start_s = 0;
    double end_s = 0;
  };

  void AddStep(PipelineResource resource, double service_s, double energy_j);
  // The earliest start >= ready_s of a `length_s` idle interval of `resource`.
  double EarliestFit(int resource, double ready_s, double length_s) const;
  void Book(int resource, double start_s, double end_s);

  std::vector<PipelineResource> resources_;
  std::vector<Step> path_;
  // Each resource's booked intervals, by start; those ending before the last arrival are dropped
  // (no later step can start before it).
  std::vector<std::vector<Interval>> booked_;
  std::priority_queue<PipelineCompletion, std::vector<PipelineCompletion>, Later> pending_;
  double now_s_ = 0;
  double last_arrival_s_ = 0;
};

}  // namespace neupims::engine::cnn

#endif  // NEUPIMS_ENGINE_CNN_PIPELINE_H_
