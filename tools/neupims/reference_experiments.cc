#include "tools/neupims/reference_experiments.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "hw/device.h"
#include "tools/workload/batch_file.h"
#include "tools/workload/workload.h"

namespace neupims::cli {
namespace {

constexpr int kBatchSizes[] = {64, 128, 256};

// One decoder layer of one decode iteration (ns), as `neupims step --layers one`.
absl::StatusOr<engine::IterationCost> LayerCost(
    engine::SystemModeKind mode, const hw::DeviceConfig& device,
    std::optional<engine::SubBatchInterleaving> sbi, std::optional<bool> dual_row_buffers,
    const std::vector<engine::Engine::StepRequest>& batch) {
  engine::EngineOptions o;
  o.model = "gpt3-7b";
  o.mode = mode;
  o.device_config = device;
  o.tp = 4;
  o.pp = 1;
  o.sub_batch_interleaving = sbi;
  o.dual_row_buffers = dual_row_buffers;
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> e, engine::Engine::Create(o));
  return e->SimulateStep(batch, /*layers=*/1, false);
}

// The three devices of one profile set.
struct Devices {
  hw::DeviceConfig npu_only, newton, neupims;
};

absl::StatusOr<Devices> LoadDevices(const std::string& suffix) {
  Devices d;
  ASSIGN_OR_RETURN(d.npu_only, hw::LoadDeviceConfig("npu-only" + suffix));
  ASSIGN_OR_RETURN(d.newton, hw::LoadDeviceConfig("newton" + suffix));
  ASSIGN_OR_RETURN(d.neupims, hw::LoadDeviceConfig("neupims" + suffix));
  return d;
}

struct Row {
  double npu_only = 0, npu_pim = 0, npu_pim_dual = 0, neupims_off = 0, neupims_on = 0;
  // Costs (Table 5): NPU-only and NeuPIMs at the better interleaving setting.
  engine::IterationCost npu_only_cost, neupims_cost;
  double neupims() const { return std::min(neupims_off, neupims_on); }
  double npu_pim_over_npu_only() const { return npu_only / npu_pim; }
  double neupims_over_npu_pim() const { return npu_pim / neupims(); }
  double neupims_over_npu_only() const { return npu_only / neupims(); }
  // Figure 13's dual-row-buffer ablation: NPU+PIM with the second row buffer alone.
  double dual_row_buffer_gain() const { return npu_pim / npu_pim_dual - 1; }
};

absl::StatusOr<Row> Measure(const Devices& d,
                            const std::vector<engine::Engine::StepRequest>& batch) {
  using engine::SubBatchInterleaving;
  using engine::SystemModeKind;
  Row r;
  ASSIGN_OR_RETURN(r.npu_only_cost, LayerCost(SystemModeKind::kNpuOnly, d.npu_only, std::nullopt,
                                              std::nullopt, batch));
  ASSIGN_OR_RETURN(engine::IterationCost npu_pim,
                   LayerCost(SystemModeKind::kNpuPim, d.newton, std::nullopt, std::nullopt, batch));
  ASSIGN_OR_RETURN(engine::IterationCost dual,
                   LayerCost(SystemModeKind::kNpuPim, d.newton, std::nullopt, true, batch));
  ASSIGN_OR_RETURN(engine::IterationCost off,
                   LayerCost(SystemModeKind::kNeuPims, d.neupims, SubBatchInterleaving::kOff,
                             std::nullopt, batch));
  ASSIGN_OR_RETURN(engine::IterationCost on,
                   LayerCost(SystemModeKind::kNeuPims, d.neupims, SubBatchInterleaving::kOn,
                             std::nullopt, batch));
  r.npu_only = r.npu_only_cost.duration_ns;
  r.npu_pim = npu_pim.duration_ns;
  r.npu_pim_dual = dual.duration_ns;
  r.neupims_off = off.duration_ns;
  r.neupims_on = on.duration_ns;
  r.neupims_cost = on.duration_ns < off.duration_ns ? std::move(on) : std::move(off);
  return r;
}

// A modelling switch, set back from the reference's choice to ours (docs/hw.md): copies the
// field from the default device of the same family.
struct Switch {
  const char* name;
  void (*to_default)(const hw::DeviceConfig& ours, hw::DeviceConfig* d);
};

constexpr Switch kSwitches[] = {
    {"PIM issue: chip-wide queue -> unlimited (pim.issue)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) { d->hbm.pim.issue = o.hbm.pim.issue; }},
    {"PIM rows: per-bank PREs + header -> one PIM_PRECHARGE (pim.timing.row_close)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) {
       d->hbm.pim.timing.row_close = o.hbm.pim.timing.row_close;
     }},
    {"PIM GEMV: fused, row released at issue -> column steps (pim.timing.gemv)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) {
       d->hbm.pim.timing.gemv = o.hbm.pim.timing.gemv;
       d->hbm.pim.timing.gemv_releases_row = o.hbm.pim.timing.gemv_releases_row;
     }},
    {"GWRITE: ordinary access -> overlapped with activations (pim.timing.gwrite)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) {
       d->hbm.pim.timing.gwrite = o.hbm.pim.timing.gwrite;
       d->hbm.pim.timing.gwrite_access_bytes = o.hbm.pim.timing.gwrite_access_bytes;
     }},
    {"PIM refresh: wait for it -> refresh early (pim.timing.refresh_guard)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) {
       d->hbm.pim.timing.refresh_guard = o.hbm.pim.timing.refresh_guard;
     }},
    {"stages: barriers -> list-scheduled (stage_barriers)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) { d->stage_barriers = o.stage_barriers; }},
    {"NPU-only attention: serial GEMV -> bandwidth-bound (npu.attention_mapping)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) {
       d->npu.attention_mapping = o.npu.attention_mapping;
     }},
    {"GEMM: block pipeline -> weight-stationary (npu.gemm_timing)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) {
       d->npu.gemm_timing = o.npu.gemm_timing;
     }},
    {"activations: DRAM round trips -> on chip (npu.activation_traffic)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) {
       d->npu.activation_traffic = o.npu.activation_traffic;
     }},
    {"NPU ops: serial -> concurrent units (npu.op_overlap)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) { d->npu.op_overlap = o.npu.op_overlap; }},
    {"scratchpad: 128 MiB -> 32 MiB (npu.sram_bytes)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) { d->npu.sram_bytes = o.npu.sram_bytes; }},
    {"refresh: rank-staggered -> all ranks (hbm.refresh_policy)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) { d->hbm.refresh = o.hbm.refresh; }},
    {"all-reduce: off -> on (tp_all_reduce)",
     [](const hw::DeviceConfig& o, hw::DeviceConfig* d) { d->tp_all_reduce = o.tp_all_reduce; }},
};

void ApplySwitch(const Switch& s, const Devices& ours, Devices* d) {
  s.to_default(ours.npu_only, &d->npu_only);
  s.to_default(ours.newton, &d->newton);
  s.to_default(ours.neupims, &d->neupims);
}

absl::StatusOr<std::vector<engine::Engine::StepRequest>> LoadBatch(int size) {
  const std::string path = absl::StrCat(workload::DatasetsDir(), "/batches/share-gpt2-bs", size,
                                        "-ms7B-tp4-pp1-clb-0.csv");
  ASSIGN_OR_RETURN(std::vector<workload::BatchRow> rows, workload::ReadBatchFile(path));
  std::vector<engine::Engine::StepRequest> batch;
  for (const workload::BatchRow& r : rows) batch.push_back({r.seq_len, r.channel.value_or(-1)});
  return batch;
}

std::string Us(double ns) { return absl::StrFormat("%.1f", ns / 1e3); }
std::string X(double ratio) { return absl::StrFormat("%.2fx", ratio); }
std::string Gain(double g) { return absl::StrFormat("%+.1f%%", 100 * g); }

// The smallest and largest of some ratios, printed "1.5-2.1x".
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double x) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  std::string Str() const { return absl::StrFormat("%.1f-%.1fx", lo, hi); }
};

