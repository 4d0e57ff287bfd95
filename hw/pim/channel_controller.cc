#include "hw/pim/channel_controller.h"

#include <algorithm>

#include "common/check.h"

namespace neupims::hw {

// ---------------------------------------------------------------------------------------------
// RefreshManager

RefreshManager::RefreshManager(const HbmSpec& spec, Cycles phase)
    : spec_(spec),
      drain_lead_(std::max(spec.timing.tRAS, spec.timing.CWL + spec.timing.tBL + spec.timing.tWR) +
                  spec.timing.tRP + spec.org.banks_per_channel()),
      deadline_(spec.org.ranks),
      pending_(spec.org.ranks, false) {
  const Cycles refi = spec.timing.tREFI;
  phase = ((phase % refi) + refi) % refi;
  for (int r = 0; r < spec.org.ranks; ++r) {
    Cycles offset = spec.refresh == RefreshPolicy::kRankStaggered ? r * refi / spec.org.ranks : 0;
    Cycles d = refi - phase + offset;
    if (d > refi) d -= refi;
    deadline_[r] = d;
  }
  Refresh();
}

void RefreshManager::Refresh() {
  any_pending_ = std::find(pending_.begin(), pending_.end(), true) != pending_.end();
  first_deadline_ = *std::min_element(deadline_.begin(), deadline_.end());
  first_drain_ = first_deadline_ - drain_lead_;
}

bool RefreshManager::Update(Cycles now) {
  if (now < first_deadline_) return false;
  bool any = false;
  for (size_t r = 0; r < deadline_.size(); ++r) {
    if (!pending_[r] && now >= deadline_[r]) {
      pending_[r] = true;
      any = true;
    }
  }
  if (any && spec_.refresh == RefreshPolicy::kAllRanks) {
    std::fill(pending_.begin(), pending_.end(), true);
  }
  Refresh();
  return any;
}

bool RefreshManager::PullIn(Cycles until) {
  bool any = false;
  for (size_t r = 0; r < deadline_.size(); ++r) {
    if (!pending_[r] && deadline_[r] < until) {
      pending_[r] = true;
      any = true;
    }
  }
  if (any && spec_.refresh == RefreshPolicy::kAllRanks) {
    std::fill(pending_.begin(), pending_.end(), true);
  }
  Refresh();
  return any;
}

void RefreshManager::OnRefresh(int rank, Cycles now) {
  pending_[rank] = false;
  deadline_[rank] = now + spec_.timing.tREFI;
  Refresh();
}

bool RefreshManager::AnyPending() const { return any_pending_; }

Cycles RefreshManager::NextEvent(Cycles now) const {
  Cycles next = kNeverCycle;
  for (size_t r = 0; r < deadline_.size(); ++r) {
    if (pending_[r]) continue;
    const Cycles drain = deadline_[r] - drain_lead_;
    next = std::min(next, drain > now ? drain : deadline_[r]);
  }
  return next;
}

Cycles RefreshManager::EarliestDeadline() const { return first_deadline_; }

// ---------------------------------------------------------------------------------------------
// PimStream: expands a GemvProgram into its command sequence, one command at a time.

class ChannelController::PimStream {
 public:
  PimStream(GemvProgram program, const HbmSpec& spec, int64_t* row_cursor)
      : program_(std::move(program)),
        spec_(spec),
        neupims_(spec.pim.command_set == PimCommandSet::kNeuPims),
        row_cursor_(row_cursor) {
    EnterBlock();
  }

