// ChannelController: the command-level model of one HBM-PIM channel and its memory controller.
//
// Role: turns PIM jobs (GEMV programs) and MEM requests (the NPU's reads and writes) into a
// timed DRAM command stream, one command at a time, under every rule of the TimingTable.
//
// Policies (NeuPIMs sec. 5.3):
//  - Separate PIM and MEM queues. PIM commands issue strictly in program order and have
//    priority: a MEM command is held back if issuing it now would delay the next PIM command.
//  - Single row buffer ("blocked", the Newton baseline): while a PIM job is queued or running the
//    MEM queue waits; open MEM rows are precharged before the job starts.
//  - Dual row buffers (NeuPIMs): MEM commands use the MEM row buffer and proceed while the PIM
//    computes; a row is never open in both buffers of a bank at once.
//  - Refresh (RefreshManager): every rank is refreshed at least every tREFI. A PIM tile never
//    straddles a refresh: before starting one the controller checks that it ends before the next
//    refresh deadline, else refreshes early. With the NeuPIMs PIM_HEADER the controller knows the
//    exact tile length; with the Newton command set it must assume the worst-case tile.
//  - MEM scheduling: FR-FCFS (row hits first, then oldest) with an open- or closed-page policy
//    and the PIM protection above, decided by a MemSchedulingPolicy (mem_policy.h).
//
// Time advances event to event (to the earliest cycle any pending command may issue), not
// cycle by cycle. Contract: single-threaded; Run() may be called repeatedly with growing limits.
#ifndef NEUPIMS_HW_PIM_CHANNEL_CONTROLLER_H_
#define NEUPIMS_HW_PIM_CHANNEL_CONTROLLER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "hw/dram/command.h"
#include "hw/dram/hbm_spec.h"
#include "hw/dram/timing_engine.h"
#include "hw/pim/gemv_plan.h"
#include "hw/pim/mem_policy.h"
#include "hw/pim/tile_cost.h"

namespace neupims::hw {

struct MemRequest {
  int64_t id = 0;
  bool is_write = false;
  int rank = 0, bank_group = 0, bank = 0;
  int32_t row = 0;
  int16_t col = 0;
  Cycles arrival = 0;
};

// A source of MEM requests (the NPU's traffic), polled by the controller.
class MemTrafficSource {
 public:
  virtual ~MemTrafficSource() = default;
  // Cycle at which the next request is available; kNeverCycle when exhausted.
  virtual Cycles NextArrival() const = 0;
  virtual MemRequest Pop() = 0;
};

struct ControllerOptions {
  RowPolicy row_policy = RowPolicy::kOpen;
  int mem_queue_capacity = 128;  // as the command queue of the NeuPIMs HBM2 config
  // Cycles since the last refresh at cycle 0 (the refresh phase the run starts in).
  Cycles refresh_phase_cycles = 0;
  bool record_trace = false;
  // Hold back MEM commands that would delay the PIM queue's next command.
  bool protect_pim = true;
};

struct PimJobRecord {
  int64_t id = 0;
  Cycles submit = 0;
  Cycles start = 0;         // first command issued
  Cycles end = 0;           // PIM row buffers closed and ready for the next job
  Cycles result_ready = 0;  // last result burst off the data bus
};

struct ControllerStats {
  CommandCounts commands{};
  int64_t pim_column_steps = 0;  // MAC steps (PIM_DOTPRODUCT or PIM_GEMV steps)
  int64_t pim_results = 0;       // result bursts read back
  int64_t pim_tiles = 0;
  int64_t mem_reads = 0, mem_writes = 0;
  int64_t row_hits = 0, row_misses = 0, row_conflicts = 0;
  Cycles mem_latency_sum = 0;  // arrival -> data, summed over completed MEM requests
  int64_t refreshes = 0;
  int64_t refreshes_pulled_in = 0;
  Cycles max_refresh_lateness = 0;  // REF issue - deadline, when positive
  Cycles refresh_early_sum = 0;     // deadline - REF issue, summed over early refreshes
  // Background-energy inputs: rank-cycles with any MEM row open / any PIM row open.
  Cycles rank_cycles_mem_open = 0;
  Cycles rank_cycles_pim_open = 0;
  Cycles rank_cycles_total = 0;
};

// Keeps each rank's refresh deadline. A rank starts "draining" (no new MEM activations, open
// MEM rows are precharged) `drain_lead` cycles before its deadline, so the REF can issue on
// time even if a row was just opened: lead = max(tRAS, write recovery) + tRP + one row-bus slot
// per bank. It becomes "pending" (REF as soon as all its rows are closed; no new PIM tile) at
// the deadline, or earlier when the PIM side pulls the refresh in.
class RefreshManager {
 public:
  RefreshManager(const HbmSpec& spec, Cycles phase);
  bool Draining(int rank, Cycles now) const {
    return pending_[rank] || now >= deadline_[rank] - drain_lead_;
  }
  // Cheap test for the controller's hot loop: is any rank draining or pending at `now`?
  bool AnyDraining(Cycles now) const { return any_pending_ || now >= first_drain_; }
  // The next cycle at which some rank starts draining or becomes due (kNeverCycle if none).
  Cycles NextEvent(Cycles now) const;
  // Marks due ranks pending; true if any rank became pending.
  bool Update(Cycles now);
  // Marks pending every rank whose deadline falls before `until` (all ranks together under
  // the all-rank policy). Returns true if any rank became pending.
  bool PullIn(Cycles until);
  void OnRefresh(int rank, Cycles now);
  bool Pending(int rank) const { return pending_[rank]; }
  bool AnyPending() const;
  Cycles Deadline(int rank) const { return deadline_[rank]; }
  Cycles EarliestDeadline() const;

