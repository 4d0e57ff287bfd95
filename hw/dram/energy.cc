#include "hw/dram/energy.h"

namespace neupims::hw {

DramEventEnergy ComputeEventEnergy(const HbmSpec& spec) {
  const HbmPower& p = spec.power;
  const HbmTiming& t = spec.timing;
  const double tck_ns = 1e3 / spec.frequency_mhz;
  const double io_pj = p.io_pj_per_bit * spec.org.burst_bytes * 8;
  DramEventEnergy e{};
  e.act_pj = p.vdd * (p.idd0_ma * t.tRC() - p.idd3n_ma * t.tRAS - p.idd2n_ma * t.tRP) * tck_ns;
  e.rd_pj = p.vdd * (p.idd4r_ma - p.idd3n_ma) * t.tBL * tck_ns + io_pj;
  e.wr_pj = p.vdd * (p.idd4w_ma - p.idd3n_ma) * t.tBL * tck_ns + io_pj;
  e.ref_pj = p.vdd * (p.idd5ab_ma - p.idd3n_ma) * t.tRFC * tck_ns;
  const PimSpec& pim = spec.pim;
  e.pim_act_pj = spec.org.banks_per_group * e.act_pj;
  e.gwrite_pj = e.act_pj + pim.gwrite_read_multiple * e.rd_pj;
  e.pim_step_pj = pim.dot_read_multiple * e.rd_pj;
  e.pim_result_pj = pim.rdresult_read_multiple * e.rd_pj;
  e.active_standby_pj_per_cycle = p.vdd * p.idd3n_ma * tck_ns;
  e.precharge_standby_pj_per_cycle = p.vdd * p.idd2n_ma * tck_ns;
  e.second_buffer_pj_per_cycle =
      pim.dual_buffer_background_fraction * p.vdd * (p.idd3n_ma - p.idd2n_ma) * tck_ns;
  return e;
}

DramEnergy ComputeDramEnergy(const HbmSpec& spec, const DramActivity& a) {
  const DramEventEnergy e = ComputeEventEnergy(spec);
  auto n = [&](CommandType t) { return static_cast<double>(a.commands[static_cast<int>(t)]); };
  constexpr double kJ = 1e-12;
  DramEnergy out;
  out.activate_j = n(CommandType::kAct) * e.act_pj * kJ;
  out.read_write_j = (n(CommandType::kRd) * e.rd_pj + n(CommandType::kWr) * e.wr_pj) * kJ;
  out.refresh_j = n(CommandType::kRef) * e.ref_pj * kJ;
  out.pim_j = (n(CommandType::kPimAct) * e.pim_act_pj + n(CommandType::kPimGwrite) * e.gwrite_pj +
               a.pim_column_steps * e.pim_step_pj + a.pim_results * e.pim_result_pj) *
              kJ;
  const double closed = a.rank_cycles_total - a.rank_cycles_row_open;
  out.background_j = (a.rank_cycles_row_open * e.active_standby_pj_per_cycle +
                      closed * e.precharge_standby_pj_per_cycle +
                      a.rank_cycles_second_buffer * e.second_buffer_pj_per_cycle) *
                     kJ;
  return out;
}

}  // namespace neupims::hw