  bool Done() const { return block_ >= program_.blocks.size(); }
  const Command& Peek() const { return cur_; }
  // The next command opens a new tile (tau): the refresh check happens here.
  bool AtGate() const { return gate_; }
  // The gate opens a block (PIM_HEADER / PIM_GWRITE) rather than a plain tile.
  bool GateIsBlockStart() const { return phase_ != Phase::kTile; }
  // The command whose issue starts the tile's clock (tau): a block's PIM_GWRITE (the header
  // before it only announces the GEMV), else the tile's first grouped activation.
  Command TauCommand() const {
    if (phase_ != Phase::kHeader) return cur_;
    Command g;
    g.type = CommandType::kPimGwrite;
    g.rank = static_cast<int8_t>(spec_.org.ranks - 1);
    g.bank_group = static_cast<int8_t>(spec_.org.bank_groups - 1);
    g.row = static_cast<int32_t>(spec_.org.rows - 1);
    return g;
  }
  // The tile the gate opens (for a block start: the block's first tile).
  const TileRun& Run() const { return Block().runs[run_]; }
  // Bit r set: rank r still owes grouped activations to the current (or next) tile. MEM
  // activations there would eat the tFAW window the PIM needs.
  uint32_t RanksAwaitingActivation() const {
    const int first = phase_ == Phase::kTile ? cmd_ : 0;
    uint32_t mask = 0;
    for (int i = first; i < Run().groups; ++i) mask |= 1u << (i % spec_.org.ranks);
    return mask;
  }

  void Advance() {
    switch (phase_) {
      case Phase::kHeader:
        phase_ = Phase::kGwrite;
        gate_ = false;
        Build();
        return;
      case Phase::kGwrite:
        StartTile(/*gate=*/false);
        return;
      case Phase::kTile:
        break;
    }
    if (++cmd_ < TileCommands()) {
      gate_ = false;
      Build();
      return;
    }
    if (++tile_ < Run().count) {
      StartTile(true);
      return;
    }
    tile_ = 0;
    ++run_;
    if (SkipEmptyRuns()) {
      StartTile(true);
      return;
    }
    if (++rep_ < Block().repeat) {
      StartRepeat();
      return;
    }
    ++block_;
    EnterBlock();
  }

 private:
  enum class Phase { kHeader, kGwrite, kTile };

  const GemvBlock& Block() const { return program_.blocks[block_]; }

  int TileCommands() const {
    const TileRun& r = Run();
    const int column_cmds = neupims_ ? r.dots : r.dots * (r.steps_per_dot + 1);
    return r.groups + column_cmds + 1;
  }

  // Moves run_ to the next run with tiles; false if none is left in this repeat.
  bool SkipEmptyRuns() {
    while (run_ < Block().runs.size() && Block().runs[run_].count <= 0) ++run_;
    return run_ < Block().runs.size();
  }

  void EnterBlock() {
    for (; block_ < program_.blocks.size(); ++block_) {
      run_ = 0;
      if (Block().repeat > 0 && SkipEmptyRuns()) break;
    }
    if (Done()) {
      gate_ = false;
      return;
    }
    rep_ = 0;
    StartRepeat();
  }

  void StartRepeat() {
    run_ = 0;
    tile_ = 0;
    SkipEmptyRuns();
    if (Block().load_vector) {
      phase_ = neupims_ ? Phase::kHeader : Phase::kGwrite;
      gate_ = true;
      Build();
    } else {
      StartTile(true);
    }
  }

  void StartTile(bool gate) {
    phase_ = Phase::kTile;
    cmd_ = 0;
    // KV rows live in the upper half of the bank; each tile opens a fresh row.
    const int64_t region = std::max<int64_t>(1, spec_.org.rows / 2 - 2);
    tile_row_ = static_cast<int32_t>(spec_.org.rows / 2 + (*row_cursor_)++ % region);
    gate_ = gate;
    Build();
  }

