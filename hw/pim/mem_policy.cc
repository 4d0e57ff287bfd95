#include "hw/pim/mem_policy.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace neupims::hw {
namespace {

// FR-FCFS order: a row hit before anything else, then the oldest.
bool ServedBefore(const MemCandidate& a, const MemCandidate& b) {
  if (a.row_hit != b.row_hit) return a.row_hit;
  return a.queue_index < b.queue_index;
}

class FrFcfsPolicy final : public MemSchedulingPolicy {
 public:
  FrFcfsPolicy(MemPolicyOptions options, const TimingEngine& engine, int banks)
      : options_(options), engine_(engine), close_wanted_(banks, false) {}

  bool AnyRowToClose() const override { return close_wanted_count_ > 0; }

  bool CloseNow(int bank, bool row_open, bool hits_queued) override {
    if (!close_wanted_[bank]) return false;
    if (row_open && !hits_queued) return true;
    Unmark(bank);
    return false;
  }

  MemPick Pick(std::span<const MemCandidate> candidates, Cycles now,
               const PimOutlook& pim) const override {
    MemPick pick;
    const MemCandidate* best = nullptr;
    // Earliest(*pim.next, now), the same for every candidate: computed at most once.
    std::optional<Cycles> pim_next_now;
    for (const MemCandidate& c : candidates) {
      // Once a candidate can issue, next_ready no longer matters and one that is not served
      // before it cannot win (ServedBefore is a strict weak order): its PIM check is skipped.
      if (best != nullptr && !ServedBefore(c, *best)) continue;
      if (c.cmd.type == CommandType::kAct && OwesPimActivations(pim, c.cmd.rank)) {
        pick.next_ready = std::min(pick.next_ready, pim.next_earliest);
        continue;
      }
      const Cycles ready = ReadyCycle(c, now, pim, &pim_next_now);
      pick.next_ready = std::min(pick.next_ready, ready);
      if (ready > now) continue;
      if (best == nullptr || ServedBefore(c, *best)) best = &c;
    }
    if (best != nullptr) pick.issue = *best;
    return pick;
  }

  void OnServed(int bank) override {
    if (options_.row_policy != RowPolicy::kClosed || close_wanted_[bank]) return;
    close_wanted_[bank] = true;
    ++close_wanted_count_;
  }

  void OnPrecharge(int bank) override { Unmark(bank); }

 private:
  // When `c` may issue under PIM protection: a command ready now that would push the PIM's
  // next command later waits until that command has issued.
  // `pim_next_now` caches Earliest(*pim.next, now) across one Pick's candidates.
  Cycles ReadyCycle(const MemCandidate& c, Cycles now, const PimOutlook& pim,
                    std::optional<Cycles>* pim_next_now) const {
    if (c.earliest > now || !options_.protect_pim || !pim.next.has_value() ||
        pim.next_earliest <= now) {
      return c.earliest;
    }
    if (!pim_next_now->has_value()) *pim_next_now = engine_.Earliest(*pim.next, now);
    const bool delays =
        engine_.EarliestIfIssuedFrom(**pim_next_now, *pim.next, c.cmd, now) > pim.next_earliest;
    return delays ? pim.next_earliest : c.earliest;
  }

  void Unmark(int bank) {
    if (!close_wanted_[bank]) return;
    close_wanted_[bank] = false;
    --close_wanted_count_;
  }

  MemPolicyOptions options_;
  const TimingEngine& engine_;
  std::vector<bool> close_wanted_;  // per bank: precharge once its last queued hit is served
  int close_wanted_count_ = 0;
};

}  // namespace

std::unique_ptr<MemSchedulingPolicy> CreateFrFcfsPolicy(MemPolicyOptions options,
                                                        const TimingEngine& engine, int banks) {
  return std::make_unique<FrFcfsPolicy>(options, engine, banks);
}

}  // namespace neupims::hw
