#include "hw/npu/npu_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace neupims::hw {

double NpuOpResult::ArrayUtilization(const NpuSpec& spec) const {
  if (cycles <= 0) return 0.0;
  return static_cast<double>(macs) /
         (static_cast<double>(spec.peak_macs_per_cycle()) * static_cast<double>(cycles));
}

namespace {

int CeilLog2(int64_t x) {
  int bits = 0;
  while ((int64_t{1} << bits) < x) ++bits;
  return bits;
}

// Rounds a pipeline time up to whole cycles. DMA times are fractional (bytes / bandwidth) and
// summing a million of them leaves rounding noise that must not add a spurious cycle.
Cycles CeilCycles(double t) { return static_cast<Cycles>(std::ceil(t - 1e-6)); }

// Everything about a GEMM that both implementations share: the tiling, the m passes, the HBM and
// scratchpad traffic, the energy and the compute-only / memory-only bounds. Only
// NpuOpResult::cycles differs: "tiled" simulates the pipeline, "analytic" is its closed form.
struct GemmPlan {
  int64_t tiles_k = 0;  // weight tiles along K: ceil(k / array_rows)
  int64_t tiles_n = 0;  // weight tiles along N: ceil(n / array_cols)
  int64_t tiles_per_pass = 0;
  int64_t passes = 0;           // m passes; every pass re-streams every weight tile
  int64_t m_pass = 0;           // activation rows of every pass but the last
  int64_t m_last = 0;           // activation rows of the last pass (1 <= m_last <= m_pass)
  int64_t total_tiles = 0;      // tile-passes: passes * tiles_per_pass
  int64_t full_pass_tiles = 0;  // tile-passes before the last pass
  Cycles slot_full = 0;         // compute slot of one tile on one array: max(m_pass, rows)
  Cycles slot_last = 0;         // ... in the last pass: max(m_last, rows)
  Cycles fill_drain = 0;        // once per array at the end: rows + cols - 1
  double bytes_per_cycle = 0;   // HBM bandwidth the NPU gets during this op
  double act_in_cycles = 0;     // DMA of the activations, once at the start
  double out_cycles = 0;        // DMA of the outputs, once at the end
  double weight_cycles = 0;     // DMA of the weight tiles of all passes
  NpuOpResult result;           // every field but cycles
};

absl::Status CheckGemm(const GemmShape& shape, const NpuContext& ctx) {
  const std::array<std::pair<const char*, int64_t>, 3> dims = {
      {{"m", shape.m}, {"k", shape.k}, {"n", shape.n}}};
  for (const auto& [name, value] : dims) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("GemmShape.", name, " must be >= 1, got ", value));
    }
  }
  // Every count derived from the shape (MACs, cycles, bytes, energy) stays far inside int64 and
  // exact in a double: refuse a shape beyond 2^53 MACs instead of wrapping.
  constexpr double kMaxMacs = 9007199254740992.0;  // 2^53
  const double macs =
      static_cast<double>(shape.m) * static_cast<double>(shape.k) * static_cast<double>(shape.n);
  if (macs > kMaxMacs) {
    return absl::InvalidArgumentError(absl::StrCat("GemmShape ", shape.m, " x ", shape.k, " x ",
                                                   shape.n, " is ", macs,
                                                   " MACs, over the limit of 2^53 (9.007e15)"));
  }
  // Written so that NaN fails too.
  if (!(ctx.bandwidth_fraction > 0 && ctx.bandwidth_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NpuContext.bandwidth_fraction must be in (0, 1], got ", ctx.bandwidth_fraction));
  }
  return absl::OkStatus();
}

// Bytes of weight tile `j` of a pass (tiles in N-major, K-minor order: the K tiles of one output
// column block are consecutive so its partial sums accumulate in place). Edge tiles are smaller.
Bytes TileWeightBytes(const NpuSpec& spec, const GemmShape& shape, const GemmPlan& plan,
                      int64_t j) {
  if (!shape.weights_from_hbm) return 0;  // operand already on chip: no DMA
  const int64_t kt = j % plan.tiles_k;
  const int64_t nt = j / plan.tiles_k;
  const int64_t rows = std::min<int64_t>(spec.array_rows, shape.k - kt * spec.array_rows);
  const int64_t cols = std::min<int64_t>(spec.array_cols, shape.n - nt * spec.array_cols);
  return rows * cols * spec.element_bytes;
}