  void Build() {
    const HbmOrganization& o = spec_.org;
    cur_ = Command{};
    switch (phase_) {
      case Phase::kHeader: {
        int64_t tiles = 0;
        for (const auto& r : Block().runs) tiles += r.count;
        cur_.type = CommandType::kPimHeader;
        cur_.steps = static_cast<int32_t>(std::min<int64_t>(tiles, INT32_MAX));
        return;
      }
      case Phase::kGwrite:
        // The vector chunk is staged in a reserved row of the last rank's last bank group, the
        // group activated last, so its self-precharge overlaps the other activations.
        phase_ = Phase::kHeader;
        cur_ = TauCommand();
        phase_ = Phase::kGwrite;
        return;
      case Phase::kTile:
        break;
    }
    const TileRun& r = Run();
    if (cmd_ < r.groups) {
      cur_.type = CommandType::kPimAct;
      cur_.rank = static_cast<int8_t>(cmd_ % o.ranks);
      cur_.bank_group = static_cast<int8_t>(cmd_ / o.ranks);
      cur_.row = tile_row_;
      return;
    }
    const int j = cmd_ - r.groups;
    const int column_cmds = neupims_ ? r.dots : r.dots * (r.steps_per_dot + 1);
    if (j >= column_cmds) {
      cur_.type = CommandType::kPimPre;
    } else if (neupims_) {
      cur_.type = CommandType::kPimGemv;
      cur_.steps = r.steps_per_dot;
    } else {
      cur_.type = (j % (r.steps_per_dot + 1)) < r.steps_per_dot ? CommandType::kPimDot
                                                                : CommandType::kPimRdResult;
    }
  }

