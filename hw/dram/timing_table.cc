#include "hw/dram/timing_table.h"

#include <algorithm>

namespace neupims::hw {

const char* ScopeName(Scope s) {
  switch (s) {
    case Scope::kRowBuffer:
      return "row_buffer";
    case Scope::kBank:
      return "bank";
    case Scope::kBankGroup:
      return "bank_group";
    case Scope::kRank:
      return "rank";
    case Scope::kChannel:
      return "channel";
  }
  return "?";
}

Cycles LastColumnOffset(const Command& cmd, const HbmTiming& t) {
  if (cmd.type == CommandType::kPimGemv && cmd.steps > 1) {
    return static_cast<Cycles>(cmd.steps - 1) * t.tCCD_L;
  }
  return 0;
}

int ActivationWeight(CommandType type, const HbmOrganization& org) {
  switch (type) {
    case CommandType::kAct:
    case CommandType::kPimGwrite:
      return 1;
    case CommandType::kPimAct:
      return org.banks_per_group;
    default:
      return 0;
  }
}

std::optional<Cycles> DataBusOffset(const Command& cmd, const HbmTiming& t) {
  switch (cmd.type) {
    case CommandType::kRd:
    case CommandType::kPimRdResult:
      return t.CL;
    case CommandType::kWr:
      return t.CWL;
    case CommandType::kPimGemv:
      return LastColumnOffset(cmd, t) + t.CL;
    default:
      return std::nullopt;
  }
}

Cycles GwriteBufferReadyCycles(const HbmSpec& spec) {
  return spec.timing.tRCD + static_cast<Cycles>(spec.org.bursts_per_row()) * spec.timing.tCCD_L;
}

Cycles GwriteBankBusyCycles(const HbmSpec& spec) {
  const HbmTiming& t = spec.timing;
  const Cycles last_column = t.tRCD + static_cast<Cycles>(spec.org.bursts_per_row() - 1) * t.tCCD_L;
  return std::max<Cycles>(t.tRAS, last_column + t.tRTP) + t.tRP;
}

TimingTable BuildTimingTable(const HbmSpec& spec) {
  const HbmTiming& t = spec.timing;
  using CT = CommandType;
  const CommandMask act_pimact = Bit(CT::kAct) | Bit(CT::kPimAct);
  const CommandMask rdwr = Bit(CT::kRd) | Bit(CT::kWr);
  const CommandMask read_like = Bit(CT::kRd) | Bit(CT::kPimRdResult);
  const CommandMask gwrite = Bit(CT::kPimGwrite);
  const CommandMask gemv = Bit(CT::kPimGemv);
  const int write_to_pre = t.CWL + t.tBL + t.tWR;
  const int gwrite_busy = static_cast<int>(GwriteBankBusyCycles(spec));
  const int gb_ready = static_cast<int>(GwriteBufferReadyCycles(spec));
  const int gb_write = spec.org.bursts_per_row() * t.tCCD_L;

  TimingTable table;
  auto add = [&](TimingRule r) { table.rules.push_back(std::move(r)); };
  using S = Scope;
  // --- one row buffer: the bank's activate / access / precharge cycle -------------------------
  add({"tRCD", S::kRowBuffer, act_pimact,
       Bit(CT::kRd) | Bit(CT::kWr) | Bit(CT::kPimDot) | Bit(CT::kPimGemv), t.tRCD});
  add({"tRAS", S::kRowBuffer, act_pimact, kPrechargeClass, t.tRAS});
  add({"tRC", S::kRowBuffer, act_pimact, kActivateClass, t.tRC()});
  add({"tRP", S::kRowBuffer, kPrechargeClass, kActivateClass | Bit(CT::kRef), t.tRP});
  add({"tRTP", S::kRowBuffer, Bit(CT::kRd) | Bit(CT::kPimDot) | Bit(CT::kPimRdResult),
       kPrechargeClass, t.tRTP});
  add({"tRTP", S::kRowBuffer, gemv, kPrechargeClass, t.tRTP, false, /*from_last_column=*/true});
  add({"tWR", S::kRowBuffer, Bit(CT::kWr), kPrechargeClass, write_to_pre});
  // PIM_GWRITE activates its source row, streams the page and precharges by itself.
  add({"tGWRITE", S::kRowBuffer, gwrite, kActivateClass | kPrechargeClass | Bit(CT::kRef),
       gwrite_busy});
  // --- bank group: shared I/O and local activation power ---------------------------------------
  add({"tRRD_L", S::kBankGroup, kActivateClass, kActivateClass, t.tRRD_L});
  add({"tCCD_L", S::kBankGroup, rdwr, rdwr, t.tCCD_L});
  add({"tWTR_L", S::kBankGroup, Bit(CT::kWr), Bit(CT::kRd), t.CWL + t.tBL + t.tWTR_L});
  add({"tCCD_L", S::kBankGroup, Bit(CT::kPimDot) | Bit(CT::kPimRdResult), kPimColumnClass,
       t.tCCD_L});
  add({"tCCD_L", S::kBankGroup, gemv, kPimColumnClass, t.tCCD_L, false, true});
  // --- rank (one die): activation power and refresh ---------------------------------------------
  add({"tRRD_S", S::kRank, kActivateClass, kActivateClass, t.tRRD_S});
  add({"tFAW", S::kRank, kActivateClass, kActivateClass, t.tFAW, false, false, /*window=*/4});
  add({"tWTR_S", S::kRank, Bit(CT::kWr), Bit(CT::kRd), t.CWL + t.tBL + t.tWTR_S});
  add({"tRFC", S::kRank, Bit(CT::kRef), kActivateClass | Bit(CT::kRef), t.tRFC});
  add({"tRTRS", S::kRank, read_like, read_like, t.tBL + t.tRTRS, /*siblings_only=*/true});
  // --- channel: command buses, data-bus direction, global buffer --------------------------------
  add({"tCCD_S", S::kChannel, rdwr, rdwr, t.tCCD_S});
  add({"tRTW", S::kChannel, read_like, Bit(CT::kWr), t.CL + t.tBL + t.tRTRS - t.CWL});
  add({"tRTW", S::kChannel, gemv, Bit(CT::kWr), t.CL + t.tBL + t.tRTRS - t.CWL, false, true});
  add({"row_bus", S::kChannel, kRowBusClass, kRowBusClass, 1});
  add({"column_bus", S::kChannel, kColumnBusClass, kColumnBusClass, 1});
  add({"tGB_LOAD", S::kChannel, gwrite, kPimColumnClass, gb_ready});
  add({"tGB_LOAD", S::kChannel, gwrite, gwrite, gb_write});
  add({"tGB_READ", S::kChannel, Bit(CT::kPimDot) | Bit(CT::kPimRdResult), gwrite, t.tCCD_L});
  add({"tGB_READ", S::kChannel, gemv, gwrite, t.tCCD_L, false, true});
  return table;
}

}  // namespace neupims::hw