std::string RatioCells(const Row& r) {
  return absl::StrCat(X(r.npu_pim_over_npu_only()), " | ", X(r.neupims_over_npu_pim()), " | ",
                      X(r.neupims_over_npu_only()), " | ", Gain(r.dual_row_buffer_gain()));
}

constexpr int kAttributionBatch = 256;

// Starts from the reference profiles and sets the switches back to ours one at a time
// (cumulatively), one table row each. The last row must equal the default devices' row: a
// difference means a profile differs from its device in something no switch covers.
// `reference` and `defaults` are the two device sets' rows at kAttributionBatch, measured for
// the main table.
absl::StatusOr<std::string> RenderAttribution(const Row& reference, const Row& defaults) {
  ASSIGN_OR_RETURN(std::vector<engine::Engine::StepRequest> batch, LoadBatch(kAttributionBatch));
  ASSIGN_OR_RETURN(const Devices ours, LoadDevices(""));
  ASSIGN_OR_RETURN(Devices d, LoadDevices("-ref"));
  std::string md;
  auto line = [&](const std::string& s) { absl::StrAppend(&md, s, "\n"); };
  line(absl::StrCat("### Attribution: the switches set back to ours one at a time (B = ",
                    kAttributionBatch, ", clb-0)"));
  line("");
  line(
      "Each row sets one more switch from the reference's choice to ours (cumulative), so the "
      "change from the row above is that switch's share of the gap. \"Dual row buffers alone\" "
      "is Figure 13's ablation: NPU+PIM with the second row buffer and nothing else.");
  line("");
  line(
      "| step | switch set to ours | NPU+PIM / NPU-only | NeuPIMs / NPU+PIM | NeuPIMs / NPU-only | "
      "dual row buffers alone |");
  line("|---|---|---|---|---|---|");
  line("| | paper | 1.50x | 1.60x | 2.40x | +69.7% |");
  Row r = reference;
  line(absl::StrCat("| 0 | none: the reference profiles | ", RatioCells(r), " |"));
  int step = 0;
  for (const Switch& s : kSwitches) {
    ApplySwitch(s, ours, &d);
    ASSIGN_OR_RETURN(r, Measure(d, batch));
    line(absl::StrCat("| ", ++step, " | ", s.name, " | ", RatioCells(r), " |"));
  }
  const double rows[2][5] = {{r.npu_only, r.npu_pim, r.npu_pim_dual, r.neupims_off, r.neupims_on},
                             {defaults.npu_only, defaults.npu_pim, defaults.npu_pim_dual,
                              defaults.neupims_off, defaults.neupims_on}};
  for (int i = 0; i < 5; ++i) {
    if (std::abs(rows[0][i] - rows[1][i]) > 1e-9 * rows[1][i]) {
      return absl::InternalError(absl::StrCat(
          "the reference profiles with every switch set to ours do not give the default "
          "devices' figures (",
          rows[0][i], " vs ", rows[1][i],
          " ns): a *-ref device differs from its device in a field no switch covers"));
    }
  }
  line(absl::StrCat("| | ours (the default devices; equal to the last row by construction) | ",
                    RatioCells(defaults), " |"));
  return md;
}

