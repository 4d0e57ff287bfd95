// HwCost: the one hardware-cost type of the engine.
//
// Role: what the hardware spent on some work — unit busy times, MACs, bytes, energy by
// component and PIM commands. An operation of the iteration DAG, one iteration
// (IterationCost), the engine's running totals (EngineStats) and the metrics' differencing all
// use this one struct, so a new counter is one line in NEUPIMS_HW_COST_FIELDS below: it is then
// declared, added, subtracted, scaled and (for kEnergy fields) counted
// in energy_j() everywhere.
//
// Conventions: busy times and work counts are per device (one of the tp x pp group) summed over
// the device's decoder layers; energies are for the whole device group. PIM commands are per
// device.
#ifndef NEUPIMS_ENGINE_HW_COST_H_
#define NEUPIMS_ENGINE_HW_COST_H_

#include <cstdint>

#include "hw/dram/command.h"

namespace neupims::engine {

enum class HwCostKind : uint8_t { kBusy, kWork, kEnergy };

// X(name, kind): every double field of HwCost.
#define NEUPIMS_HW_COST_FIELDS(X)                                                      \
  X(systolic_busy_ns, kBusy)     /* the arrays were streaming (MACs / peak rate) */    \
  X(vector_busy_ns, kBusy)       /* vector-unit time (one unit-equivalent) */          \
  X(pim_channel_busy_ns, kBusy)  /* summed over channels: a PIM op was running */      \
  X(pim_mac_ns, kBusy)           /* summed over channels: the MAC datapath computed */ \
  X(interconnect_busy_ns, kBusy) /* tensor-parallel all-reduces */                     \
  X(npu_macs, kWork)                                                                   \
  X(npu_hbm_bytes, kWork)                                                              \
  X(pim_macs, kWork)                                                                   \
  X(npu_dynamic_j, kEnergy)     /* MAC / SRAM / vector */                              \
  X(npu_static_j, kEnergy)      /* NPU static power over powered time */               \
  X(dram_j, kEnergy)            /* DRAM reads behind the NPU's HBM traffic */          \
  X(pim_j, kEnergy)             /* PIM commands + refresh */                           \
  X(dram_background_j, kEnergy) /* standby + open PIM rows (incl. 2nd row buffer) */

struct HwCost {
#define NEUPIMS_HW_COST_DECLARE(name, kind) double name = 0;
  NEUPIMS_HW_COST_FIELDS(NEUPIMS_HW_COST_DECLARE)
#undef NEUPIMS_HW_COST_DECLARE
  hw::CommandCounts pim_commands{};

  HwCost& operator+=(const HwCost& o) { return AddScaled(o, 1); }
  HwCost& operator-=(const HwCost& o) { return AddScaled(o, -1); }
  // this += k * o (k copies of o's work; negative k subtracts).
  HwCost& AddScaled(const HwCost& o, int64_t k) {
    AddScaledFields(o, static_cast<double>(k));
    for (int t = 0; t < hw::kNumCommandTypes; ++t) pim_commands[t] += k * o.pim_commands[t];
    return *this;
  }
  // The double fields only (costs of operations, which carry no commands).
  HwCost& AddScaledFields(const HwCost& o, double k) {
#define NEUPIMS_HW_COST_ADD_FIELD(name, kind) name += k * o.name;
    NEUPIMS_HW_COST_FIELDS(NEUPIMS_HW_COST_ADD_FIELD)
#undef NEUPIMS_HW_COST_ADD_FIELD
    return *this;
  }
  // Energy fields only (group energies scale with the number of devices).
  void ScaleEnergy(double k) {
#define NEUPIMS_HW_COST_SCALE(name, kind) \
  if (HwCostKind::kind == HwCostKind::kEnergy) name *= k;
    NEUPIMS_HW_COST_FIELDS(NEUPIMS_HW_COST_SCALE)
#undef NEUPIMS_HW_COST_SCALE
  }
  // Sum of every kEnergy field, joules.
  double energy_j() const {
    double sum = 0;
#define NEUPIMS_HW_COST_ENERGY(name, kind) \
  if (HwCostKind::kind == HwCostKind::kEnergy) sum += name;
    NEUPIMS_HW_COST_FIELDS(NEUPIMS_HW_COST_ENERGY)
#undef NEUPIMS_HW_COST_ENERGY
    return sum;
  }
  friend HwCost operator+(HwCost a, const HwCost& b) { return a += b; }
  friend HwCost operator-(HwCost a, const HwCost& b) { return a -= b; }
};

// The HwCost part of `current - previous` for cumulative totals, every field clamped at 0 (a
// smaller value, e.g. after an engine restart, is no growth).
HwCost Growth(const HwCost& current, const HwCost& previous);

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_HW_COST_H_