// Compute slots assigned to array `a` when tile-passes are dealt round-robin over the arrays
// (what least-loaded assignment does when all slots are equal).
Cycles RoundRobinLoad(const GemmPlan& plan, int64_t arrays, int64_t a) {
  auto count = [&](int64_t tiles) { return tiles > a ? (tiles - 1 - a) / arrays + 1 : 0; };
  const int64_t full = count(plan.full_pass_tiles);
  const int64_t all = count(plan.total_tiles);
  return full * plan.slot_full + (all - full) * plan.slot_last;
}

absl::StatusOr<GemmPlan> PlanGemm(const NpuSpec& spec, const GemmShape& shape,
                                  const NpuContext& ctx) {
  RETURN_IF_ERROR(CheckGemm(shape, ctx));
  GemmPlan p;
  p.bytes_per_cycle = spec.hbm_bytes_per_cycle * ctx.bandwidth_fraction;
  if (!(p.bytes_per_cycle > 0)) {
    return absl::FailedPreconditionError(
        absl::StrCat("npu.hbm_bytes_per_cycle must be > 0, got ", spec.hbm_bytes_per_cycle));
  }
  const int64_t m = shape.m, k = shape.k, n = shape.n;
  const int64_t rows = spec.array_rows, cols = spec.array_cols, arrays = spec.systolic_arrays;
  const int64_t eb = spec.element_bytes;

  p.tiles_k = CeilDiv(k, rows);
  p.tiles_n = CeilDiv(n, cols);
  p.tiles_per_pass = p.tiles_k * p.tiles_n;

  // m passes: one pass's activation block (m_pass x k) and output block (m_pass x n) live in one
  // half of the scratchpad, the double-buffered weight tiles in the other. The largest m_pass
  // that fits fixes the number of passes; the rows are then spread evenly over the passes so the
  // last pass is not a sliver (a 2-row last pass would run memory-bound behind compute-bound
  // ones, which no compiler would schedule and which max(compute, memory) cannot describe).
  const int64_t fit = (spec.sram_bytes / 2) / ((k + n) * eb);
  const int64_t max_rows = std::clamp<int64_t>(fit, 1, m);
  p.passes = CeilDiv(m, max_rows);
  p.m_pass = CeilDiv(m, p.passes);
  p.m_last = m - (p.passes - 1) * p.m_pass;  // >= 1 since (passes - 1) * m_pass < m
  p.total_tiles = p.passes * p.tiles_per_pass;
  p.full_pass_tiles = (p.passes - 1) * p.tiles_per_pass;
  // A tile occupies its array for its m streaming rows, but at least `rows` cycles: the next
  // tile's weights shift into the PE shadow registers (rows cycles) while this one streams.
  p.slot_full = std::max(p.m_pass, rows);
  p.slot_last = std::max(p.m_last, rows);
  p.fill_drain = rows + cols - 1;

  const Bytes weight_bytes = k * n * eb;  // the edge tiles sum to exactly k x n
  const Bytes weight_hbm_per_pass = shape.weights_from_hbm ? weight_bytes : 0;
  const Bytes act_bytes = m * k * eb;
  const Bytes out_bytes = m * n * eb;
  const Bytes act_hbm = shape.activations_from_hbm ? act_bytes : 0;
  const Bytes out_hbm = shape.activations_from_hbm ? out_bytes : 0;
  p.act_in_cycles = static_cast<double>(act_hbm) / p.bytes_per_cycle;
  p.out_cycles = static_cast<double>(out_hbm) / p.bytes_per_cycle;
  p.weight_cycles = static_cast<double>(p.passes * weight_hbm_per_pass) / p.bytes_per_cycle;

  NpuOpResult& r = p.result;
  r.macs = m * k * n;
  r.hbm_bytes = act_hbm + p.passes * weight_hbm_per_pass + out_hbm;
  // Scratchpad traffic. Weights: read into the PEs once per pass, and written by the DMA first
  // when they come from HBM. Activations: every tile reads its m_pass x (its rows) block, so the
  // whole X is read once per N tile column; written once if it comes from HBM. Outputs: the K
  // tiles of a column accumulate partial sums in place (tiles_k writes, tiles_k - 1 reads); read
  // once more if Y goes to HBM.
  r.sram_bytes = p.passes * weight_bytes * (shape.weights_from_hbm ? 2 : 1) +
                 p.tiles_n * act_bytes + act_hbm + (2 * p.tiles_k - 1) * out_bytes + out_hbm;
  // Every tile-pass streams its activation rows through a full array: sum over passes = m.
  r.array_busy_cycles = p.tiles_per_pass * m;
  Cycles busiest = 0;
  for (int64_t a = 0; a < std::min(arrays, p.total_tiles); ++a) {
    busiest = std::max(busiest, RoundRobinLoad(p, arrays, a));
  }
  r.compute_cycles = busiest + p.fill_drain;
  r.memory_cycles = CeilCycles(static_cast<double>(r.hbm_bytes) / p.bytes_per_cycle);
  r.memory_bound = r.memory_cycles > r.compute_cycles;
  r.energy_j = (static_cast<double>(r.macs) * spec.energy.mac_pj +
                static_cast<double>(r.sram_bytes) * spec.energy.sram_pj_per_byte) /
               kPicoJoulesPerJoule;
  return p;
}

