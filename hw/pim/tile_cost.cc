#include "hw/pim/tile_cost.h"

#include <algorithm>
#include <cmath>

#include "absl/container/inlined_vector.h"
#include "hw/dram/timing_table.h"

namespace neupims::hw {

TileCostModel::TileCostModel(const HbmSpec& spec)
    : spec_(spec),
      geometry_(PimGeometry::FromSpec(spec)),
      neupims_(spec.pim.command_set == PimCommandSet::kNeuPims) {}

Cycles TileCostModel::Period(int groups, int dots, int steps, bool block_start,
                             const Cycles* rank_delay) const {
  const HbmTiming& t = spec_.timing;
  const int R = geometry_.ranks;
  const Cycles tau = 0;
  // Per-rank earliest first activation, and the GWRITE source bank's group (last rank, last
  // bank group), which must wait for the GWRITE's self-precharge.
  // A block's PIM_HEADER goes out on the row bus while the previous tile precharges (it waits
  // for nothing), so it costs the tile no time.
  const Cycles header_slot = -1;
  Cycles rho_last_rank = tau;
  Cycles gb_ready = tau;
  int source_group = -1;
  Cycles source_ready = tau;
  if (block_start) {
    rho_last_rank = tau + t.tFAW;  // GWRITE (weight 1) + grouped ACT (weight 4) > 4
    gb_ready = tau + GwriteBufferReadyCycles(spec_);
    source_group = (R - 1) + R * (spec_.org.bank_groups - 1);  // program index of that group
    source_ready = tau + GwriteBankBusyCycles(spec_);
  }
  Cycles prev = header_slot;  // last row-bus command
  absl::InlinedVector<Cycles, 16> a(groups);
  for (int i = 0; i < groups; ++i) {
    const int rank = i % R;
    Cycles ai = std::max(tau, prev + 1);
    if (block_start && rank == R - 1) ai = std::max(ai, rho_last_rank);
    if (rank_delay != nullptr && i < R) ai = std::max(ai, tau + rank_delay[rank]);
    if (i >= R) ai = std::max(ai, a[i - R] + t.tFAW);
    if (i == source_group) ai = std::max(ai, source_ready);
    a[i] = ai;
    prev = ai;
  }
  const Cycles last_act = a[groups - 1];
  const Cycles c0 = std::max(last_act + t.tRCD, gb_ready);
  const int columns = neupims_ ? dots * steps : dots * (steps + 1);
  const Cycles last_column = c0 + static_cast<Cycles>(columns - 1) * t.tCCD_L;
  // The all-bank PIM_PRECHARGE also covers the GWRITE's source bank, busy until it has
  // precharged itself.
  const Cycles pre = std::max(
      {last_column + t.tRTP, last_act + t.tRAS, last_act + 1, block_start ? source_ready : tau});
  return pre + t.tRP - tau;
}

Cycles TileCostModel::TilePeriod(const TileRun& run, bool block_start) const {
  const uint64_t key = (static_cast<uint64_t>(run.groups) << 42) ^
                       (static_cast<uint64_t>(run.dots) << 22) ^
                       (static_cast<uint64_t>(run.steps_per_dot) << 1) ^ (block_start ? 1 : 0);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const Cycles p = Period(run.groups, run.dots, run.steps_per_dot, block_start, nullptr);
  cache_.emplace(key, p);
  return p;
}

Cycles TileCostModel::TilePeriodWithRankDelays(const TileRun& run, bool block_start,
                                               const Cycles* rank_delay) const {
  return Period(run.groups, run.dots, run.steps_per_dot, block_start, rank_delay);
}

Cycles TileCostModel::WorstCaseTilePeriod(const Cycles* rank_delay) const {
  const int steps = geometry_.page_elements / geometry_.lanes;
  return Period(geometry_.groups, steps, 1, /*block_start=*/true, rank_delay);
}

Cycles TileCostModel::ProgramCycles(const GemvProgram& program) const {
  Cycles total = 0;
  for (const GemvBlock& b : program.blocks) {
    Cycles block = 0;
    bool first = b.load_vector;
    for (const TileRun& r : b.runs) {
      if (r.count <= 0) continue;
      if (first) {
        block += TilePeriod(r, true) + (r.count - 1) * TilePeriod(r, false);
        first = false;
      } else {
        block += r.count * TilePeriod(r, false);
      }
    }
    total += b.repeat * block;
  }
  return total;
}

Cycles TileCostModel::RefreshBlockCycles() const {
  const int refs_per_event = spec_.refresh == RefreshPolicy::kAllRanks ? spec_.org.ranks : 1;
  return spec_.timing.tRFC + (refs_per_event - 1);
}

int TileCostModel::RefreshEventsPerInterval() const {
  return spec_.refresh == RefreshPolicy::kAllRanks ? 1 : spec_.org.ranks;
}

double TileCostModel::ExpectedRefreshCycles(double busy_cycles, double mean_tile) const {
  if (busy_cycles <= 0 || mean_tile <= 0) return 0;
  const double block = static_cast<double>(RefreshBlockCycles());
  // Time between refresh events that block PIM.
  const double interval = static_cast<double>(spec_.timing.tREFI) / RefreshEventsPerInterval();
  // Whole tiles that fit between two events; the controller refreshes early rather than split.
  const double fit = std::max(1.0, std::floor((interval - block) / mean_tile));
  const double work_per_event = fit * mean_tile;
  return busy_cycles / work_per_event * block;
}

}  // namespace neupims::hw
