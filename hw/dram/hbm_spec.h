// HBM2 (+ PIM) device parameters as typed data.
//
// Role: the single description of one HBM-PIM channel's organisation, timing, PIM datapath and
// energy, parsed strictly from the "hbm" and "pim" objects of a device config
// (configs/devices/*.json). Every number the DRAM/PIM models use comes from here.
//
// Organisation (NeuPIMs Table 2: 32 channels, 32 banks/channel, 4 banks/bank group, 1 KB page,
// 1 GHz). 32 banks per channel are two 16-bank dies (stack IDs, "ranks" below) of 4 bank groups
// x 4 banks each, as in an 8-high HBM2 stack and in the NeuPIMs reference configuration:
//
//   channel
//   +-- rank 0 (die / SID 0): bg0[b0 b1 b2 b3] bg1[..] bg2[..] bg3[..]   tFAW, tRRD_S, REF per rank
//   +-- rank 1 (die / SID 1): bg0[b0 b1 b2 b3] bg1[..] bg2[..] bg3[..]
//   each bank: rows x 1 KB page; MEM row buffer (+ PIM row buffer in dual mode)
//
// Bank ids are flat within a channel: bank = (rank * bank_groups + bg) * banks_per_group + b.
#ifndef NEUPIMS_HW_DRAM_HBM_SPEC_H_
#define NEUPIMS_HW_DRAM_HBM_SPEC_H_

#include <cstdint>
#include <string>

#include "common/config_reader.h"
#include "common/enum_names.h"
#include "common/units.h"

namespace neupims::hw {

struct HbmOrganization {
  int channels = 32;
  int ranks = 2;        // dies (stack IDs) sharing one channel's buses
  int bank_groups = 4;  // per rank
  int banks_per_group = 4;
  int64_t rows = 32768;   // per bank
  int page_bytes = 1024;  // row (page) size per bank
  int burst_bytes = 64;   // bytes moved by one RD/WR burst on the channel data bus

  int banks_per_rank() const { return bank_groups * banks_per_group; }
  int banks_per_channel() const { return ranks * banks_per_rank(); }
  int bank_groups_per_channel() const { return ranks * bank_groups; }
  int bursts_per_row() const { return page_bytes / burst_bytes; }
  int64_t channel_capacity_bytes() const {
    return static_cast<int64_t>(banks_per_channel()) * rows * page_bytes;
  }
};

// All values in HBM clock cycles (the "_cycles" object in the config).
struct HbmTiming {
  int CL = 14;       // read latency: RD command to first data
  int CWL = 4;       // write latency
  int tBL = 2;       // data-bus cycles per burst (BL4, double data rate)
  int tRCD = 14;     // ACT -> RD/WR (and PIM column ops)
  int tRP = 14;      // PRE -> ACT
  int tRAS = 34;     // ACT -> PRE
  int tRRD_S = 4;    // ACT -> ACT, same rank, different bank group
  int tRRD_L = 6;    // ACT -> ACT, same bank group
  int tWTR_S = 6;    // end of write data -> RD, different bank group
  int tWTR_L = 8;    // end of write data -> RD, same bank group
  int tRTP = 5;      // RD -> PRE
  int tWR = 16;      // end of write data -> PRE
  int tCCD_S = 1;    // column -> column, different bank group
  int tCCD_L = 2;    // column -> column, same bank group
  int tFAW = 30;     // at most four activations per rank in any tFAW window
  int tRTRS = 2;     // data-bus turnaround between ranks / directions
  int tREFI = 3900;  // average refresh interval per rank
  int tRFC = 260;    // refresh cycle time

