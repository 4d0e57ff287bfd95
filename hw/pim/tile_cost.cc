#include "hw/pim/tile_cost.h"

#include <algorithm>
#include <cmath>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "hw/dram/timing_table.h"

namespace neupims::hw {

TileCostModel::TileCostModel(const HbmSpec& spec)
    : spec_(spec),
      geometry_(PimGeometry::FromSpec(spec)),
      neupims_(spec.pim.command_set == PimCommandSet::kNeuPims) {}

Cycles TileCostModel::Period(int groups, int dots, int steps, bool block_start,
                             const Cycles* rank_delay) const {
  const HbmTiming& t = spec_.timing;
  const PimTiming& sw = spec_.pim.timing;
  const Cycles tau = 0;
  const BlockStart start = StartOfBlock(block_start);
  Activations a;
  ActivationTimes(groups, start, rank_delay, &a);
  const Cycles last_act = a.back();
  const Cycles c0 = std::max(last_act + t.tRCD, start.buffer_ready);
  // `release`: the last command that needs the rows open; `channel_free`: when the column bus
  // may take the next tile's first command.
  Cycles release, channel_free;
  if (sw.gemv == PimGemvTiming::kFusedCommand) {
    // Holding its row, a GEMV needs it until its last step; released, only at its issue.
    const Cycles occupancy = FusedGemvCycles(steps);
    channel_free = c0 + static_cast<Cycles>(dots) * occupancy;
    release = sw.gemv_releases_row ? channel_free - occupancy : channel_free - t.tCCD_L;
  } else {
    const int columns = neupims_ ? dots * steps : dots * (steps + 1);
    release = c0 + static_cast<Cycles>(columns - 1) * t.tCCD_L;
    channel_free = release + t.tCCD_L;
  }
  // The precharge also covers the GWRITE's source bank, busy until it has precharged itself.
  const Cycles first_pre = std::max(
      {release + t.tRTP, last_act + 1, start.source_group >= 0 ? start.source_ready : tau});
  Cycles next;
  if (sw.row_close == PimRowClose::kPerBankPrecharge) {
    // One PRE per open bank, one per row-bus cycle in activation order, each at least tRAS
    // after its group's activation; then the PIM_HEADER; the next activation the cycle after.
    Cycles pre = first_pre - 1;
    for (const Cycles ag : a) {
      for (int b = 0; b < geometry_.banks_per_group; ++b) pre = std::max(pre + 1, ag + t.tRAS);
    }
    next = pre + 2;
  } else {
    next = std::max(first_pre, last_act + t.tRAS) + t.tRP;
  }
  // A tile of this shape after it reaches its first column command no earlier than the column
  // bus frees (binds only for a fused GEMV longer than the row switch).
  // (The first column comes at least tRCD after the tile starts, so below that it cannot bind.)
  if (channel_free - t.tRCD > next) next = std::max(next, channel_free - PlainFirstColumn(groups));
  return next - tau;
}

void TileCostModel::ActivationTimes(int groups, const BlockStart& start, const Cycles* rank_delay,
                                    Activations* a) const {
  const HbmTiming& t = spec_.timing;
  const int R = geometry_.ranks;
  const Cycles tau = 0;
  Cycles prev = -1;  // last row-bus command (a block's PIM_HEADER costs no time, see the header)
  a->resize(groups);
  for (int i = 0; i < groups; ++i) {
    const int rank = i % R;
    Cycles ai = std::max({tau, prev + 1, start.all_acts});
    if (rank == R - 1) ai = std::max(ai, start.last_rank);
    if (rank_delay != nullptr && i < R) ai = std::max(ai, tau + rank_delay[rank]);
    if (i >= R) ai = std::max(ai, (*a)[i - R] + t.tFAW);
    if (i == start.source_group) ai = std::max(ai, start.source_ready);
    (*a)[i] = ai;
    prev = ai;
  }
}

Cycles TileCostModel::PlainFirstColumn(int groups) const {
  Activations a;
  ActivationTimes(groups, BlockStart{}, nullptr, &a);
  return a.back() + spec_.timing.tRCD;
}

TileCostModel::BlockStart TileCostModel::StartOfBlock(bool block_start) const {
  BlockStart s;
  if (!block_start) return s;
  const HbmTiming& t = spec_.timing;
  if (spec_.pim.timing.gwrite == PimGwriteTiming::kOrdinaryAccess) {
    // The whole access precedes the tile: nothing of it overlaps the activations.
    s.all_acts = s.buffer_ready = GwriteAccessCycles();
    return s;
  }
  // PIM_GWRITE (weight 1) + a grouped ACT (weight 4) overfill the last rank's tFAW window; its
  // source bank (last rank, last bank group) waits for the GWRITE's self-precharge.
  s.last_rank = t.tFAW;
  s.buffer_ready = GwriteBufferReadyCycles(spec_);
  s.source_group = (geometry_.ranks - 1) + geometry_.ranks * (spec_.org.bank_groups - 1);
  s.source_ready = GwriteBankBusyCycles(spec_);
  return s;
}

Cycles TileCostModel::FusedGemvCycles(int steps) const {
  return spec_.timing.tCCD_L * static_cast<Cycles>(std::max(steps, 6) + 1);
}

Cycles TileCostModel::GwriteAccessCycles() const {
  const HbmTiming& t = spec_.timing;
  const PimTiming& sw = spec_.pim.timing;
  const Cycles pieces = spec_.org.page_bytes / sw.gwrite_access_bytes;
  const Cycles open_row =
      spec_.pim.row_buffers == RowBufferMode::kSingle ? t.tRP + t.tRCD : Cycles{0};
  return open_row + pieces * (t.tCCD_S + t.tCCD_L);
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

Cycles TileCostModel::LongestTilePeriod() const {
  if (!neupims_) return WorstCaseTilePeriod();
  const int columns = geometry_.page_elements / geometry_.lanes;
  Cycles longest = 0;
  for (int steps = 1; steps <= columns; ++steps) {
    longest = std::max(longest, Period(geometry_.groups, columns / steps, steps, true, nullptr));
  }
  return longest;
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
  const double interval = static_cast<double>(spec_.timing.tREFI) / RefreshEventsPerInterval();
  const double work_per_event = RefreshWindowWork(mean_tile);
  // Refreshing early, a refresh event costs tRFC and comes after every work_per_event cycles of
  // work; waiting for it, the channel also idles out the interval's unused end.
  const double lost_per_event = spec_.pim.timing.refresh_guard == PimRefreshGuard::kWaitForRefresh
                                    ? std::max(block, interval - work_per_event)
                                    : block;
  return busy_cycles / work_per_event * lost_per_event;
}

double TileCostModel::ExpectedRefreshEvents(double busy_cycles, double mean_tile) const {
  if (busy_cycles <= 0 || mean_tile <= 0) return 0;
  return busy_cycles / RefreshWindowWork(mean_tile);
}

double TileCostModel::RefreshWindowWork(double mean_tile) const {
  const double block = static_cast<double>(RefreshBlockCycles());
  // Time between refresh events that block PIM.
  const double interval = static_cast<double>(spec_.timing.tREFI) / RefreshEventsPerInterval();
  // Whole tiles that fit between two events (a tile never straddles a refresh).
  const double fit = std::max(1.0, std::floor((interval - block) / mean_tile));
  return fit * mean_tile;
}

absl::Status ValidateRefreshLeavesRoomForATile(const HbmSpec& spec) {
  if (!spec.pim.enabled) return absl::OkStatus();
  const Cycles longest = TileCostModel(spec).LongestTilePeriod();
  const Cycles needed = spec.timing.tRFC + (spec.org.ranks - 1) + longest;
  if (spec.timing.tREFI >= needed) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "hbm.timing_cycles.tREFI (", spec.timing.tREFI, ") must be >= tRFC + ", spec.org.ranks - 1,
      " REF slots + the longest PIM tile (", longest, " cycles) = ", needed,
      ": a PIM tile never straddles a refresh, so none would ever fit"));
}

}  // namespace neupims::hw
