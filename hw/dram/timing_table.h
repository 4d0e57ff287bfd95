// The HBM2 + PIM timing rules as one table (in the spirit of Ramulator 2's constraint tables).
//
// Every inter-command constraint of the channel is a row of this table:
//   "after a command in `from` is issued to some node at `scope`, a command in `to` that
//    targets the same node may not issue until `latency_cycles` later".
// Window rules (tFAW) instead bound how many weighted activations may fall in a sliding window.
// One generic mechanism (TimingEngine) applies the table; an independent TimingChecker re-derives
// every rule from the raw parameters to validate traces. The data bus is not in the table: it is
// a reservation timeline (a PIM_GEMV returns its result many cycles after issue, so pairwise
// "next command no earlier than" rules would over-constrain reads issued in between).
#ifndef NEUPIMS_HW_DRAM_TIMING_TABLE_H_
#define NEUPIMS_HW_DRAM_TIMING_TABLE_H_

#include <optional>
#include <string>
#include <vector>

#include "hw/dram/command.h"
#include "hw/dram/hbm_spec.h"

namespace neupims::hw {

// Granularity at which a rule links two commands (finest first).
enum class Scope : uint8_t { kRowBuffer, kBank, kBankGroup, kRank, kChannel };
inline constexpr int kNumScopes = 5;
const char* ScopeName(Scope s);

struct TimingRule {
  std::string name;  // the timing parameter (or derived expression) the rule enforces
  Scope scope = Scope::kChannel;
  CommandMask from = 0;
  CommandMask to = 0;
  int latency_cycles = 0;
  // Applies only to the *other* nodes at `scope` (e.g. a read from another rank).
  bool siblings_only = false;
  // Measured from the command's last column step instead of its issue (composite PIM_GEMV).
  bool from_last_column = false;
  // > 0: window rule. At most `window` weighted activations in any `latency_cycles` window.
  int window = 0;
};

struct TimingTable {
  std::vector<TimingRule> rules;
};

// Builds the rule table from the spec's timing parameters (both row-buffer modes use the same
// table; what differs is which row buffer a command targets).
TimingTable BuildTimingTable(const HbmSpec& spec);

// Cycles from a command's issue to its last column step (PIM_GEMV: (k-1) * tCCD_L; else 0).
Cycles LastColumnOffset(const Command& cmd, const HbmTiming& t);

// Weight of a command in the tFAW window: a grouped PIM activation opens a whole bank group.
int ActivationWeight(CommandType type, const HbmOrganization& org);

// Cycles from issue to the start of the command's burst on the channel data bus, if it moves
// data over it (RD, WR, PIM_RDRESULT, PIM_GEMV's result). Each burst occupies tBL cycles.
std::optional<Cycles> DataBusOffset(const Command& cmd, const HbmTiming& t);

// PIM_GWRITE internals, derived from the timing parameters: the page streams into the global
// buffer at one burst per tCCD_L after tRCD, then the source row self-precharges.
Cycles GwriteBufferReadyCycles(const HbmSpec& spec);  // issue -> global buffer usable
Cycles GwriteBankBusyCycles(const HbmSpec& spec);     // issue -> bank may activate again

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_DRAM_TIMING_TABLE_H_