  int tRC() const { return tRAS + tRP; }
};

// Micron-style current/voltage parameters (DRAMsim3's power model), per channel.
struct HbmPower {
  double vdd = 1.2;          // V
  double idd0_ma = 65;       // one-bank ACT-PRE cycling current
  double idd2n_ma = 40;      // precharge standby
  double idd3n_ma = 55;      // active standby
  double idd4r_ma = 390;     // burst read
  double idd4w_ma = 500;     // burst write
  double idd5ab_ma = 250;    // all-bank refresh
  double io_pj_per_bit = 0;  // interface energy per transferred bit (data bus)
};

enum class RowBufferMode { kSingle, kDual };
enum class PimCommandSet { kNewton, kNeuPims };
enum class RefreshPolicy { kAllRanks, kRankStaggered };

// Who hands PIM instructions to the channel controllers and how fast (docs/hw.md, "PIM
// instruction issue"). An instruction is one row open per tile, one result per dot product, one
// vector load, and under the Newton command set one instruction per PIM_DOTPRODUCT
// (PimInstructions in hw/pim/issue_limit.h).
//   kUnlimited - each controller expands its whole program at once (the default: a controller's
//                command queue is filled over the on-chip network far faster than the channel
//                drains it, NeuPIMs sec. 5).
//   kChannel   - each channel receives at most `instructions_per_ns`.
//   kChip      - one queue for the chip, ordered by channel, issuing `instructions_per_ns`: the
//                reference simulator's NPU+PIM baseline (one instruction per NPU cycle), where
//                channel c starts only after every instruction of the lower channels is issued.
enum class PimIssueScope { kUnlimited, kChannel, kChip };
struct PimIssue {
  PimIssueScope scope = PimIssueScope::kUnlimited;
  double instructions_per_ns = 1.0;  // ignored when kUnlimited
};

// How PIM commands occupy a channel (docs/hw.md, "PIM DRAM-timing switches"). The defaults are
// the command-level controller's physics; the alternatives are the reference NeuPIMs
// simulator's (NewtonSim/DRAMsim3) modelling choices, read from its source (issue 14).
//   row_close: kAllBankPrecharge - a tile's rows close with one PIM_PRECHARGE to every bank and
//                the next activations wait tRP; a block's PIM_HEADER rides the row bus meanwhile.
//              kPerBankPrecharge - one PRE per open bank, one per row-bus cycle, then the
//                PIM_HEADER, then the grouped activations: 5 + 32 + 1 + 91 + 14 = 143 cycles
//                from the last read to the next dot product with 8 groups (tRP is hidden).
//   gemv:      kColumnSteps - a PIM_GEMV of s column steps holds its row until its last step
//                (+ tRTP); the next GEMV follows the last step.
//              kFusedCommand - one command occupying the channel tCCD_L * (max(s, 6) + 1)
//                cycles. NeuPIMs command set only. With `gemv_releases_row` it does not hold
//                its row: the precharge may issue tRTP after the GEMV issues (the result
//                returns later), the reference's choice; without, after its last step.
//   gwrite:    kOverlapped - PIM_GWRITE is a PIM command reading the page through the PIM
//                datapath while the tile's activations proceed.
//              kOrdinaryAccess - an ordinary access moving the page in `gwrite_access_bytes`
//                pieces, each a read and a write (tCCD_S + tCCD_L), before the tile's
//                activations; with one row buffer it first precharges the PIM row of bank 0
//                and activates row 0 (tRP + tRCD): 96 vs 124 cycles for 1 KiB in 32 B pieces.
//   refresh_guard: kRefreshEarly - a tile never straddles a refresh: the controller refreshes
//                early, so a refresh event costs PIM work tRFC.
//              kWaitForRefresh - refreshes stay on their schedule and a tile that cannot end
//                before the next one is not started: the channel idles until it is done.
enum class PimRowClose { kAllBankPrecharge, kPerBankPrecharge };
enum class PimGemvTiming { kColumnSteps, kFusedCommand };
enum class PimGwriteTiming { kOverlapped, kOrdinaryAccess };
enum class PimRefreshGuard { kRefreshEarly, kWaitForRefresh };
struct PimTiming {
  PimRowClose row_close = PimRowClose::kAllBankPrecharge;
  PimGemvTiming gemv = PimGemvTiming::kColumnSteps;
  bool gemv_releases_row = false;  // kFusedCommand only
  PimGwriteTiming gwrite = PimGwriteTiming::kOverlapped;
  int gwrite_access_bytes = 32;  // kOrdinaryAccess only
  PimRefreshGuard refresh_guard = PimRefreshGuard::kRefreshEarly;

  bool IsDefault() const;  // every field as the command-level controller models it
};

// The processing-in-memory datapath added to every bank (Newton-style: a MAC per bank reading its
// row buffer, a global vector buffer shared by the channel's banks).
struct PimSpec {
  bool enabled = true;
  RowBufferMode row_buffers = RowBufferMode::kDual;
  PimCommandSet command_set = PimCommandSet::kNeuPims;
  int mac_lanes_per_bank = 16;     // FP16 multipliers per bank: one column step reads 16 elements
  int element_bytes = 2;           // FP16
  int global_buffer_bytes = 1024;  // vector operand buffer, one page
  // Energy of PIM commands as multiples of a normal command (the NeuPIMs paper assumes an
  // all-bank compute command costs 4x a read [Newton]).
  double dot_read_multiple = 4.0;       // PIM_DOTPRODUCT / each PIM_GEMV column step
  double gwrite_read_multiple = 16.0;   // PIM_GWRITE streams a whole page
  double rdresult_read_multiple = 1.0;  // PIM_RDRESULT / each PIM_GEMV result burst
  // Extra background power of a bank holding a row open in its second (PIM) row buffer, as a
  // fraction of (IDD3N - IDD2N): the cost of the additional row buffer (NeuPIMs sec. 8.2).
  double dual_buffer_background_fraction = 1.0;
  PimIssue issue;
  PimTiming timing;

  int elements_per_column_step() const { return mac_lanes_per_bank; }
};

struct HbmSpec {
  HbmOrganization org;
  HbmTiming timing;
  HbmPower power;
  double frequency_mhz = 1000;
  RefreshPolicy refresh = RefreshPolicy::kAllRanks;
  PimSpec pim;

  Clock clock() const { return Clock{frequency_mhz}; }
  // Peak data-bus bandwidth of one channel, bytes per HBM cycle.
  double peak_bytes_per_cycle() const { return static_cast<double>(org.burst_bytes) / timing.tBL; }
};

// Parses the "hbm" object (organisation, timing, power, refresh) and the "pim" object.
// `pim` may be a missing object view for a PIM-less device (then pim.enabled = false).
void ParseHbmSpec(ConfigObject hbm, HbmSpec* out);
void ParsePimSpec(ConfigObject pim, PimSpec* out);

// Cross-field validation (page a multiple of the burst, lanes dividing the page, ...).
absl::Status ValidateHbmSpec(const HbmSpec& spec);

const char* ToString(RowBufferMode m);
const char* ToString(PimCommandSet s);
const EnumNames<PimIssueScope>& PimIssueScopeNames();  // "unlimited", "channel", "chip"
const EnumNames<PimRowClose>& PimRowCloseNames();      // "all_bank_precharge", "per_bank_precharge"
const EnumNames<PimGemvTiming>& PimGemvTimingNames();  // "column_steps", "fused_command"
const EnumNames<PimGwriteTiming>& PimGwriteTimingNames();  // "overlapped", "ordinary_access"
const EnumNames<PimRefreshGuard>& PimRefreshGuardNames();  // "refresh_early", "wait_for_refresh"

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_DRAM_HBM_SPEC_H_