// Event-by-event walk of the double-buffered pipeline. One DMA engine moves the weight tiles in
// order; each tile goes to the least-loaded array; an array holds two weight buffers (the tile
// it streams and the next), so the DMA of an array's tile i+2 waits for its tile i to finish.
Cycles SimulateGemm(const NpuSpec& spec, const GemmShape& shape, const GemmPlan& p) {
  const int arrays = spec.systolic_arrays;
  std::vector<double> last_end(arrays, 0.0);  // compute end of the newest tile on each array
  std::vector<double> prev_end(arrays, 0.0);  // ... of the one before (frees a weight buffer)
  std::vector<bool> used(arrays, false);
  double dma_free = p.act_in_cycles;  // the activations are read once, before any weight
  for (int64_t pass = 0; pass < p.passes; ++pass) {
    const double slot = static_cast<double>(pass + 1 < p.passes ? p.slot_full : p.slot_last);
    for (int64_t j = 0; j < p.tiles_per_pass; ++j) {
      const int a =
          static_cast<int>(std::min_element(last_end.begin(), last_end.end()) - last_end.begin());
      const double dma =
          static_cast<double>(TileWeightBytes(spec, shape, p, j)) / p.bytes_per_cycle;
      const double dma_start = std::max(dma_free, prev_end[a]);
      dma_free = dma_start + dma;
      const double start = std::max(dma_free, last_end[a]);
      prev_end[a] = last_end[a];
      last_end[a] = start + slot;
      used[a] = true;
    }
  }
  double finish = dma_free;
  for (int a = 0; a < arrays; ++a) {
    if (used[a]) finish = std::max(finish, last_end[a] + static_cast<double>(p.fill_drain));
  }
  return CeilCycles(finish + p.out_cycles);  // outputs leave once everything has drained
}

// Closed form of SimulateGemm. A two-stage pipeline (serial DMA, then compute on parallel
// arrays) ends at the later of two critical paths:
//  - compute path: array a can start only after the DMAs of the first a+1 tiles (prologue,
//    staggered over the arrays), then runs its round-robin share of slots;
//  - memory path: all DMAs back to back, then the last tile's slot.
// Plus the epilogue (one fill/drain, then the output DMA). This is max(compute, memory) plus
// prologue and epilogue, with the prologue taken per array so few-tile GEMMs stay exact.
Cycles AnalyticGemm(const NpuSpec& spec, const GemmShape& shape, const GemmPlan& p) {
  const int64_t arrays = spec.systolic_arrays;
  double prologue = p.act_in_cycles;
  double compute_path = 0;
  for (int64_t a = 0; a < std::min(arrays, p.total_tiles); ++a) {
    prologue += static_cast<double>(TileWeightBytes(spec, shape, p, a % p.tiles_per_pass)) /
                p.bytes_per_cycle;
    compute_path =
        std::max(compute_path, prologue + static_cast<double>(RoundRobinLoad(p, arrays, a)));
  }
  const double memory_path = p.act_in_cycles + p.weight_cycles + static_cast<double>(p.slot_last);
  return CeilCycles(std::max(compute_path, memory_path) + static_cast<double>(p.fill_drain) +
                    p.out_cycles);
}