// Table 5 (NeuPIMs sec. 8.6): average HBM and system power and energy per token, NPU-only
// against NeuPIMs, per device of the TP-4 group, one layer.
std::string RenderPower(const std::vector<std::pair<bool, Row>>& rows) {
  constexpr int kDevices = 4;
  constexpr int kChannels = 32;  // HBM channels per device (Table 2)
  std::string md;
  auto line = [&](const std::string& s) { absl::StrAppend(&md, s, "\n"); };
  line(absl::StrCat("### Table 5: power and energy (B = ", kAttributionBatch,
                    ", clb-0, one layer, per device of the TP-4 group)"));
  line("");
  line(
      "HBM power is the DRAM energy behind the NPU's traffic, the PIM commands and refresh, and "
      "the background (standby plus rows held open, incl. the second row buffer) over the "
      "layer's time, per HBM channel: the paper does not say what its figures cover, and per "
      "channel ours are of the same order (a device has 32). Energy per token is split into NPU "
      "dynamic, NPU static, DRAM for NPU "
      "traffic, PIM and background (uJ per token per device). Paper: HBM 364.1 mW (NPU-only) vs "
      "634.8 mW (NeuPIMs); the whole system +1.8% power and -25% energy per token at 2.4x.");
  line("");
  line(
      "| devices | system | HBM power per channel | system power | energy per token | NPU dyn. | "
      "NPU static | "
      "DRAM | PIM | background |");
  line("|---|---|---|---|---|---|---|---|---|---|");
  auto uj = [](double j, double tokens) {
    return absl::StrFormat("%.1f", j / kDevices / tokens * 1e6);
  };
  for (const auto& [reference, r] : rows) {
    const double tokens = static_cast<double>(kAttributionBatch);
    double power[2] = {0, 0}, per_token[2] = {0, 0};
    int i = 0;
    for (const engine::IterationCost* c : {&r.npu_only_cost, &r.neupims_cost}) {
      const double s = c->duration_ns * 1e-9 * kDevices;
      const double hbm_w = (c->dram_j + c->pim_j + c->dram_background_j) / s / kChannels;
      power[i] = c->energy_j() / s;
      per_token[i] = c->energy_j() / kDevices / tokens;
      line(absl::StrCat(
          "| ", reference ? "reference" : "default", " | ", i == 0 ? "NPU-only" : "NeuPIMs", " | ",
          absl::StrFormat("%.1f mW", hbm_w * 1e3), " | ", absl::StrFormat("%.2f W", power[i]),
          " | ", absl::StrFormat("%.1f uJ", per_token[i] * 1e6), " | ",
          uj(c->npu_dynamic_j, tokens), " | ", uj(c->npu_static_j, tokens), " | ",
          uj(c->dram_j, tokens), " | ", uj(c->pim_j, tokens), " | ",
          uj(c->dram_background_j, tokens), " |"));
      ++i;
    }
    line(absl::StrCat("| ", reference ? "reference" : "default", " | NeuPIMs vs NPU-only | | ",
                      Gain(power[1] / power[0] - 1), " power | ",
                      Gain(per_token[1] / per_token[0] - 1), " energy | | | | | |"));
  }
  return md;
}

}  // namespace

