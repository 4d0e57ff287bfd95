// MHA latency estimates that drive channel load balancing (NeuPIMs sec. 6.3-6.4).
//
// Role: maps a request's sequence length to the latency of its attention on one PIM channel, per
// decoder layer, in HBM cycles. Two implementations:
//   - Algorithm1Estimator: NeuPIMs Algorithm 1, with L_tile and L_GWRITE derived from the
//     timing parameters by the closed-form tile model (hw/pim/tile_cost.h) instead of measured;
//   - PimModelEstimator: the analytic PIM model's exact answer for the request's GEMV program.
// Contract: not thread-safe (the analytic model caches). An estimate that fails returns 0 and is
// kept in status(), which the scheduler turns into a fault.
#ifndef NEUPIMS_SCHEDULER_MHA_ESTIMATOR_H_
#define NEUPIMS_SCHEDULER_MHA_ESTIMATOR_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "hw/pim/gemv_plan.h"
#include "hw/pim/pim_model.h"

namespace neupims::scheduler {

class MhaEstimator {
 public:
  virtual ~MhaEstimator() = default;
  // Cycles of one request's attention (one layer) at `seq_len` tokens.
  virtual double Estimate(int64_t seq_len) = 0;
  // Estimate(seq_len), answered inline when an implementation memoised it (known_): the
  // scheduler asks for every running request whenever it admits one, and a virtual call each
  // time cost as much as the answer.
  double EstimateFast(int64_t seq_len) {
    if (seq_len >= 1 && static_cast<size_t>(seq_len) < known_.size() && known_[seq_len] >= 0) {
      return known_[seq_len];
    }
    return Estimate(seq_len);
  }
  // The memo EstimateFast reads, by seq_len (< 0: not known). Valid until the next Estimate
  // call, which may grow it.
  absl::Span<const double> known() const { return known_; }
  // The first error an estimate met (Estimate then returned 0), or OK. The scheduler reports it
  // as a fault rather than balancing channels on a made-up load.
  virtual absl::Status status() const { return absl::OkStatus(); }

 protected:
  // Answers Estimate already gave, by seq_len (< 0: not known); implementations that memoise
  // fill it, and EstimateFast reads it.
  std::vector<double> known_;
};

// Inputs of Algorithm 1. The OCR of the paper lost the ceilings; tile counts are whole tiles, so
// every division below is a ceiling (a partial tile still costs a tile).
struct Algorithm1Params {
  int64_t embedding = 1024;     // E: the device's share of the model width (heads x head_dim)
  int heads = 8;                // N_head on the device
  int64_t page_elements = 512;  // P_DRAM: elements per DRAM page
  int banks = 32;               // B_chnl: PIM banks per channel
  double tile_cycles = 186;     // L_tile: GEMV latency of one PIM tile
  double gwrite_cycles = 29;    // L_GWRITE: global-buffer load

  // L_tile and L_GWRITE from the closed-form tile model of `spec` (a full key tile with
  // page/head_dim dot products; GWRITE = first tile of a block minus a steady tile).
  static Algorithm1Params FromHardware(const hw::HbmSpec& spec, const hw::AttentionShape& dims);
};

class Algorithm1Estimator : public MhaEstimator {
 public:
  explicit Algorithm1Estimator(const Algorithm1Params& p) : p_(p) {}
  double Estimate(int64_t seq_len) override;
  const Algorithm1Params& params() const { return p_; }

 private:
  Algorithm1Params p_;
};

// Asks a PimModel (normally the analytic one) for AttentionCycles of {seq, dims}; answers are
// memoised by sequence length in known_ (the scheduler asks for every running request at
// admission).
class PimModelEstimator : public MhaEstimator {
 public:
  PimModelEstimator(hw::PimModel* model, const hw::AttentionShape& dims)
      : model_(model), dims_(dims) {}
  double Estimate(int64_t seq_len) override;
  absl::Status status() const override { return status_; }

 private:
  hw::PimModel* model_;
  absl::Status status_;  // the first failed estimate
  hw::AttentionShape dims_;
};

}  // namespace neupims::scheduler

#endif  // NEUPIMS_SCHEDULER_MHA_ESTIMATOR_H_