// Vector ops touch only the scratchpad, so both implementations use this closed form. Per row:
// `passes` sweeps of ceil(cols / lanes) cycles, and `reductions` of ceil(cols / lanes) partial
// sums plus a log2(lanes) adder tree; rows are spread over the vector units. The lane pipeline
// fill (log2(lanes) cycles once per op) is not modelled: it is below 10 cycles.
absl::StatusOr<NpuOpResult> VectorCost(const NpuSpec& spec, const VectorShape& shape) {
  const int op = static_cast<int>(shape.op);
  if (op < 0 || op >= kNumVectorOps) {
    return absl::InvalidArgumentError(absl::StrCat("VectorShape.op is not a vector op: ", op));
  }
  if (shape.rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("VectorShape.rows must be >= 1, got ", shape.rows));
  }
  if (shape.cols < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("VectorShape.cols must be >= 1, got ", shape.cols));
  }
  const VectorOpCost& cost = spec.vector_ops[op];
  const int64_t chunks = CeilDiv(shape.cols, spec.vector_lanes);
  const Cycles per_row =
      cost.passes * chunks + cost.reductions * (chunks + CeilLog2(spec.vector_lanes));
  NpuOpResult r;
  r.cycles = CeilDiv(shape.rows, spec.vector_units) * per_row;
  r.compute_cycles = r.cycles;
  r.vector_busy_cycles = shape.rows * per_row;
  const int64_t elements = shape.rows * shape.cols;
  const int64_t sweeps = cost.passes + cost.reductions;
  // Each sweep reads the row from the scratchpad; the result is written back once.
  r.sram_bytes = elements * spec.element_bytes * (sweeps + 1);
  r.energy_j = (static_cast<double>(elements * sweeps) * spec.energy.vector_pj_per_element_pass +
                static_cast<double>(r.sram_bytes) * spec.energy.sram_pj_per_byte) /
               kPicoJoulesPerJoule;
  if (spec.activation_traffic == ActivationTraffic::kDramRoundTrip) {
    // Only the HBM traffic counts (npu_spec.h); the lane work and its energy stay.
    r.hbm_bytes = elements * spec.element_bytes * (VectorInputs(shape.op) + 1);
    const double bytes_per_cycle = spec.hbm_bytes_per_cycle_less_refresh();
    r.memory_cycles = CeilCycles(static_cast<double>(r.hbm_bytes) / bytes_per_cycle);
    r.memory_bound = true;
    r.cycles = r.memory_cycles;
  }
  return r;
}

// The most weight-tile passes SimulateGemm walks one by one (30-50 ns each: 2-3 s). The largest
// GEMM of a served LLM (GPT3-175B's FFN over a 16k-token prefill) is ~5M; a bigger shape is
// refused instead of running for minutes (`neupims hw gemm -m 262144 -k 262144 -n 262144`).
constexpr int64_t kMaxSimulatedTiles = int64_t{1} << 26;

// GemmTiming::kBlockPipeline (npu_spec.h): the reference simulator's closed form. Counts other
// than time (MACs, scratchpad bytes, energy) are the weight-stationary plan's.
absl::StatusOr<NpuOpResult> BlockPipelineGemm(const NpuSpec& spec, const GemmShape& shape,
                                              const NpuContext& ctx) {
  ASSIGN_OR_RETURN(GemmPlan plan, PlanGemm(spec, shape, ctx));
  const int64_t eb = spec.element_bytes;
  const int64_t rows_per_cycle = CeilDiv(spec.array_rows, spec.systolic_arrays);
  const int64_t pass = plan.tiles_k * (spec.array_rows + rows_per_cycle * (plan.tiles_n - 1));
  const int64_t blocks = CeilDiv(shape.m, spec.array_rows);
  const double bytes_per_cycle = spec.hbm_bytes_per_cycle_less_refresh() * ctx.bandwidth_fraction;
  const Bytes in_bytes = (shape.weights_from_hbm ? shape.k * shape.n * eb : 0) +
                         (shape.activations_from_hbm ? shape.m * shape.k * eb : 0);
  const Bytes out_bytes = shape.activations_from_hbm ? shape.m * shape.n * eb : 0;
  const double in_cycles = static_cast<double>(in_bytes) / bytes_per_cycle;
  const double out_cycles = static_cast<double>(out_bytes) / bytes_per_cycle;
  NpuOpResult r = plan.result;
  r.hbm_bytes = in_bytes + out_bytes;
  r.compute_cycles = blocks * pass;
  r.memory_cycles = CeilCycles(in_cycles + out_cycles);
  r.memory_bound = in_cycles > static_cast<double>(pass);
  r.cycles = CeilCycles(std::max(in_cycles, static_cast<double>(pass)) +
                        static_cast<double>((blocks - 1) * pass) + out_cycles);
  return r;
}