  GemvProgram program_;
  const HbmSpec& spec_;
  bool neupims_;
  int64_t* row_cursor_;
  size_t block_ = 0, run_ = 0;
  int64_t rep_ = 0, tile_ = 0;
  int cmd_ = 0;
  Phase phase_ = Phase::kTile;
  int32_t tile_row_ = 0;
  bool gate_ = false;
  Command cur_;
};

// ---------------------------------------------------------------------------------------------
// ChannelController

ChannelController::ChannelController(const HbmSpec& spec, ControllerOptions options)
    : spec_(spec),
      options_(options),
      table_(BuildTimingTable(spec_)),
      engine_(spec_, table_),
      tile_cost_(spec_),
      refresh_(spec_, options.refresh_phase_cycles),
      rb_count_(engine_.row_buffers_per_bank()),
      rbs_(static_cast<size_t>(spec_.org.banks_per_channel()) * rb_count_),
      open_mem_per_rank_(spec_.org.ranks, 0),
      open_pim_per_rank_(spec_.org.ranks, 0),
      mem_policy_(CreateFrFcfsPolicy({options.row_policy, options.protect_pim}, engine_,
                                     spec_.org.banks_per_channel())),
      bank_info_(spec_.org.banks_per_channel()),
      mem_bounds_(spec_.org.banks_per_channel()) {}

ChannelController::~ChannelController() = default;

int ChannelController::FlatBank(int rank, int bg, int bank) const {
  return (rank * spec_.org.bank_groups + bg) * spec_.org.banks_per_group + bank;
}

void ChannelController::SubmitPim(int64_t id, GemvProgram program) {
  ++state_version_;
  pim_queue_.push_back({id, std::move(program), now_});
}

bool ChannelController::PimIdle() const { return active_ == nullptr && pim_queue_.empty(); }

const ControllerStats& ChannelController::stats() {
  UpdateBackground(now_);
  return stats_;
}

void ChannelController::PullArrivals() {
  if (traffic_ == nullptr) return;
  while (static_cast<int>(mem_queue_.size()) < options_.mem_queue_capacity &&
         traffic_->NextArrival() <= now_) {
    mem_queue_.push_back(traffic_->Pop());
  }
}

void ChannelController::UpdateBackground(Cycles t) {
  if (t <= background_mark_) return;
  const Cycles dt = t - background_mark_;
  for (int r = 0; r < spec_.org.ranks; ++r) {
    stats_.rank_cycles_total += dt;
    if (open_mem_per_rank_[r] > 0 || open_pim_per_rank_[r] > 0) {
      stats_.rank_cycles_mem_open += dt;
    }
    if (rb_count_ == 2 && open_pim_per_rank_[r] > 0) stats_.rank_cycles_pim_open += dt;
  }
  background_mark_ = t;
}

void ChannelController::ApplyState(const Command& cmd) {
  UpdateBackground(now_);
  const HbmOrganization& o = spec_.org;
  auto set = [&](int bank, int rb, int32_t row) {
    BankRb& s = Rb(bank, rb);
    const int rank = bank / o.banks_per_rank();
    std::vector<int>& counts =
        (rb == 0 && rb_count_ == 2) || rb_count_ == 1 ? open_mem_per_rank_ : open_pim_per_rank_;
    if (s.open_row < 0 && row >= 0) ++counts[rank];
    if (s.open_row >= 0 && row < 0) --counts[rank];
    s.open_row = row;
  };
  switch (cmd.type) {
    case CommandType::kAct:
      set(FlatBank(cmd.rank, cmd.bank_group, cmd.bank), 0, cmd.row);
      break;
    case CommandType::kPre:
      set(FlatBank(cmd.rank, cmd.bank_group, cmd.bank), 0, -1);
      break;
    case CommandType::kPimAct: {
      const int first = FlatBank(cmd.rank, cmd.bank_group, 0);
      for (int b = 0; b < o.banks_per_group; ++b) set(first + b, PimRb(), cmd.row);
      break;
    }
    case CommandType::kPimPre:
      for (int b = 0; b < o.banks_per_channel(); ++b) set(b, PimRb(), -1);
      break;
    default:
      break;
  }
}

ChannelController::Candidate ChannelController::PrechargeFor(int flat_bank,
                                                             CandidateSource source) {
  const HbmOrganization& o = spec_.org;
  Candidate c;
  c.cmd.type = CommandType::kPre;
  c.cmd.rank = static_cast<int8_t>(flat_bank / o.banks_per_rank());
  c.cmd.bank_group = static_cast<int8_t>((flat_bank / o.banks_per_group) % o.bank_groups);
  c.cmd.bank = static_cast<int8_t>(flat_bank % o.banks_per_group);
  c.earliest = engine_.Earliest(c.cmd, now_);
  c.source = source;
  return c;
}

ChannelController::Candidate ChannelController::RefreshCandidate() {
  if (!refresh_.AnyDraining(now_)) return {};
  const HbmOrganization& o = spec_.org;
  for (int r = 0; r < o.ranks; ++r) {
    if (!refresh_.Draining(r, now_)) continue;
    const int b0 = r * o.banks_per_rank();
    // Close the MEM rows of a draining rank (in blocked mode a running PIM job owns them).
    if (!(Blocked() && active_ != nullptr)) {
      for (int b = b0; b < b0 + o.banks_per_rank(); ++b) {
        if (Rb(b, 0).open_row >= 0) return PrechargeFor(b, CandidateSource::kRefresh);
      }
    }
    if (!refresh_.Pending(r)) continue;
    bool any_open = false;
    for (int b = b0; b < b0 + o.banks_per_rank(); ++b) {
      for (int rb = 0; rb < rb_count_; ++rb) any_open = any_open || Rb(b, rb).open_row >= 0;
    }
    if (any_open) continue;  // a PIM tile in flight closes its rows with PIM_PRECHARGE
    Candidate c;
    c.cmd.type = CommandType::kRef;
    c.cmd.rank = static_cast<int8_t>(r);
    c.earliest = engine_.Earliest(c.cmd, now_);
    c.source = CandidateSource::kRefresh;
    return c;
  }
  return {};
}

ChannelController::Candidate ChannelController::PimCandidate() {
  const HbmOrganization& o = spec_.org;
  if (active_ == nullptr) {
    if (pim_queue_.empty()) return {};
    // Blocked mode: the job owns every row buffer; close the MEM rows first.
    if (Blocked()) {
      for (int b = 0; b < o.banks_per_channel(); ++b) {
        if (Rb(b, 0).open_row >= 0) return PrechargeFor(b, CandidateSource::kPim);
      }
    }
    PendingJob job = std::move(pim_queue_.front());
    pim_queue_.pop_front();
    active_ = std::make_unique<PimStream>(std::move(job.program), spec_, &pim_row_cursor_);
    active_record_ = PimJobRecord{};
    active_record_.id = job.id;
    active_record_.submit = job.submit;
    active_record_.start = -1;
    if (active_->Done()) {  // an empty program finishes at once
      active_record_.start = active_record_.end = active_record_.result_ready = now_;
      finished_jobs_.push_back(active_record_);
      active_.reset();
      return {};
    }
  }
  const Command& cmd = active_->Peek();
  Candidate c;
  c.cmd = cmd;
  c.source = CandidateSource::kPim;
  if (active_->AtGate()) {
    if (refresh_.AnyPending()) return {};  // the refresh goes first
    const Cycles start =
        std::max(engine_.Earliest(cmd, now_), engine_.Earliest(active_->TauCommand(), now_));
    // When can each rank open its first group, given the activations already in its window?
    Cycles delay[8] = {0};
    for (int r = 0; r < std::min(o.ranks, 8); ++r) {
      Command probe;
      probe.type = CommandType::kPimAct;
      probe.rank = static_cast<int8_t>(r);
      delay[r] = std::max<Cycles>(0, engine_.Earliest(probe, start) - start);
    }
    const Cycles period = spec_.pim.command_set == PimCommandSet::kNeuPims
                              ? tile_cost_.TilePeriodWithRankDelays(
                                    active_->Run(), active_->GateIsBlockStart(), delay)
                              : tile_cost_.WorstCaseTilePeriod(delay);
    if (start + period > refresh_.EarliestDeadline()) {
      if (refresh_.PullIn(start + period)) ++stats_.refreshes_pulled_in;
      return {};
    }
    c.earliest = start;
  }
  // Dual row buffers: never open a row in the PIM buffer that is open in the MEM buffer.
  if (rb_count_ == 2 && (cmd.type == CommandType::kPimAct || cmd.type == CommandType::kPimGwrite)) {
    const int first = cmd.type == CommandType::kPimAct
                          ? FlatBank(cmd.rank, cmd.bank_group, 0)
                          : FlatBank(cmd.rank, cmd.bank_group, cmd.bank);
    const int n = cmd.type == CommandType::kPimAct ? o.banks_per_group : 1;
    for (int b = first; b < first + n; ++b) {
      if (Rb(b, 0).open_row == cmd.row) return PrechargeFor(b, CandidateSource::kPim);
    }
  }
  if (c.earliest == kNeverCycle) c.earliest = engine_.Earliest(cmd, now_);
  return c;
}

ChannelController::Candidate ChannelController::MemSideCandidate(const Candidate& pim) {
  if (mem_queue_.empty() && !mem_policy_->AnyRowToClose()) return {};
  if (Blocked() && (active_ != nullptr || !pim_queue_.empty())) return {};
  const PimOutlook outlook = PimOutlookFor(pim);
  ScanMemQueue();
  OfferMemCandidates(outlook);
  const MemPick pick = mem_policy_->Pick(mem_candidates_, now_, outlook);
  Candidate c;
  if (!pick.issue.has_value()) {
    c.earliest = pick.next_ready;
    return c;
  }
  c.cmd = pick.issue->cmd;
  c.earliest = pick.issue->earliest;
  c.source = CandidateSource::kMem;
  c.mem_index = pick.issue->queue_index;
  return c;
}

// One pass: per bank, the oldest request and the oldest request hitting the open row (FR-FCFS
// only ever issues for those two). The result depends only on the queue and the MEM row buffers'
// open rows, which change only when a command issues (IssueCommand updates the scan for it, see
// KeepScanAfterRowChange / KeepScanAfterServe); between issues the queue only grows at its end
// (PullArrivals), so the pass goes on from where the last one stopped, with the same result as a
// pass from the start.
void ChannelController::ScanMemQueue() {
  if (scanned_ == 0) touched_banks_.clear();
  // In locals: the stores below could alias the members as far as the compiler knows.
  const int groups = spec_.org.bank_groups, per_group = spec_.org.banks_per_group;
  const uint64_t stamp = scan_stamp_;
  const size_t size = mem_queue_.size();
  const MemRequest* const queue = mem_queue_.data();
  BankQueueInfo* const info_of = bank_info_.data();
  const BankRb* const rbs = rbs_.data();
  const int rb_count = rb_count_;
  for (size_t i = scanned_; i < size; ++i) {
    const MemRequest& r = queue[i];
    const int b = (r.rank * groups + r.bank_group) * per_group + r.bank;  // FlatBank
    BankQueueInfo& info = info_of[b];
    if (info.stamp != stamp) {
      info = BankQueueInfo{stamp, static_cast<int>(i), -1};
      touched_banks_.push_back(b);
    }
    if (info.first_hit < 0 && r.row == rbs[b * rb_count].open_row) {  // Rb(b, 0)
      info.first_hit = static_cast<int>(i);
    }
  }
  scanned_ = size;
}

// The last scan (bank_info_, touched_banks_, scanned_) is kept across issues, redone only where
// the issue changed it, so that it stays what a pass over the whole queue would give now.

// A command that opens or closes a MEM row changes only that bank's oldest row hit. In the
// single row-buffer mode PIM activations and precharges use the same buffers: a new scan.
void ChannelController::KeepScanAfterRowChange(const Command& cmd) {
  const bool mem_row = cmd.type == CommandType::kAct || cmd.type == CommandType::kPre;
  if (!mem_row) {
    if (rb_count_ == 1 && (cmd.type == CommandType::kPimAct || cmd.type == CommandType::kPimPre)) {
      ++scan_stamp_;
      scanned_ = 0;
    }
    return;
  }
  const int b = FlatBank(cmd.rank, cmd.bank_group, cmd.bank);
  BankQueueInfo& info = bank_info_[b];
  if (info.stamp != scan_stamp_) return;  // no scanned request for the bank
  info.first_hit = cmd.type == CommandType::kAct ? NextOfBank(b, info.first, true) : -1;
}

// The request at `index` (of bank `bank`, the bank's oldest row hit) has left the queue: the
// positions after it move down by one, and the bank's oldest request and row hit are found anew.
void ChannelController::KeepScanAfterServe(int index, int bank) {
  --scanned_;
  for (int b : touched_banks_) {
    BankQueueInfo& info = bank_info_[b];
    if (info.first > index) --info.first;
    if (info.first_hit > index) --info.first_hit;
  }
  BankQueueInfo& info = bank_info_[bank];
  if (info.first == index) info.first = NextOfBank(bank, index, false);
  if (info.first < 0) {  // its last request: the bank leaves the scan
    info.stamp = 0;
    auto it = std::find(touched_banks_.begin(), touched_banks_.end(), bank);
    *it = touched_banks_.back();
    touched_banks_.pop_back();
    return;
  }
  info.first_hit = NextOfBank(bank, std::max(index, info.first), true);
}

// The first scanned queue position >= from of a request to bank `bank` (with `hit`: one that
// hits the bank's open MEM row), or -1.
int ChannelController::NextOfBank(int bank, int from, bool hit) const {
  const int32_t open = hit ? rbs_[bank * rb_count_].open_row : 0;
  if (hit && open < 0) return -1;
  for (int i = from; i < static_cast<int>(scanned_); ++i) {
    const MemRequest& r = mem_queue_[i];
    if (FlatBank(r.rank, r.bank_group, r.bank) == bank && (!hit || r.row == open)) return i;
  }
  return -1;
}

// The row policy's precharges, then one command per bank with queued requests: its oldest row
// hit, else an activation for its oldest request, else (row conflict) a precharge.
void ChannelController::OfferMemCandidates(const PimOutlook& pim) {
  mem_candidates_.clear();
  if (mem_policy_->AnyRowToClose()) {
    for (int b = 0; b < spec_.org.banks_per_channel(); ++b) {
      const bool hits_queued = bank_info_[b].stamp == scan_stamp_ && bank_info_[b].first_hit >= 0;
      if (!mem_policy_->CloseNow(b, Rb(b, 0).open_row >= 0, hits_queued)) continue;
      const Candidate pre = PrechargeFor(b, CandidateSource::kMem);
      mem_candidates_.push_back({pre.cmd, pre.earliest, false, kRowPolicyQueueIndex});
    }
  }
  for (int b : touched_banks_) {
    const BankQueueInfo& info = bank_info_[b];
    const bool hit = info.first_hit >= 0;
    const int index = hit ? info.first_hit : info.first;
    const MemRequest& r = mem_queue_[index];
    // A draining rank takes no new MEM work: every row hit would push its precharge (tRTP).
    if (refresh_.Draining(r.rank, now_)) continue;
    MemCandidate c;
    c.row_hit = hit;
    c.queue_index = index;
    c.cmd.rank = static_cast<int8_t>(r.rank);
    c.cmd.bank_group = static_cast<int8_t>(r.bank_group);
    c.cmd.bank = static_cast<int8_t>(r.bank);
    c.cmd.row = r.row;
    c.cmd.col = r.col;
    const int32_t open = Rb(b, 0).open_row;
    if (hit) {
      c.cmd.type = r.is_write ? CommandType::kWr : CommandType::kRd;
    } else if (open < 0) {
      if (rb_count_ == 2 && Rb(b, 1).open_row == r.row) continue;  // row busy in PIM buffer
      c.cmd.type = CommandType::kAct;
    } else {
      c.cmd.type = CommandType::kPre;  // row conflict and no queued hit on the open row
      c.cmd.row = 0;
      c.cmd.col = 0;
    }
    const bool held = c.cmd.type == CommandType::kAct && OwesPimActivations(pim, r.rank);
    if (!held) c.earliest = MemEarliest(b, c.cmd);  // the hot path: skip when moot
    mem_candidates_.push_back(c);
  }
}

// engine_.Earliest(cmd, now_) for bank b's MEM candidate, with the rule bound kept from the
// bank's last query while no command has issued (it is then the same; only the data bus is
// walked again from now_).
Cycles ChannelController::MemEarliest(int bank, const Command& cmd) {
  BoundCache& cache = mem_bounds_[bank];
  if (cache.issued != engine_.issued() || cache.type != cmd.type) {
    cache = BoundCache{engine_.issued(), cmd.type, engine_.RuleBound(cmd)};
  }
  return engine_.EarliestAbove(cmd, now_, cache.bound);
}

PimOutlook ChannelController::PimOutlookFor(const Candidate& pim) const {
  PimOutlook o;
  if (pim.source == CandidateSource::kPim) o.next = pim.cmd;
  o.next_earliest = pim.earliest;
  if (active_ != nullptr) o.ranks_owing_activations = active_->RanksAwaitingActivation();
  return o;
}

void ChannelController::IssueCommand(const Candidate& c) {
  const Command& cmd = c.cmd;
  const HbmTiming& t = spec_.timing;
  ++state_version_;
  engine_.Issue(cmd, now_);
  ++stats_.commands[static_cast<int>(cmd.type)];
  if (options_.record_trace) trace_.push_back({now_, cmd});
  ApplyState(cmd);
  // (tested here: PIM-only runs issue millions of commands that change no MEM row)
  if (cmd.type == CommandType::kAct || cmd.type == CommandType::kPre || rb_count_ == 1) {
    KeepScanAfterRowChange(cmd);
  }

  if (cmd.type == CommandType::kRef) {
    const Cycles late = now_ - refresh_.Deadline(cmd.rank);
    stats_.max_refresh_lateness = std::max(stats_.max_refresh_lateness, late);
    if (late < 0) stats_.refresh_early_sum += -late;
    refresh_.OnRefresh(cmd.rank, now_);
    ++stats_.refreshes;
    return;
  }
  if (c.source == CandidateSource::kPim && active_ != nullptr && cmd.type != CommandType::kPre) {
    if (active_record_.start < 0) active_record_.start = now_;
    switch (cmd.type) {
      case CommandType::kPimGemv:
        stats_.pim_column_steps += cmd.steps;
        ++stats_.pim_results;
        active_record_.result_ready = now_ + LastColumnOffset(cmd, t) + t.CL + t.tBL;
        break;
      case CommandType::kPimDot:
        ++stats_.pim_column_steps;
        break;
      case CommandType::kPimRdResult:
        ++stats_.pim_results;
        active_record_.result_ready = now_ + t.CL + t.tBL;
        break;
      case CommandType::kPimPre:
        ++stats_.pim_tiles;
        break;
      default:
        break;
    }
    active_->Advance();
    if (active_->Done()) {
      active_record_.end = now_ + t.tRP;
      finished_jobs_.push_back(active_record_);
      active_.reset();
    }
    return;
  }
  if (c.source == CandidateSource::kMem &&
      (cmd.type == CommandType::kRd || cmd.type == CommandType::kWr)) {
    const MemRequest r = mem_queue_[c.mem_index];
    mem_queue_.erase(mem_queue_.begin() + c.mem_index);
    KeepScanAfterServe(c.mem_index, FlatBank(r.rank, r.bank_group, r.bank));
    const Cycles data_end = now_ + (r.is_write ? t.CWL : t.CL) + t.tBL;
    stats_.mem_latency_sum += data_end - r.arrival;
    if (r.is_write) {
      ++stats_.mem_writes;
    } else {
      ++stats_.mem_reads;
    }
    mem_policy_->OnServed(FlatBank(r.rank, r.bank_group, r.bank));
  }
  if (cmd.type == CommandType::kPre) {
    mem_policy_->OnPrecharge(FlatBank(cmd.rank, cmd.bank_group, cmd.bank));
  }
}

Cycles ChannelController::Run(Cycles until) { return RunLoop(until, /*stop_on_pim_idle=*/false); }

Cycles ChannelController::RunUntilPimDone(Cycles limit) {
  return RunLoop(limit, /*stop_on_pim_idle=*/true);
}

Cycles ChannelController::RunLoop(Cycles until, bool stop_on_pim_idle) {
  while (now_ < until && !(stop_on_pim_idle && PimIdle())) {
    PullArrivals();
    if (refresh_.Update(now_)) ++state_version_;
    // Priorities: a due REF, then PIM, then the refresh drain's precharges, then MEM.
    const Candidate ref = RefreshCandidate();
    if (ref.source != CandidateSource::kNone && ref.earliest <= now_ &&
        ref.cmd.type == CommandType::kRef) {
      IssueCommand(ref);
      continue;
    }
    const bool refresh_was_pending = refresh_.AnyPending();
    if (pim_cached_version_ != state_version_ || pim_cached_.earliest < now_ ||
        pim_cached_.source != CandidateSource::kPim) {
      pim_cached_ = PimCandidate();
      pim_cached_version_ = state_version_;
    }
    const Candidate pim = pim_cached_;
    if (pim.source != CandidateSource::kNone && pim.earliest <= now_) {
      IssueCommand(pim);
      continue;
    }
    if (!refresh_was_pending && refresh_.AnyPending()) {  // PIM pulled a refresh in
      ++state_version_;
      continue;
    }
    if (ref.source != CandidateSource::kNone && ref.earliest <= now_) {
      IssueCommand(ref);
      continue;
    }
    const Candidate mem = MemSideCandidate(pim);
    if (mem.source != CandidateSource::kNone && mem.earliest <= now_) {
      IssueCommand(mem);
      continue;
    }
    const bool arrivals = traffic_ != nullptr && traffic_->NextArrival() < kNeverCycle;
    const bool work = !PimIdle() || !mem_queue_.empty() || arrivals;
    if (!work && until >= kNeverCycle) break;
    Cycles next = std::min({ref.earliest, pim.earliest, mem.earliest, until});
    if (arrivals && static_cast<int>(mem_queue_.size()) < options_.mem_queue_capacity) {
      next = std::min(next, traffic_->NextArrival());
    }
    next = std::min(next, refresh_.NextEvent(now_));
    now_ = std::max(now_ + 1, next);
  }
  UpdateBackground(now_);
  return now_;
}

}  // namespace neupims::hw