 private:
  void Refresh();  // recomputes the cached summaries below

  const HbmSpec& spec_;
  Cycles drain_lead_;
  std::vector<Cycles> deadline_;
  std::vector<bool> pending_;
  bool any_pending_ = false;
  Cycles first_deadline_ = 0;  // min over ranks
  Cycles first_drain_ = 0;     // min over ranks of deadline - drain_lead
};

class ChannelController {
 public:
  ChannelController(const HbmSpec& spec, ControllerOptions options);
  ~ChannelController();

  void SubmitPim(int64_t id, GemvProgram program);
  void SetTrafficSource(MemTrafficSource* source) { traffic_ = source; }

  // Runs until cycle `until`, or until no work is left (PIM and MEM queues empty and the
  // traffic source exhausted). Returns the cycle reached.
  Cycles Run(Cycles until = kNeverCycle);
  // Runs until every submitted PIM job has finished (MEM traffic keeps flowing meanwhile).
  Cycles RunUntilPimDone(Cycles limit = kNeverCycle);

  bool PimIdle() const;
  Cycles now() const { return now_; }
  const std::vector<PimJobRecord>& pim_jobs() const { return finished_jobs_; }
  const ControllerStats& stats();
  const std::vector<IssuedCommand>& trace() const { return trace_; }
  const HbmSpec& spec() const { return spec_; }

 private:
  class PimStream;
  struct BankRb {
    int32_t open_row = -1;
  };
  // Which queue a candidate command serves; kNone: nothing to issue (`earliest` may still say
  // when to look again).
  enum class CandidateSource { kNone, kRefresh, kPim, kMem };
  struct Candidate {
    Command cmd;
    Cycles earliest = kNeverCycle;
    CandidateSource source = CandidateSource::kNone;
    int mem_index = -1;  // kMem RD/WR: the MEM queue position of the request served
  };

  int FlatBank(int rank, int bg, int bank) const;
  BankRb& Rb(int flat_bank, int rb) { return rbs_[flat_bank * rb_count_ + rb]; }
  int PimRb() const { return rb_count_ == 2 ? 1 : 0; }
  bool Blocked() const { return spec_.pim.row_buffers == RowBufferMode::kSingle; }

  Cycles RunLoop(Cycles until, bool stop_on_pim_idle);
  void PullArrivals();
  Candidate RefreshCandidate();
  Candidate PimCandidate();
  Candidate MemSideCandidate(const Candidate& pim);
  void ScanMemQueue();
  void KeepScanAfterRowChange(const Command& cmd);
  void KeepScanAfterServe(int index, int bank);
  int NextOfBank(int bank, int from, bool hit) const;
  void OfferMemCandidates(const PimOutlook& pim);
  PimOutlook PimOutlookFor(const Candidate& pim) const;
  Cycles MemEarliest(int bank, const Command& cmd);
  Candidate PrechargeFor(int flat_bank, CandidateSource source);
  void IssueCommand(const Candidate& c);
  void UpdateBackground(Cycles t);
  void ApplyState(const Command& cmd);

  HbmSpec spec_;
  ControllerOptions options_;
  TimingTable table_;
  TimingEngine engine_;
  TileCostModel tile_cost_;
  RefreshManager refresh_;
  int rb_count_;
  std::vector<BankRb> rbs_;
  std::vector<int> open_mem_per_rank_, open_pim_per_rank_;
  Cycles now_ = 0;
  Cycles background_mark_ = 0;

  // PIM side.
  struct PendingJob {
    int64_t id;
    GemvProgram program;
    Cycles submit;
  };
  std::deque<PendingJob> pim_queue_;
  std::unique_ptr<PimStream> active_;  // the running job's command stream
  PimJobRecord active_record_;
  std::vector<PimJobRecord> finished_jobs_;
  int64_t pim_row_cursor_ = 0;

  // MEM side.
  MemTrafficSource* traffic_ = nullptr;
  std::vector<MemRequest> mem_queue_;  // arrival order
  std::unique_ptr<MemSchedulingPolicy> mem_policy_;
  std::vector<MemCandidate> mem_candidates_;  // scratch: one decision's offers
  // The last scan of the MEM queue (valid when stamp == scan_stamp_), kept until a command
  // issues: it covers mem_queue_[0, scanned_).
  struct BankQueueInfo {
    uint64_t stamp = 0;
    int first = -1;      // oldest queued request for the bank
    int first_hit = -1;  // oldest queued request hitting the open row
  };
  std::vector<BankQueueInfo> bank_info_;
  std::vector<int> touched_banks_;
  // Per bank: the timing engine's rule bound for the bank's last MEM candidate (a command of
  // `type` to the bank), valid while the engine's issued() count is `issued`.
  struct BoundCache {
    uint64_t issued = ~uint64_t{0};
    CommandType type = CommandType::kAct;
    Cycles bound = 0;
  };
  std::vector<BoundCache> mem_bounds_;
  uint64_t scan_stamp_ = 1;
  size_t scanned_ = 0;

  ControllerStats stats_;
  std::vector<IssuedCommand> trace_;
  // The PIM candidate only changes when a command issues, a job arrives or a refresh changes
  // state; between those events the loop reuses it (it is the hot path of PIM-only runs).
  uint64_t state_version_ = 0;
  uint64_t pim_cached_version_ = ~uint64_t{0};
  Candidate pim_cached_;
};

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_PIM_CHANNEL_CONTROLLER_H_
