#include "hw/pim/pim_model.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "hw/dram/timing_table.h"
#include "hw/pim/channel_controller.h"
#include "hw/pim/tile_cost.h"

namespace neupims::hw {

double PimOpResult::MacUtilization(const HbmSpec& spec) const {
  if (cycles <= 0) return 0;
  return static_cast<double>(column_steps) * spec.timing.tCCD_L / static_cast<double>(cycles);
}

PimModel::PimModel(const HbmSpec& spec) : spec_(spec), geometry_(PimGeometry::FromSpec(spec)) {}

absl::StatusOr<PimOpResult> PimModel::Attention(const AttentionShape& shape,
                                                const MemTraffic& traffic) {
  ASSIGN_OR_RETURN(GemvProgram program, PlanAttention(shape, geometry_));
  return Run(program, traffic);
}

absl::StatusOr<Cycles> PimModel::AttentionCycles(const AttentionShape& shape,
                                                 const MemTraffic& traffic) {
  ASSIGN_OR_RETURN(GemvProgram program, PlanAttention(shape, geometry_));
  return ProgramCycles(program, traffic);
}

CommandCounts ImpliedPimCommands(const GemvProgram& program, const PimSpec& pim,
                                 int banks_per_group) {
  CommandCounts c{};
  int64_t groups = 0;
  for (const GemvBlock& b : program.blocks) {
    for (const TileRun& run : b.runs) groups += b.repeat * run.count * run.groups;
  }
  c[static_cast<int>(CommandType::kPimAct)] = groups;
  c[static_cast<int>(CommandType::kPimGwrite)] = program.vector_loads();
  if (pim.timing.row_close == PimRowClose::kPerBankPrecharge) {
    // One PRE per open bank and a PIM_HEADER per row switch (hbm_spec.h, pim.timing).
    c[static_cast<int>(CommandType::kPre)] = groups * banks_per_group;
    c[static_cast<int>(CommandType::kPimHeader)] = program.tiles();
  } else {
    c[static_cast<int>(CommandType::kPimPre)] = program.tiles();
    // NeuPIMs: a PIM_HEADER per block.
    if (pim.command_set == PimCommandSet::kNeuPims) {
      c[static_cast<int>(CommandType::kPimHeader)] = program.vector_loads();
    }
  }
  if (pim.command_set == PimCommandSet::kNeuPims) {
    c[static_cast<int>(CommandType::kPimGemv)] = program.dot_products();
  } else {
    c[static_cast<int>(CommandType::kPimDot)] = program.column_steps();
    c[static_cast<int>(CommandType::kPimRdResult)] = program.dot_products();
  }
  return c;
}

absl::StatusOr<PimOpResult> PimModel::Gemv(const GemvShape& shape, const MemTraffic& traffic) {
  ASSIGN_OR_RETURN(GemvProgram program, PlanGemv(shape, geometry_));
  return Run(program, traffic);
}

absl::Status PimModel::ValidateTraffic(const MemTraffic& traffic) const {
  if (!(traffic.demand >= 0 && traffic.demand <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MEM traffic demand must be in [0, 1], got ", traffic.demand));
  }
  if (!(traffic.write_fraction >= 0 && traffic.write_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MEM traffic write fraction must be in [0, 1], got ", traffic.write_fraction));
  }
  if (!spec_.pim.enabled) {
    return absl::FailedPreconditionError("this device has no PIM (pim.enabled is false)");
  }
  return absl::OkStatus();
}

namespace {

void FillProgramCounts(const GemvProgram& p, const PimGeometry& g, PimOpResult* r) {
  r->tiles = p.tiles();
  r->vector_loads = p.vector_loads();
  r->column_steps = p.column_steps();
  r->results = p.dot_products();
  r->macs = p.macs(g);
}

// ---------------------------------------------------------------------------------------------
class CommandLevelPimModel : public PimModel {
 public:
  CommandLevelPimModel(const HbmSpec& spec, const PimModelOptions& options)
      : PimModel(spec), options_(options) {}

  const char* name() const override { return "command"; }

  absl::StatusOr<PimOpResult> Run(const GemvProgram& program, const MemTraffic& traffic) override {
    RETURN_IF_ERROR(ValidateTraffic(traffic));
    const int phases = std::max(1, options_.phases);
    PimOpResult mean;
    double cycles_sum = 0, refresh_sum = 0, bw_sum = 0, lat_sum = 0;
    for (int i = 0; i < phases; ++i) {
      const Cycles phase = phases == 1 ? options_.refresh_phase_cycles
                                       : options_.refresh_phase_cycles +
                                             static_cast<Cycles>(i) * spec_.timing.tREFI / phases;
      PimOpResult r = RunOnce(program, traffic, phase, options_.record_trace && i == 0);
      cycles_sum += static_cast<double>(r.cycles);
      refresh_sum += r.refreshes;
      bw_sum += r.mem_bytes_per_cycle;
      lat_sum += r.mem_latency_cycles;
      if (i == 0) mean = std::move(r);
    }
    mean.cycles = static_cast<Cycles>(std::llround(cycles_sum / phases));
    mean.refreshes = refresh_sum / phases;
    mean.mem_bytes_per_cycle = bw_sum / phases;
    mean.mem_latency_cycles = lat_sum / phases;
    return mean;
  }

  absl::StatusOr<Cycles> ProgramCycles(const GemvProgram& program,
                                       const MemTraffic& traffic) override {
    ASSIGN_OR_RETURN(PimOpResult r, Run(program, traffic));
    return r.cycles;
  }

 private:
  PimOpResult RunOnce(const GemvProgram& program, const MemTraffic& traffic, Cycles phase,
                      bool trace) {
    ControllerOptions copts;
    copts.refresh_phase_cycles = phase;
    copts.record_trace = trace;
    ChannelController ctrl(spec_, copts);
    SyntheticTraffic source(spec_, traffic, std::numeric_limits<int64_t>::max());
    if (traffic.active()) ctrl.SetTrafficSource(&source);
    ctrl.SubmitPim(0, program);
    ctrl.RunUntilPimDone();
    const ControllerStats& s = ctrl.stats();
    PimOpResult r;
    FillProgramCounts(program, geometry_, &r);
    const PimJobRecord& job = ctrl.pim_jobs().front();
    r.cycles = job.end - job.start;
    r.commands = s.commands;
    r.refreshes = static_cast<double>(s.refreshes);
    const double served = static_cast<double>(s.mem_reads + s.mem_writes);
    if (r.cycles > 0) r.mem_bytes_per_cycle = served * spec_.org.burst_bytes / r.cycles;
    if (served > 0) r.mem_latency_cycles = static_cast<double>(s.mem_latency_sum) / served;
    DramActivity a;
    a.commands = s.commands;
    a.pim_column_steps = static_cast<double>(s.pim_column_steps);
    a.pim_results = static_cast<double>(s.pim_results);
    a.rank_cycles_total = static_cast<double>(s.rank_cycles_total);
    a.rank_cycles_row_open = static_cast<double>(s.rank_cycles_mem_open);
    a.rank_cycles_second_buffer = static_cast<double>(s.rank_cycles_pim_open);
    r.energy = ComputeDramEnergy(spec_, a);
    if (trace) r.trace = ctrl.trace();
    return r;
  }

  PimModelOptions options_;
};

// ---------------------------------------------------------------------------------------------
class AnalyticPimModel : public PimModel {
 public:
  AnalyticPimModel(const HbmSpec& spec, const PimModelOptions&)
      : PimModel(spec), tiles_(spec), controller_tiles_(WithControllerTiming(spec)) {}

  const char* name() const override { return "analytic"; }

  absl::StatusOr<PimOpResult> Run(const GemvProgram& program, const MemTraffic& traffic) override {
    RETURN_IF_ERROR(ValidateTraffic(traffic));
    PimOpResult r;
    FillProgramCounts(program, geometry_, &r);
    const Cycles busy = BusyCycles(program, traffic);
    const double refresh = Refresh(busy, r.tiles);
    if (traffic.active()) r.mem_bytes_per_cycle = MemBandwidth(program, traffic);
    r.cycles = busy + static_cast<Cycles>(std::llround(refresh));
    const double events = r.tiles > 0
                              ? tiles_.ExpectedRefreshEvents(static_cast<double>(busy),
                                                             static_cast<double>(busy) / r.tiles)
                              : 0;
    const int refs_per_event = spec_.refresh == RefreshPolicy::kAllRanks ? spec_.org.ranks : 1;
    r.refreshes = events * refs_per_event;
    // Commands implied by the program.
    r.commands = ImpliedPimCommands(program, spec_.pim, spec_.org.banks_per_group);
    auto& c = r.commands;
    c[static_cast<int>(CommandType::kRef)] = static_cast<int64_t>(std::llround(r.refreshes));
    // Energy: rows are open in every rank for the whole op except the precharge gaps.
    DramActivity a;
    a.commands = c;
    a.pim_column_steps = static_cast<double>(r.column_steps);
    a.pim_results = static_cast<double>(r.results);
    const double mean_tile = r.tiles > 0 ? static_cast<double>(busy) / r.tiles : 0;
    const double open_fraction =
        mean_tile > 0 ? std::max(0.0, 1.0 - spec_.timing.tRP / mean_tile) : 0;
    a.rank_cycles_total = static_cast<double>(spec_.org.ranks) * r.cycles;
    a.rank_cycles_row_open = static_cast<double>(spec_.org.ranks) * busy * open_fraction;
    if (spec_.pim.row_buffers == RowBufferMode::kDual) {
      a.rank_cycles_second_buffer = a.rank_cycles_row_open;
    }
    r.energy = ComputeDramEnergy(spec_, a);
    return r;
  }

  absl::StatusOr<Cycles> ProgramCycles(const GemvProgram& program,
                                       const MemTraffic& traffic) override {
    RETURN_IF_ERROR(ValidateTraffic(traffic));
    const Cycles busy = BusyCycles(program, traffic);
    return busy + static_cast<Cycles>(std::llround(Refresh(busy, program.tiles())));
  }

 private:
  double Refresh(Cycles busy, int64_t tiles) const {
    if (tiles <= 0) return 0;
    return tiles_.ExpectedRefreshCycles(static_cast<double>(busy),
                                        static_cast<double>(busy) / static_cast<double>(tiles));
  }

  // A tile shape under a traffic mix (demand and write share in thousandths).
  struct CalibrationKey {
    int groups, dots, steps_per_dot;
    bool block_start;
    int64_t demand_milli, write_milli;
    MemTraffic::Pattern pattern;
    bool operator==(const CalibrationKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const CalibrationKey& k) {
      return H::combine(std::move(h), k.groups, k.dots, k.steps_per_dot, k.block_start,
                        k.demand_milli, k.write_milli, k.pattern);
    }
  };

  // Measured period (and MEM bytes served) of one tile shape under `traffic`.
  struct Calibrated {
    double period = 0;
    double mem_bytes_per_cycle = 0;
  };

  const Calibrated& Calibrate(const TileRun& run, bool block_start, const MemTraffic& traffic) {
    const CalibrationKey key{run.groups,
                             run.dots,
                             run.steps_per_dot,
                             block_start,
                             std::llround(traffic.demand * 1000),
                             std::llround(traffic.write_fraction * 1000),
                             traffic.pattern};
    auto it = calibrated_.find(key);
    if (it != calibrated_.end()) return it->second;
    // Ten tiles of this shape (each after its own GWRITE for block-start tiles) on a channel
    // that has carried the traffic alone for a while; refresh stays out of the window and is
    // added analytically like in the no-traffic case.
    constexpr int kTiles = 10;
    constexpr Cycles kWarmup = 200;
    GemvProgram p;
    GemvBlock b;
    b.load_vector = block_start;
    b.repeat = block_start ? kTiles : 1;
    b.runs.push_back({block_start ? 1 : kTiles, run.groups, run.dots, run.steps_per_dot});
    p.blocks.push_back(b);
    ControllerOptions opts;
    opts.refresh_phase_cycles = 0;
    ChannelController ctrl(spec_, opts);
    SyntheticTraffic source(spec_, traffic, std::numeric_limits<int64_t>::max());
    ctrl.SetTrafficSource(&source);
    ctrl.Run(kWarmup);
    const int64_t served_before = ctrl.stats().mem_reads + ctrl.stats().mem_writes;
    ctrl.SubmitPim(0, p);
    ctrl.RunUntilPimDone();
    const PimJobRecord& job = ctrl.pim_jobs().front();
    const double cycles = static_cast<double>(job.end - job.start);
    const int64_t served = ctrl.stats().mem_reads + ctrl.stats().mem_writes - served_before;
    Calibrated c;
    c.period = cycles / kTiles;
    c.mem_bytes_per_cycle = static_cast<double>(served) * spec_.org.burst_bytes /
                            static_cast<double>(job.end - kWarmup);
    return calibrated_.emplace(key, c).first->second;
  }

  template <typename F>
  void ForEachTileClass(const GemvProgram& program, F&& f) {
    for (const GemvBlock& b : program.blocks) {
      bool first = b.load_vector;
      for (const TileRun& r : b.runs) {
        if (r.count <= 0) continue;
        if (first) {
          f(r, true, b.repeat);
          if (r.count > 1) f(r, false, b.repeat * (r.count - 1));
        } else {
          f(r, false, b.repeat * r.count);
        }
        first = false;
      }
    }
  }

  Cycles BusyCycles(const GemvProgram& program, const MemTraffic& traffic) {
    if (!traffic.active()) return tiles_.ProgramCycles(program);
    double total = 0;
    ForEachTileClass(program, [&](const TileRun& r, bool start, int64_t n) {
      total +=
          static_cast<double>(n) * (Calibrate(r, start, traffic).period + TimingDelta(r, start));
    });
    return static_cast<Cycles>(std::llround(total));
  }

  double MemBandwidth(const GemvProgram& program, const MemTraffic& traffic) {
    double bytes = 0, cycles = 0;
    ForEachTileClass(program, [&](const TileRun& r, bool start, int64_t n) {
      const Calibrated& c = Calibrate(r, start, traffic);
      bytes += static_cast<double>(n) * c.period * c.mem_bytes_per_cycle;
      cycles += static_cast<double>(n) * c.period;
    });
    return cycles > 0 ? bytes / cycles : 0;
  }

  // The controller times PIM commands with the default pim.timing; under MEM traffic the
  // measured period gets what the closed form says another pim.timing adds to the tile.
  static HbmSpec WithControllerTiming(HbmSpec spec) {
    spec.pim.timing = PimTiming{};
    return spec;
  }
  double TimingDelta(const TileRun& r, bool start) const {
    if (spec_.pim.timing.IsDefault()) return 0;
    return static_cast<double>(tiles_.TilePeriod(r, start) -
                               controller_tiles_.TilePeriod(r, start));
  }

  TileCostModel tiles_;
  TileCostModel controller_tiles_;
  absl::flat_hash_map<CalibrationKey, Calibrated> calibrated_;
};

}  // namespace

std::unique_ptr<PimModel> CreateCommandLevelPimModel(const HbmSpec& spec,
                                                     const PimModelOptions& options) {
  return std::make_unique<CommandLevelPimModel>(spec, options);
}

std::unique_ptr<PimModel> CreateAnalyticPimModel(const HbmSpec& spec,
                                                 const PimModelOptions& options) {
  return std::make_unique<AnalyticPimModel>(spec, options);
}

}  // namespace neupims::hw
