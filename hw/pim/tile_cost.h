// Closed-form latency of PIM GEMV tiles, derived from the HBM timing parameters.
//
// Role: the analytic heart of the PIM model (docs/hw.md, "PIM tile latency") and the latency
// estimate a header-aware memory controller computes from a PIM_HEADER to plan refresh.
//
// A tile starts at tau, when every PIM row buffer is precharged. With G bank groups activated
// in the order r0g0, r1g0, r0g1, ... over R ranks, grouped activation i issues at
//   a_0 = max(tau, rho_rank(0)),  a_i = max(a_{i-1} + 1, a_{i-R} + tFAW, rho_rank(i))
// (one row command per cycle; a grouped activation fills a rank's four-activation tFAW window).
// Column work starts once the last group is open, c_0 = a_{G-1} + tRCD, and takes
//   NeuPIMs:  k PIM_GEMV(s) back to back:      last column = c_0 + (k*s - 1) * tCCD_L
//   Newton:   k x (s PIM_DOTPRODUCT + RDRESULT): last column = c_0 + (k*(s+1) - 1) * tCCD_L
// and the PIM row buffers close with PIM_PRECHARGE at p = max(last + tRTP, a_{G-1} + tRAS), so
// the next tile may start at tau' = p + tRP. The tile's period is tau' - tau.
// The first tile of a block follows a PIM_GWRITE issued at tau (column bus) on the last rank:
// that rank's first grouped activation waits a tFAW window (rho = tau + tFAW), the source bank's
// group waits for the GWRITE's self-precharge, and the first column op waits for the global
// buffer (tau + tRCD + bursts_per_row * tCCD_L), and the all-bank PIM_PRECHARGE waits until the
// GWRITE's source bank has precharged itself. NeuPIMs also sends a PIM_HEADER at the start of
// every block; it rides the row bus during the previous tile's precharge and costs no time.
// The reference simulator's alternatives (pim.timing in hbm_spec.h: per-bank precharges, a fused
// GEMV that releases its row at issue, GWRITE as an ordinary access, waiting for refresh) change
// the terms of these equations, not the mechanism.
#ifndef NEUPIMS_HW_PIM_TILE_COST_H_
#define NEUPIMS_HW_PIM_TILE_COST_H_

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "common/units.h"
#include "hw/dram/hbm_spec.h"
#include "hw/pim/gemv_plan.h"

namespace neupims::hw {

class TileCostModel {
 public:
  explicit TileCostModel(const HbmSpec& spec);

  // Period of one tile (tau -> tau'), optionally the first of a block (after GWRITE/HEADER).
  // Memoised per tile shape (the shapes of a model are few), so repeated queries are O(1).
  Cycles TilePeriod(const TileRun& run, bool block_start) const;
  // As TilePeriod, when rank r's first grouped activation cannot issue before tau +
  // rank_delay[r] (its tFAW window still holds recent MEM activations). The controller's
  // refresh planning uses it with delays read off the live timing state.
  Cycles TilePeriodWithRankDelays(const TileRun& run, bool block_start,
                                  const Cycles* rank_delay) const;
  // The worst-case tile a controller must assume without a PIM_HEADER: every group, one dot
  // product per column step over the whole page.
  Cycles WorstCaseTilePeriod(const Cycles* rank_delay = nullptr) const;
  // The longest tile any GEMV program may hold: a block's first tile over every bank group with
  // a full page of column steps, split into the dot products that make it longest (NeuPIMs; a
  // fused GEMV's occupancy has a floor, so many short dots can beat one long one), or the worst
  // case above (Newton, which plans refresh without a PIM_HEADER).
  Cycles LongestTilePeriod() const;
  // Sum of tile periods of a program: its channel occupancy without refresh or MEM traffic.
  Cycles ProgramCycles(const GemvProgram& program) const;

  // Expected cycles lost to refresh by PIM work of `busy_cycles` on a channel kept busy by PIM,
  // averaged over the refresh phase. `mean_tile` is the program's average tile period: tiles
  // never straddle a refresh, so refreshes come every tRFC + n * mean_tile cycles with n the
  // whole tiles that fit in tREFI - tRFC.
  // With pim.timing.refresh_guard = wait_for_refresh the channel also idles, before each
  // refresh, the part of the interval too short for another tile.
  double ExpectedRefreshCycles(double busy_cycles, double mean_tile) const;
  // Expected refresh events during that work.
  double ExpectedRefreshEvents(double busy_cycles, double mean_tile) const;

  const PimGeometry& geometry() const { return geometry_; }
  // Cycles one refresh event blocks PIM work (tRFC plus one row-bus slot per extra REF).
  Cycles RefreshBlockCycles() const;
  // Channel occupancy of one fused PIM_GEMV of `steps` column steps (pim.timing.gemv =
  // fused_command): tCCD_L * (max(steps, 6) + 1).
  Cycles FusedGemvCycles(int steps) const;
  // A PIM_GWRITE as an ordinary access (pim.timing.gwrite = ordinary_access), issue -> the
  // tile's first activation: (tRP + tRCD if one row buffer) + pieces * (tCCD_S + tCCD_L).
  Cycles GwriteAccessCycles() const;
  // Refresh events per tREFI that block PIM (1 for all-rank refresh, ranks when staggered).
  int RefreshEventsPerInterval() const;

 private:
  // What a block's vector load holds back in the tile after it (times from tau).
  struct BlockStart {
    Cycles all_acts = 0;      // every grouped activation
    Cycles last_rank = 0;     // the last rank's activations (its tFAW window)
    Cycles buffer_ready = 0;  // the first column command (global buffer loaded)
    int source_group = -1;    // the GWRITE's source bank group, if it blocks one
    Cycles source_ready = 0;  // ... until then
  };
  BlockStart StartOfBlock(bool block_start) const;
  // When each of a tile's `groups` grouped activations issues (times from tau).
  using Activations = absl::InlinedVector<Cycles, 16>;
  void ActivationTimes(int groups, const BlockStart& start, const Cycles* rank_delay,
                       Activations* a) const;
  // A tile's first column command without a block start (times from tau).
  Cycles PlainFirstColumn(int groups) const;
  double RefreshWindowWork(double mean_tile) const;
  Cycles Period(int groups, int dots, int steps, bool block_start, const Cycles* rank_delay) const;

  HbmSpec spec_;
  PimGeometry geometry_;
  bool neupims_;
  mutable absl::flat_hash_map<uint64_t, Cycles> cache_;  // not thread-safe: one model per thread
};

// A tile never straddles a refresh (sec. 5.2: the controller refreshes early instead), so the
// longest tile must fit between two refresh events: tREFI >= tRFC + (ranks - 1) + longest tile
// (the other dies' REFs take one row-bus slot each; a staggered die is pulled in with the first).
// Otherwise the command-level controller would refresh early before every tile, forever.
// InvalidArgument naming tREFI if not (OK for a device without PIM).
absl::Status ValidateRefreshLeavesRoomForATile(const HbmSpec& spec);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_PIM_TILE_COST_H_
