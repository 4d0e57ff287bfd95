// PimModel: latency, commands and energy of GEMV work on one HBM-PIM channel.
//
// Role: the interface the engine (and the `neupims hw` CLI) uses for attention on PIM. Two
// implementations are registered by name (hw/registry.h):
//   "command"  - the command-level model: a ChannelController issues every DRAM/PIM command
//                under the full timing table, refresh and (optional) concurrent MEM traffic.
//   "analytic" - closed form: tile periods from TileCostModel (derived from the timing
//                parameters, docs/hw.md), expected refresh overhead, no per-command work. It is
//                the engine's hot path (AttentionCycles: well under a microsecond per query).
//                Under concurrent MEM traffic the tile periods are instead measured once per
//                (tile shape, traffic) on the command-level controller and cached, in the
//                spirit of NeuPIMs Algorithm 1's measured L_tile: MEM activations share the
//                tFAW windows with grouped PIM activations, which no simple closed form captures.
// Tests sweep shapes and check the analytic model stays within 5% of the command-level one.
//
// Latency convention: `cycles` is the channel occupancy in HBM cycles, from the op's first
// command until the channel may start the next PIM op (last PIM_PRECHARGE + tRP); ops queued
// on one channel therefore add up.
//
// Contract: not thread-safe (models keep caches); one model per thread.
#ifndef NEUPIMS_HW_PIM_PIM_MODEL_H_
#define NEUPIMS_HW_PIM_PIM_MODEL_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/dram/command.h"
#include "hw/dram/energy.h"
#include "hw/dram/hbm_spec.h"
#include "hw/pim/gemv_plan.h"
#include "hw/pim/mem_traffic.h"

namespace neupims::hw {

struct PimOpResult {
  Cycles cycles = 0;         // channel occupancy (HBM cycles)
  CommandCounts commands{};  // PIM and DRAM commands issued (analytic: implied counts)
  int64_t tiles = 0;
  int64_t vector_loads = 0;
  int64_t column_steps = 0;
  int64_t results = 0;
  int64_t macs = 0;
  double refreshes = 0;            // REF commands during the op (analytic: expected value)
  double mem_bytes_per_cycle = 0;  // MEM traffic served during the op (with concurrent traffic)
  double mem_latency_cycles = 0;   // mean MEM request latency during the op
  DramEnergy energy;
  std::vector<IssuedCommand> trace;  // command-level only, when tracing is on

  // Fraction of the op's cycles the PIM MAC datapath was computing (column steps x tCCD_L).
  double MacUtilization(const HbmSpec& spec) const;
};

struct PimModelOptions {
  // Command-level: cycles since the last refresh when the op starts...
  Cycles refresh_phase_cycles = 0;
  // ...or, when > 1, the mean over this many runs at evenly spaced refresh phases (the
  // expectation the analytic model computes).
  int phases = 1;
  bool record_trace = false;
};

class PimModel {
 public:
  virtual ~PimModel() = default;

  virtual absl::StatusOr<PimOpResult> Run(const GemvProgram& program,
                                          const MemTraffic& traffic = {}) = 0;
  // Occupancy of a program / of one request-layer's attention (logit + attend), without the
  // per-command detail; the engine's hot path.
  virtual absl::StatusOr<Cycles> ProgramCycles(const GemvProgram& program,
                                               const MemTraffic& traffic = {}) = 0;
  absl::StatusOr<Cycles> AttentionCycles(const AttentionShape& shape,
                                         const MemTraffic& traffic = {});
  virtual const char* name() const = 0;

  absl::StatusOr<PimOpResult> Attention(const AttentionShape& shape,
                                        const MemTraffic& traffic = {});
  absl::StatusOr<PimOpResult> Gemv(const GemvShape& shape, const MemTraffic& traffic = {});

  const HbmSpec& spec() const { return spec_; }
  const PimGeometry& geometry() const { return geometry_; }

 protected:
  explicit PimModel(const HbmSpec& spec);
  absl::Status ValidateTraffic(const MemTraffic& traffic) const;

  HbmSpec spec_;
  PimGeometry geometry_;
};

// The PIM commands a program issues under a command set (refresh not included).
CommandCounts ImpliedPimCommands(const GemvProgram& program, const PimSpec& pim,
                                 int banks_per_group);

std::unique_ptr<PimModel> CreateCommandLevelPimModel(const HbmSpec& spec,
                                                     const PimModelOptions& options);
std::unique_ptr<PimModel> CreateAnalyticPimModel(const HbmSpec& spec,
                                                 const PimModelOptions& options);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_PIM_PIM_MODEL_H_