class TiledNpuModel final : public NpuModel {
 public:
  explicit TiledNpuModel(const NpuSpec& spec) : spec_(spec) {}

  absl::StatusOr<NpuOpResult> Gemm(const GemmShape& shape, const NpuContext& ctx) const override {
    if (spec_.gemm_timing == GemmTiming::kBlockPipeline)
      return BlockPipelineGemm(spec_, shape, ctx);
    ASSIGN_OR_RETURN(GemmPlan plan, PlanGemm(spec_, shape, ctx));
    if (plan.total_tiles > kMaxSimulatedTiles) {
      return absl::InvalidArgumentError(absl::StrCat(
          "GemmShape ", shape.m, " x ", shape.k, " x ", shape.n, " is ", plan.total_tiles,
          " weight-tile passes, over the tile-by-tile simulation's limit of 2^26 (",
          kMaxSimulatedTiles,
          ", a few seconds of simulation); the analytic level gives the same schedule in closed "
          "form"));
    }
    NpuOpResult r = plan.result;
    r.cycles = SimulateGemm(spec_, shape, plan);
    return r;
  }
  absl::StatusOr<NpuOpResult> Vector(const VectorShape& shape) const override {
    return VectorCost(spec_, shape);
  }
  const NpuSpec& spec() const override { return spec_; }
  const char* name() const override { return "tiled"; }

 private:
  NpuSpec spec_;
};

class AnalyticNpuModel final : public NpuModel {
 public:
  explicit AnalyticNpuModel(const NpuSpec& spec) : spec_(spec) {}

  absl::StatusOr<NpuOpResult> Gemm(const GemmShape& shape, const NpuContext& ctx) const override {
    if (spec_.gemm_timing == GemmTiming::kBlockPipeline)
      return BlockPipelineGemm(spec_, shape, ctx);
    ASSIGN_OR_RETURN(GemmPlan plan, PlanGemm(spec_, shape, ctx));
    NpuOpResult r = plan.result;
    r.cycles = AnalyticGemm(spec_, shape, plan);
    return r;
  }
  absl::StatusOr<NpuOpResult> Vector(const VectorShape& shape) const override {
    return VectorCost(spec_, shape);
  }
  const NpuSpec& spec() const override { return spec_; }
  const char* name() const override { return "analytic"; }

 private:
  NpuSpec spec_;
};

}  // namespace

SerialGemvHead SerialGemvHeadCycles(const NpuSpec& spec, int64_t seq_len, int head_dim) {
  // The reference's fixed cost between the softmax and the first p V preload (issue 14).
  constexpr Cycles kSoftmaxHandoffCycles = 10;
  const Cycles fill = spec.array_rows + spec.array_cols - 1;
  const int64_t rows = spec.array_rows;
  const double bytes_per_cycle = spec.hbm_bytes_per_cycle_less_refresh();
  const Cycles stream =
      CeilCycles(static_cast<double>(seq_len * head_dim * spec.element_bytes) / bytes_per_cycle);
  const Cycles preload = fill + CeilDiv(rows, spec.systolic_arrays);
  SerialGemvHead h;
  h.logit = std::max(fill + seq_len / spec.systolic_arrays, stream);
  h.context = kSoftmaxHandoffCycles + std::max(preload * CeilDiv(seq_len + rows - 1, rows), stream);
  return h;
}

std::unique_ptr<NpuModel> CreateTiledNpuModel(const NpuSpec& spec) {
  return std::make_unique<TiledNpuModel>(spec);
}

std::unique_ptr<NpuModel> CreateAnalyticNpuModel(const NpuSpec& spec) {
  return std::make_unique<AnalyticNpuModel>(spec);
}

}  // namespace neupims::hw
