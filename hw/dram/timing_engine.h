// TimingEngine: applies a TimingTable to one channel.
//
// Role: answers "what is the earliest cycle this command may issue?" and records issued
// commands. It knows timing only; bank state (which row is open) belongs to the controller.
//
// Mechanism (after Ramulator 2 / DRAMsim3): every node of the channel tree (row buffer, bank,
// bank group, rank, channel) keeps, per command type, the earliest cycle at which that type may
// next issue there. Issuing a command raises those values on the nodes its rules reach, so a
// query is a max over the nodes the command targets. Window rules keep the last few weighted
// activation times per node; the data bus keeps a list of reserved burst slots.
//
// Contract: Issue() must be called in non-decreasing cycle order with cycle >= Earliest().
// Not thread-safe; one engine per channel.
#ifndef NEUPIMS_HW_DRAM_TIMING_ENGINE_H_
#define NEUPIMS_HW_DRAM_TIMING_ENGINE_H_

#include <array>
#include <cstdint>
#include <vector>

#include "hw/dram/command.h"
#include "hw/dram/hbm_spec.h"
#include "hw/dram/timing_table.h"

namespace neupims::hw {

class TimingEngine {
 public:
  TimingEngine(const HbmSpec& spec, const TimingTable& table);

  // Earliest cycle >= not_before at which `cmd` satisfies every rule and finds its data-bus slot.
  Cycles Earliest(const Command& cmd, Cycles not_before) const;

  // As Earliest(second), had `first` been issued at `first_cycle` (not recorded). Lets the
  // controller keep PIM commands strictly prioritised: a MEM command that would delay the next
  // PIM command is held back.
  Cycles EarliestIfIssued(const Command& second, Cycles not_before, const Command& first,
                          Cycles first_cycle) const;
  // The same from second_earliest = Earliest(second, not_before), for a caller that asks about
  // several `first` commands before the same `second` (the MEM policy, once per candidate).
  Cycles EarliestIfIssuedFrom(Cycles second_earliest, const Command& second, const Command& first,
                              Cycles first_cycle) const;

  // Earliest in two parts, for a caller that asks about the same command at several cycles
  // while nothing issues: Earliest(cmd, t) == EarliestAbove(cmd, t, RuleBound(cmd)), and
  // RuleBound (every timing rule and the activation window; not the data bus) changes only when
  // a command issues (issued() counts them).
  Cycles RuleBound(const Command& cmd) const;
  Cycles EarliestAbove(const Command& cmd, Cycles not_before, Cycles bound) const;
  uint64_t issued() const { return issued_; }

  void Issue(const Command& cmd, Cycles cycle);

  int row_buffers_per_bank() const { return row_buffers_; }

 private:
  struct Target {
    int bank_begin = 0, bank_end = 0;  // flat bank ids [begin, end)
    uint8_t rb_mask = 0;               // bit i: row buffer i of each bank
  };
  struct CompiledRule {
    Scope scope;
    CommandMask to;
    int latency;
    bool siblings_only;
    bool from_last_column;
    int window;
  };
  using ReadyRow = std::array<Cycles, kNumCommandTypes>;

  Target TargetOf(const Command& cmd) const;
  // Calls f(node_index) for every node at `scope` that `target` touches (or, with siblings, the
  // nodes at `scope` it does not touch).
  template <typename F>
  void ForEachNode(Scope scope, const Target& target, bool siblings, F&& f) const;
  // True if `tg` is one bank and at most one of its row buffers: then it touches one node of
  // each scope (none of the row-buffer scope when the mask is empty).
  bool SingleNodeTarget(const Target& tg) const {
    return tg.bank_end == tg.bank_begin + 1 && (tg.rb_mask & (tg.rb_mask - 1)) == 0 &&
           tg.rb_mask < (1u << row_buffers_);
  }
  // Earliest's rule part for such a target: t raised by each of its nodes' ready and floor
  // values, as the general walk over ForEachNode would (a maximum, in any order).
  Cycles SingleBankEarliest(int type, const Target& tg, Cycles t) const;
  Cycles WindowEarliest(int node, int weight, Cycles not_before) const;
  Cycles DataBusEarliest(Cycles not_before, Cycles offset, Cycles extra_slot) const;

  // True if `tg` covers every node of `scope` (for the row-buffer scope: every bank, for each
  // row-buffer kind in its mask).
  bool CoversAll(const Target& tg) const { return tg.bank_begin == 0 && tg.bank_end == banks_; }
  int KindOf(Scope scope, int node) const {
    return scope == Scope::kRowBuffer ? node % row_buffers_ : 0;
  }

  const HbmSpec spec_;
  int row_buffers_;
  int banks_;
  std::array<std::vector<ReadyRow>, kNumScopes> ready_;
  // Aggregates that make channel-wide (all-bank) PIM commands O(1) per rule:
  // floor_ holds a bound that applies to every node of a scope (written by all-bank commands),
  // ceil_ the maximum over the scope's nodes (read by all-bank commands). Indexed
  // [scope][row-buffer kind] (kind is 0 outside the row-buffer scope).
  std::array<std::array<ReadyRow, 2>, kNumScopes> floor_{};
  std::array<std::array<ReadyRow, 2>, kNumScopes> ceil_{};
  std::array<std::vector<CompiledRule>, kNumCommandTypes> rules_from_;
  std::array<uint32_t, kNumCommandTypes> scopes_into_{};  // bit per scope with rules into type
  // tFAW-style windows: per rank, the issue cycles of the most recent activations (one entry per
  // unit of weight), newest at the back; at most `window_size_` entries.
  CompiledRule window_rule_{};
  bool has_window_ = false;
  CommandMask window_mask_ = 0;
  // A fixed ring per rank: the window never needs more than `window` entries.
  struct WindowRing {
    std::array<Cycles, 16> at{};
    int size = 0;
    int head = 0;                                            // index of the oldest entry
    Cycles Get(int i) const { return at[(head + i) & 15]; }  // i-th oldest
    void Push(Cycles c, int cap) {
      if (size == cap) {
        head = (head + 1) & 15;
        --size;
      }
      at[(head + size) & 15] = c;
      ++size;
    }
  };
  std::vector<WindowRing> window_history_;
  // Reserved data-bus burst start cycles, ascending; pruned as time advances. A few at a time:
  // a vector (contiguous to walk; inserts near the back, erases a prefix).
  std::vector<Cycles> bus_slots_;
  Cycles last_issue_ = 0;
  uint64_t issued_ = 0;
};

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_DRAM_TIMING_ENGINE_H_
