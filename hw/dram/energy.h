// DRAM + PIM energy from command counts and background state (Micron's DDR power model as used
// by DRAMsim3, with PIM commands as multiples of a read per NeuPIMs sec. 8.2).
//
// Per-command increments (VDD in V, currents in mA, tCK in ns -> pJ):
//   ACT (incl. its PRE) = VDD * (IDD0*tRC - IDD3N*tRAS - IDD2N*tRP) * tCK
//   RD  = VDD * (IDD4R - IDD3N) * tBL * tCK  (+ I/O energy per bit)
//   WR  = VDD * (IDD4W - IDD3N) * tBL * tCK  (+ I/O energy per bit)
//   REF = VDD * (IDD5AB - IDD3N) * tRFC * tCK (per rank)
//   PIM_ACTIVATION = banks_per_group * ACT;  PIM_GWRITE = ACT + gwrite_read_multiple * RD
//   one PIM MAC column step = dot_read_multiple * RD (all banks compute; Newton: 4x a read)
//   one PIM result burst = rdresult_read_multiple * RD
// Background per rank and cycle: IDD3N (a row open) or IDD2N (all precharged), plus, with dual
// row buffers, dual_buffer_background_fraction * (IDD3N - IDD2N) while a PIM row is held open.
#ifndef NEUPIMS_HW_DRAM_ENERGY_H_
#define NEUPIMS_HW_DRAM_ENERGY_H_

#include "hw/dram/command.h"
#include "hw/dram/hbm_spec.h"

namespace neupims::hw {

struct DramActivity {
  CommandCounts commands{};
  double pim_column_steps = 0;
  double pim_results = 0;
  double rank_cycles_total = 0;          // cycles x ranks observed
  double rank_cycles_row_open = 0;       // of which some row buffer was open
  double rank_cycles_second_buffer = 0;  // of which a dual PIM row buffer was open
};

struct DramEnergy {
  double activate_j = 0;
  double read_write_j = 0;
  double refresh_j = 0;
  double pim_j = 0;  // grouped activations, GWRITE, MAC steps, result reads
  double background_j = 0;

  double total_j() const { return activate_j + read_write_j + refresh_j + pim_j + background_j; }
};

// Energies of single events, in picojoules.
struct DramEventEnergy {
  double act_pj, rd_pj, wr_pj, ref_pj;
  double pim_act_pj, gwrite_pj, pim_step_pj, pim_result_pj;
  double active_standby_pj_per_cycle, precharge_standby_pj_per_cycle, second_buffer_pj_per_cycle;
};

DramEventEnergy ComputeEventEnergy(const HbmSpec& spec);
DramEnergy ComputeDramEnergy(const HbmSpec& spec, const DramActivity& activity);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_DRAM_ENERGY_H_
