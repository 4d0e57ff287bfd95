#include "scheduler/mha_estimator.h"

#include "absl/strings/str_cat.h"
#include "common/units.h"
#include "hw/pim/tile_cost.h"

namespace neupims::scheduler {

Algorithm1Params Algorithm1Params::FromHardware(const hw::HbmSpec& spec,
                                                const hw::AttentionShape& dims) {
  const hw::PimGeometry g = hw::PimGeometry::FromSpec(spec);
  hw::TileCostModel tiles(spec);
  Algorithm1Params p;
  p.embedding = static_cast<int64_t>(dims.num_heads) * dims.head_dim;
  p.heads = dims.num_heads;
  p.page_elements = g.page_elements;
  p.banks = g.banks;
  const int dots = std::max(1, g.page_elements / std::max(1, dims.head_dim));
  const hw::TileRun key_tile{1, g.groups, dots, std::max(1, dims.head_dim / g.lanes)};
  p.tile_cycles = static_cast<double>(tiles.TilePeriod(key_tile, false));
  p.gwrite_cycles =
      static_cast<double>(tiles.TilePeriod(key_tile, true) - tiles.TilePeriod(key_tile, false));
  return p;
}

double Algorithm1Estimator::Estimate(int64_t seq_len) {
  const Algorithm1Params& p = p_;
  double l = 0;
  // GEMV latency for K^T x q.
  const int64_t q_chunks = CeilDiv(p.embedding, p.page_elements);
  l += p.gwrite_cycles * static_cast<double>(q_chunks);
  l += p.tile_cycles * static_cast<double>(CeilDiv(seq_len, p.banks) * q_chunks);
  // GEMV latency for logits x V.
  const int64_t head_dim = p.embedding / p.heads;
  const int64_t s_chunks = CeilDiv(seq_len, p.page_elements) * p.heads;
  l += p.gwrite_cycles * static_cast<double>(s_chunks);
  l += p.tile_cycles * static_cast<double>(CeilDiv(head_dim, p.banks) * s_chunks);
  return l;
}

double PimModelEstimator::Estimate(int64_t seq_len) {
  seq_len = std::max<int64_t>(1, seq_len);
  constexpr int64_t kMaxCached = 1 << 20;
  if (seq_len < kMaxCached && seq_len < static_cast<int64_t>(known_.size()) &&
      known_[seq_len] >= 0) {
    return known_[seq_len];
  }
  hw::AttentionShape s = dims_;
  s.seq_len = seq_len;
  auto c = model_->AttentionCycles(s);
  if (!c.ok()) {
    // Not cached: the error is reported (status()), and a later call may succeed.
    if (status_.ok()) {
      status_ = absl::Status(c.status().code(), absl::StrCat("MHA estimate at ", seq_len,
                                                             " tokens: ", c.status().message()));
    }
    return 0.0;
  }
  const double v = static_cast<double>(*c);
  if (seq_len < kMaxCached) {
    if (seq_len >= static_cast<int64_t>(known_.size())) {
      known_.resize(std::max<size_t>(seq_len + 1, known_.size() * 2), -1.0);
    }
    known_[seq_len] = v;
  }
  return v;
}

}  // namespace neupims::scheduler