absl::StatusOr<std::string> RenderReferenceResults() {
  std::string md;
  auto line = [&](const std::string& s) { absl::StrAppend(&md, s, "\n"); };
  line(std::string(kReferenceBegin));
  line("## Reference profiles: what they predict (issue 14)");
  line("");
  line(
      "Generated by `neupims experiments --reference`. One decoder layer of one decode iteration "
      "of GPT3-7B on TP 4 (`neupims step --layers one`) on the shipped `clb-0` batch files, on "
      "the default devices (`neupims`, `newton`, `npu-only`) and on the reference profiles "
      "(`neupims-ref`, `newton-ref`, `npu-only-ref`: every modelling switch of docs/hw.md set as "
      "the reference simulator sets it). Times in us. NeuPIMs is the better of sub-batch "
      "interleaving off and on; the ratios are speed-ups (paper: NPU+PIM 1.5x over NPU-only, "
      "NeuPIMs 1.6x over NPU+PIM and 2.4x over NPU-only). The reference simulator's own cycles "
      "on these batches are kept out of this repository; these are predictions from the "
      "switches alone. Figures 12-14 and Table 4 on the reference profiles: "
      "[results-reference.md](results-reference.md) (`neupims experiments "
      "--reference-devices`).");
  line("");
  line(
      "| B | devices | NPU-only | NPU+PIM | NeuPIMs, SBI off | NeuPIMs, SBI on | NPU+PIM / "
      "NPU-only | NeuPIMs / NPU+PIM | NeuPIMs / NPU-only |");
  line("|---|---|---|---|---|---|---|---|---|");
  std::vector<std::string> crossover;
  std::vector<std::pair<bool, Row>> at_attribution_batch;  // (reference?, row)
  // Ranges over the batch sizes of two ratios, [0] default devices, [1] reference profiles.
  std::array<Range, 2> pim_over_npu, neupims_over_pim;
  for (const char* suffix : {"", "-ref"}) {
    bool before = true;  // SBI has lost at every batch so far
    std::optional<int> first_win;
    for (int size : kBatchSizes) {
      ASSIGN_OR_RETURN(std::vector<engine::Engine::StepRequest> batch, LoadBatch(size));
      ASSIGN_OR_RETURN(Devices devices, LoadDevices(suffix));
      ASSIGN_OR_RETURN(Row r, Measure(devices, batch));
      if (size == kAttributionBatch) at_attribution_batch.push_back({*suffix != 0, r});
      line(absl::StrCat("| ", size, " | ", *suffix ? "reference" : "default", " | ", Us(r.npu_only),
                        " | ", Us(r.npu_pim), " | ", Us(r.neupims_off), " | ", Us(r.neupims_on),
                        " | ", X(r.npu_pim_over_npu_only()), " | ", X(r.neupims_over_npu_pim()),
                        " | ", X(r.neupims_over_npu_only()), " |"));
      pim_over_npu[*suffix != 0].Add(r.npu_pim_over_npu_only());
      neupims_over_pim[*suffix != 0].Add(r.neupims_over_npu_pim());
      if (before && r.neupims_on < r.neupims_off) first_win = size;
      before = before && !(r.neupims_on < r.neupims_off);
    }
    crossover.push_back(
        absl::StrCat(*suffix ? "reference profiles: " : "default devices: ",
                     first_win ? absl::StrCat("interleaving first wins at B = ", *first_win)
                               : std::string("interleaving never wins up to B = 256")));
  }
  line("");
  line(
      absl::StrCat("**Sub-batch interleaving crossover** (one layer, so the interleaved figure "
                   "includes the two-sub-batch pipeline's fill and drain rather than its steady "
                   "per-layer period): ",
                   crossover[0], "; ", crossover[1], "."));
  line("");
  // at_attribution_batch holds the default row, then the reference one (the suffix loop).
  ASSIGN_OR_RETURN(std::string attribution, RenderAttribution(at_attribution_batch[1].second,
                                                              at_attribution_batch[0].second));
  absl::StrAppend(&md, attribution);
  line("");
  absl::StrAppend(&md, RenderPower(at_attribution_batch));
  line("");
  line(absl::StrCat(
      "Where the profiles stand against the paper: under the stated mapping of the reference's "
      "NPU-only attention (serialised M = 1 systolic GEMVs, about 1,400 cycles per head at "
      "s = 310 against 166 to stream its K and V), the NPU-only reference is compute-bound on "
      "attention and NPU+PIM comes out ",
      pim_over_npu[1].Str(),
      " faster where the paper reports 1.5x: the largest gap, and the "
      "first thing the comparison with the reference's measured cycles will test. The chip-wide "
      "PIM instruction queue is what separates NPU+PIM from NeuPIMs (",
      neupims_over_pim[1].Str(), " here against the paper's 1.6x; ", neupims_over_pim[0].Str(),
      " on our defaults). The PIM side of the profiles times the reference's DRAM-level choices "
      "(pim.timing: a 143-cycle row switch of per-bank precharges, the NeuPIMs GEMV releasing "
      "its row at issue, GWRITE as an ordinary access, PIM work waiting for refresh). Stage "
      "barriers (A, B, E; "
      "A-F over two layers interleaved: `neupims step --layers two`) are `stage_barriers`."));
  line("");
  line(std::string(kReferenceEnd));
  return md;
}

}  // namespace neupims::cli
