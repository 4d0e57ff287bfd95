// MemSchedulingPolicy: which MEM command (the NPU's reads and writes) a PIM channel's controller
// issues next.
//
// The controller (channel_controller.h) owns the queues, the row-buffer state and the timing
// engine; the policy only decides. As in Ramulator 2, whose controller delegates to a scheduler
// plugin (ranks requests) and a row-policy plugin (closes rows), the decision has three parts:
//  - Request order, FR-FCFS: among the candidates ready now, row hits before anything else,
//    then the oldest (lowest MEM queue position).
//  - Row policy: open page keeps a row open until another row of the bank is wanted; closed
//    page precharges a bank as soon as no queued request hits its open row any more.
//  - PIM protection (NeuPIMs sec. 5.3, PIM priority): a MEM command that would delay the PIM
//    queue's next command if issued now waits until that command has gone (ControllerOptions::
//    protect_pim), and a rank that still owes the running PIM tile grouped activations takes no
//    MEM activation, which would use up the tFAW window the PIM needs (always on).
//
// Contract, per decision: the controller offers the row policy's precharges first (the banks
// for which CloseNow() is true), then at most one candidate per bank (FR-FCFS only ever issues
// a bank's oldest request or its oldest row hit, so the rest of the queue cannot win), with the
// earliest cycle the timing engine allows; Pick() returns the candidate to issue at `now`, or
// the earliest cycle at which one may become ready. Among equals the first offered wins. The
// controller reports every served request and every precharge (OnServed / OnPrecharge).
// Not thread-safe: one policy per controller.
#ifndef NEUPIMS_HW_PIM_MEM_POLICY_H_
#define NEUPIMS_HW_PIM_MEM_POLICY_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>

#include "common/units.h"
#include "hw/dram/command.h"
#include "hw/dram/timing_engine.h"

namespace neupims::hw {

// "No cycle": a command or event that is not coming.
inline constexpr Cycles kNeverCycle = std::numeric_limits<Cycles>::max() / 4;

enum class RowPolicy { kOpen, kClosed };

// Queue position of a row-policy precharge: it ranks as older than every queued request.
inline constexpr int kRowPolicyQueueIndex = -1;

// A MEM command the controller could issue for one bank.
struct MemCandidate {
  Command cmd;                             // ACT, RD/WR, or PRE
  Cycles earliest = kNeverCycle;           // as the timing engine allows, before PIM protection
  bool row_hit = false;                    // a RD/WR to the bank's open row
  int queue_index = kRowPolicyQueueIndex;  // MEM queue position (age) of the request served
};

// What MEM scheduling must respect of the PIM side at this decision.
struct PimOutlook {
  std::optional<Command> next;           // the PIM queue's next command, if it has one
  Cycles next_earliest = kNeverCycle;    // when `next` may issue
  uint32_t ranks_owing_activations = 0;  // bit r: the running tile still activates in rank r
};

// True if an activation in `rank` must wait for the PIM's grouped activations there. The policy
// never reads the `earliest` of such a candidate, so the controller may leave it unset.
inline bool OwesPimActivations(const PimOutlook& pim, int rank) {
  return (pim.ranks_owing_activations >> rank) & 1u;
}

struct MemPick {
  std::optional<MemCandidate> issue;  // the candidate to issue now, if any is ready
  Cycles next_ready = kNeverCycle;    // else (no issue) the earliest cycle a candidate may be ready
};

class MemSchedulingPolicy {
 public:
  virtual ~MemSchedulingPolicy() = default;

  // Row policy. True while some bank waits to be closed (a cheap test for the hot loop).
  virtual bool AnyRowToClose() const = 0;
  // True if `bank` should be precharged now. A bank waiting to be closed stops waiting (false)
  // when a queued request still hits its open row, or when the row is closed already.
  virtual bool CloseNow(int bank, bool row_open, bool hits_queued) = 0;

  // Request order and PIM protection over the candidates, in the order offered.
  virtual MemPick Pick(std::span<const MemCandidate> candidates, Cycles now,
                       const PimOutlook& pim) const = 0;

  // A queued request's RD/WR issued to `bank`.
  virtual void OnServed(int bank) = 0;
  // A PRE issued to `bank`, by anyone (MEM, refresh drain, PIM).
  virtual void OnPrecharge(int bank) = 0;
};

struct MemPolicyOptions {
  RowPolicy row_policy = RowPolicy::kOpen;
  bool protect_pim = true;
};

// FR-FCFS with the given row policy and PIM protection. `engine` (outliving the policy) answers
// whether a MEM command would delay the PIM's; `banks` is the channel's bank count.
std::unique_ptr<MemSchedulingPolicy> CreateFrFcfsPolicy(MemPolicyOptions options,
                                                        const TimingEngine& engine, int banks);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_PIM_MEM_POLICY_H_
