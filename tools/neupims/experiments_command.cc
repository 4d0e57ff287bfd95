#include "tools/neupims/experiments_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/json_file.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/cnn_experiments.h"
#include "tools/neupims/reference_experiments.h"
#include "tools/neupims/shard.h"
#include "tools/neupims/step_eval.h"
#include "tools/workload/range_flag.h"
#include "tools/workload/workload.h"

namespace neupims::cli {
namespace {

using nlohmann::json;

struct ExperimentFlags {
  std::string out = "docs/results.md";
  std::string json_out;
  int samples = 10;
  uint64_t seed = 1;
  bool quick = false;
  bool offload = false;            // only the CNN offload section (DNNVM tables)
  bool reference = false;          // only the reference-profile section (issue 14)
  bool reference_devices = false;  // every figure on the *-ref devices (issue 14)
  int jobs = DefaultJobs();        // engine configurations simulated at once
  bool no_progress = false;
  std::string shard = "0/1";       // --shard i/N: run every N-th engine configuration
  std::string shard_out;           // write that shard's results here instead of Markdown
  std::vector<std::string> merge;  // render from these shard files instead of running
};

constexpr char kShardFormat[] = "neupims-experiments-shard/1";

// The options of one experiment point: `model` in `mode` with no ablation override (the
// callers set those they study); the batch is never capped. `reference`: on the mode's
// reference profile (`neupims-ref`, ...) instead of its default device.
engine::EngineOptions PointOptions(const std::string& model, engine::SystemModeKind mode,
                                   bool reference) {
  engine::EngineOptions o;
  o.model = model;
  o.mode = mode;
  o.max_batch = 1 << 14;
  if (reference) o.device = engine::SystemModeFor(mode).default_device() + "-ref";
  return o;
}

// One engine configuration and the batch sets evaluated on it, in order. Runs share nothing
// and each builds its own engine (engines are not thread-safe), so they run in parallel; an
// engine sees the same sequence of steps as in a serial run, so results do not depend on --jobs.
struct EngineRun {
  engine::EngineOptions options;
  std::vector<const Batches*> points;
  absl::Status engine_status;       // why the engine could not be built
  std::vector<StepResult> results;  // one per point when it was built
};

void Execute(EngineRun& run) {
  auto e = engine::Engine::Create(run.options);
  if (!e.ok()) {
    run.engine_status = e.status();
    return;
  }
  for (const Batches* b : run.points) run.results.push_back(Evaluate(**e, *b));
}

// Progress is a line redrawn with '\r', so only for a terminal: in a log file or a CI capture
// the carriage returns would pile up into one unreadable line.
bool ShowProgress(const ExperimentFlags& f) { return !f.no_progress && isatty(STDERR_FILENO); }

void ExecuteAll(std::vector<EngineRun>& runs, const Shard& shard, int jobs, bool progress) {
  std::vector<int> owned;
  for (int i = 0; i < static_cast<int>(runs.size()); ++i) {
    if (shard.Owns(i)) owned.push_back(i);
  }
  std::atomic<int> done = 0;
  ParallelFor(static_cast<int>(owned.size()), jobs, [&](int k) {
    Execute(runs[owned[k]]);
    const int n = ++done;
    if (progress) {
      std::fprintf(stderr, "\rexperiments: %d of %zu engine configurations        ", n,
                   owned.size());
    }
  });
  if (progress) std::fprintf(stderr, "\r%*s\r", 60, "");
}

// What identifies a run's inputs: shards merge only with shards of the same settings.
json ShardSettings(const ExperimentFlags& f) {
  return {{"quick", f.quick},
          {"samples", f.samples},
          {"seed", f.seed},
          {"reference_devices", f.reference_devices}};
}

absl::Status WriteShard(const ExperimentFlags& f, const Shard& shard,
                        const std::vector<EngineRun>& runs) {
  json out = {{"format", kShardFormat},
              {"settings", ShardSettings(f)},
              {"shard", {{"index", shard.index}, {"count", shard.count}}},
              {"runs", json::array()}};
  for (int i = 0; i < static_cast<int>(runs.size()); ++i) {
    if (!shard.Owns(i)) continue;
    json results = json::array();
    for (const StepResult& r : runs[i].results) results.push_back(ToJson(r));
    out["runs"].push_back({{"index", i},
                           {"engine_code", static_cast<int>(runs[i].engine_status.code())},
                           {"engine_error", std::string(runs[i].engine_status.message())},
                           {"results", results}});
  }
  return WriteFile(f.shard_out, out.dump(1) + "\n");
}

// One shard file's runs into `runs`; each run exactly once over all files.
absl::Status LoadShard(const ExperimentFlags& f, const std::string& path, const json& j,
                       std::vector<EngineRun>& runs, std::vector<bool>& seen) {
  if (j.value("format", "") != kShardFormat) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an experiments shard file"));
  }
  if (j.at("settings") != ShardSettings(f)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": made with other settings ",
                                                   j.at("settings").dump(),
                                                   " (give the same --quick/--samples/--seed)"));
  }
  for (const json& r : j.at("runs")) {
    const int64_t i = r.at("index").get<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(runs.size()) || seen[i]) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": run ", i, " unknown or repeated"));
    }
    seen[i] = true;
    const int code = r.at("engine_code").get<int>();
    if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": run ", i, ": bad engine_code ", code));
    }
    runs[i].engine_status =
        absl::Status(static_cast<absl::StatusCode>(code), r.at("engine_error").get<std::string>());
    for (const json& x : r.at("results")) {
      ASSIGN_OR_RETURN(StepResult step, StepResultFromJson(x));
      runs[i].results.push_back(step);
    }
  }
  return absl::OkStatus();
}

// Fills every run's results from shard files of these settings; each run exactly once.
absl::Status LoadShards(const ExperimentFlags& f, std::vector<EngineRun>& runs) {
  std::vector<bool> seen(runs.size(), false);
  for (const std::string& path : f.merge) {
    ASSIGN_OR_RETURN(const json j, ReadStrictJsonFile(path));
    RETURN_IF_ERROR(CatchJsonErrors(path, [&] { return LoadShard(f, path, j, runs, seen); }));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!seen[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("engine configuration ", i, " is in no shard file (a shard is missing)"));
    }
  }
  return absl::OkStatus();
}

std::string Fmt(double v, int digits = 0) { return absl::StrFormat("%.*f", digits, v); }

// Regenerates only one marked section of `out` (between `begin` and `end`), keeping the rest.
int RunSectionExperiments(const std::string& out, absl::StatusOr<std::string> (*render)(),
                          absl::string_view begin, absl::string_view end, const char* what) {
  absl::StatusOr<std::string> section = render();
  if (!section.ok()) return ReportError(section.status());
  absl::StatusOr<std::string> old = ReadFile(out);
  if (!old.ok() && !absl::IsNotFound(old.status())) return ReportError(old.status());
  const std::string text = SpliceMarkedSection(old.ok() ? *old : "", *section, begin, end);
  if (absl::Status s = WriteFile(out, text); !s.ok()) return ReportError(s);
  std::printf("wrote the %s section of %s\n", what, out.c_str());
  return 0;
}

// Writes the Markdown (and the raw JSON when asked) and prints the three average ratios.
int WriteResults(const ExperimentFlags& f, const std::string& md, const json& raw, double wall_s,
                 double avg1, double avg2, double avg3) {
  if (absl::Status s = WriteFile(f.out, md); !s.ok()) return ReportError(s);
  if (!f.json_out.empty()) {
    if (absl::Status s = WriteFile(f.json_out, absl::StrCat(raw.dump(2), "\n")); !s.ok()) {
      return ReportError(s);
    }
  }
  std::printf("wrote %s (%.1f s)\n", f.out.c_str(), wall_s);
  std::printf("NPU+PIM / NPU-only %.2fx, NeuPIMs / NPU+PIM %.2fx, NeuPIMs / NPU-only %.2fx\n", avg1,
              avg2, avg3);
  return 0;
}

int RunExperiments(const ExperimentFlags& f) {
  if (f.offload) {
    return RunSectionExperiments(f.out, &RenderOffloadResults, kOffloadBegin, kOffloadEnd,
                                 "CNN offload");
  }
  if (f.reference) {
    return RunSectionExperiments(f.out, &RenderReferenceResults, kReferenceBegin, kReferenceEnd,
                                 "reference-profile");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> models = {"gpt3-7b", "gpt3-13b", "gpt3-30b", "gpt3-175b"};
  const std::vector<std::string> datasets = {"alpaca", "sharegpt"};
  const std::vector<int> batch_sizes =
      f.quick ? std::vector<int>{64, 256} : std::vector<int>{64, 128, 256, 384, 512};
  using engine::SystemModeKind;
  const std::vector<SystemModeKind> modes = {SystemModeKind::kNpuOnly, SystemModeKind::kNpuPim,
                                             SystemModeKind::kNeuPims};
  const int samples = f.quick ? 2 : f.samples;
  json raw;

  // Steady-state batches per (dataset, batch size), shared by every mode and model so modes are
  // compared on identical batches.
  std::map<std::pair<std::string, int>, std::vector<std::vector<engine::Engine::StepRequest>>>
      batches;
  std::map<std::string, workload::LoadReport> reports;
  for (const std::string& ds : datasets) {
    workload::LoadReport rep;
    auto lengths = workload::LoadNamedDataset(ds, {2048}, &rep);
    if (!lengths.ok()) return ReportError(lengths.status());
    reports[ds] = rep;
    BatchSampler sampler(*lengths, f.seed);
    for (int bs : batch_sizes) {
      for (int s = 0; s < samples; ++s) batches[{ds, bs}].push_back(sampler.Sample(bs));
    }
  }

  // Every engine configuration of the figures, run in parallel, then read back in order.
  std::vector<EngineRun> runs;
  // ---- Figure 12 + Table 4 -----------------------------------------------------------------
  for (const std::string& model : models) {
    for (const SystemModeKind mode_kind : modes) {
      EngineRun run{PointOptions(model, mode_kind, f.reference_devices)};
      for (const std::string& ds : datasets) {
        for (int bs : batch_sizes) run.points.push_back(&batches[{ds, bs}]);
      }
      runs.push_back(std::move(run));
    }
  }
  // ---- Figure 13: ablation on GPT3-7B, ShareGPT -------------------------------------------
  using scheduler::ChannelPolicy;
  using SBI = engine::SubBatchInterleaving;
  struct Variant {
    std::string name;
    bool dual;
    ChannelPolicy policy;
    SBI sbi;
  };
  const std::vector<Variant> variants = {
      {"NPU+PIM", false, ChannelPolicy::kRoundRobin, SBI::kOff},
      {"+DRB", true, ChannelPolicy::kRoundRobin, SBI::kOff},
      {"+DRB+GMLBP", true, ChannelPolicy::kMinLoad, SBI::kOff},
      {"+DRB+GMLBP+SBI", true, ChannelPolicy::kMinLoad, SBI::kOn}};
  for (const Variant& v : variants) {
    engine::EngineOptions o =
        PointOptions("gpt3-7b", SystemModeKind::kNeuPims, f.reference_devices);
    o.dual_row_buffers = v.dual;
    o.channel_policy = v.policy;
    o.sub_batch_interleaving = v.sbi;
    EngineRun run{o};
    for (int bs : batch_sizes) run.points.push_back(&batches[{"sharegpt", bs}]);
    runs.push_back(std::move(run));
  }
  // ---- Figure 14: TP/PP with 256 requests on the model's Table 3 device count ------------
  auto combos_for = [](const std::string& model) -> std::vector<std::pair<int, int>> {
    if (model == "gpt3-175b") return {{32, 1}, {16, 2}, {8, 4}, {4, 8}};
    if (model == "gpt3-30b") return {{8, 1}, {4, 2}, {2, 4}, {1, 8}};
    return {{4, 1}, {2, 2}, {1, 4}};
  };
  for (const std::string& model : models) {
    for (auto [tp, pp] : combos_for(model)) {
      engine::EngineOptions o = PointOptions(model, SystemModeKind::kNeuPims, f.reference_devices);
      o.tp = tp;
      o.pp = pp;
      EngineRun run{o};
      for (const std::string& ds : datasets) run.points.push_back(&batches[{ds, 256}]);
      runs.push_back(std::move(run));
    }
  }
  // Table 4 also with interleaving forced on (the paper's NeuPIMs always interleaves).
  {
    engine::EngineOptions o =
        PointOptions("gpt3-30b", SystemModeKind::kNeuPims, f.reference_devices);
    o.sub_batch_interleaving = engine::SubBatchInterleaving::kOn;
    EngineRun run{o};
    run.points.push_back(&batches[{"sharegpt", 256}]);
    runs.push_back(std::move(run));
  }
  absl::StatusOr<Shard> shard = ParseShard(f.shard);
  if (!shard.ok()) return ReportError(shard.status());
  if (shard->count > 1 && f.shard_out.empty()) {
    return ReportError(absl::InvalidArgumentError(
        "--shard without --shard-out: a shard alone cannot fill the tables; write it with "
        "--shard-out and merge the shard files with --merge"));
  }
  if (!f.merge.empty()) {
    if (absl::Status s = LoadShards(f, runs); !s.ok()) return ReportError(s);
  } else {
    ExecuteAll(runs, *shard, f.jobs, ShowProgress(f));
  }
  if (!f.shard_out.empty()) {
    if (absl::Status s = WriteShard(f, *shard, runs); !s.ok()) return ReportError(s);
    std::fprintf(stderr, "experiments: shard %d/%d -> %s\n", shard->index, shard->count,
                 f.shard_out.c_str());
    return 0;
  }

  auto next_run = runs.begin();
  std::map<std::tuple<std::string, std::string, int, std::string>, StepResult> fig12;
  for (const std::string& model : models) {
    for (const SystemModeKind mode_kind : modes) {
      const std::string mode = engine::ToString(mode_kind);
      const EngineRun& run = *next_run++;
      if (!run.engine_status.ok()) return ReportError(run.engine_status);
      auto result = run.results.begin();
      for (const std::string& ds : datasets) {
        for (int bs : batch_sizes) fig12[{model, ds, bs, mode}] = *result++;
      }
    }
  }
  std::map<std::pair<std::string, int>, StepResult> fig13;
  for (const Variant& v : variants) {
    const EngineRun& run = *next_run++;
    if (!run.engine_status.ok()) return ReportError(run.engine_status);
    auto result = run.results.begin();
    for (int bs : batch_sizes) fig13[{v.name, bs}] = *result++;
  }
  std::map<std::tuple<std::string, std::string, int, int>, StepResult> fig14;
  for (const std::string& model : models) {
    for (auto [tp, pp] : combos_for(model)) {
      const EngineRun& run = *next_run++;
      auto result = run.results.begin();
      for (const std::string& ds : datasets) {
        StepResult r;
        if (!run.engine_status.ok()) {
          r.error = std::string(run.engine_status.message());
        } else {
          r = *result++;
        }
        fig14[{model, ds, tp, pp}] = r;
      }
    }
  }
  if (!next_run->engine_status.ok()) return ReportError(next_run->engine_status);
  const StepResult table4_sbi = next_run->results.front();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // ---- Write docs/results.md ---------------------------------------------------------------
  std::string md;
  auto line = [&](const std::string& s) { absl::StrAppend(&md, s, "\n"); };
  line(f.reference_devices
           ? "# Results on the reference profiles: the NeuPIMs experiments with the reference "
             "simulator's modelling choices"
           : "# Results: the NeuPIMs experiments, reproduced from first principles");
  line("");
  if (f.reference_devices) {
    line(
        "Every figure of docs/results.md on the reference profiles (`npu-only-ref`, "
        "`newton-ref`, `neupims-ref`: every modelling switch of docs/hw.md set as the reference "
        "NeuPIMs simulator sets it, issue 14) instead of the default devices; what each switch "
        "moves is the attribution table of docs/results.md. Predictions from the switches "
        "alone: nothing here is fitted to the reference's measured cycles.");
    line("");
  }
  line(std::string("Generated by `neupims experiments") +
       (f.reference_devices ? " --reference-devices" : "") + "` (" +
       std::string(f.quick ? "quick mode" : absl::StrCat(samples, " batches per point")) +
       ", seed " + std::to_string(f.seed) + ", " + Fmt(wall_s, 1) +
       " s) from the shipped configs (`configs/`) and datasets (`../shared/datasets/`). "
       "Regenerate with `build/release/tools/neupims experiments" +
       (f.reference_devices ? " --reference-devices" : "") +
       "`. Every number comes from the hardware models of `docs/hw.md` and the engine of "
       "`docs/serving.md`; nothing is calibrated against the paper.");
  line("");
  line(
      "**Method** (as NeuPIMs sec. 8.1): throughput of the generation phase on decode batches "
      "sampled in steady state from each dataset (a request is seen with probability "
      "proportional to its output length, at a uniform point of its generation; contexts over "
      "2048 tokens filtered: ShareGPT kept " +
      FormatCount(static_cast<double>(reports["sharegpt"].kept)) + " of " +
      FormatCount(static_cast<double>(reports["sharegpt"].rows)) + " rows, Alpaca " +
      FormatCount(static_cast<double>(reports["alpaca"].kept)) + " of " +
      FormatCount(static_cast<double>(reports["alpaca"].rows)) +
      "). Each point simulates one full decode iteration of the whole model on the device "
      "group (Table 3 TP/PP) with `neupims step`'s machinery and reports tokens/s; NPU-only "
      "runs the attention GEMVs on the NPU, NPU+PIM is Newton in blocked mode with "
      "round-robin channels, NeuPIMs has dual row buffers, min-load bin packing and "
      "sub-batch interleaving. Devices talk over a 64 GB/s PCIe-class link (all-reduce is "
      "modelled; the paper's simulator does not model communication).");
  line("");
  line("## Figure 12: throughput (tokens/s)");
  line("");
  double sum_pim_over_npu = 0, sum_neu_over_pim = 0, sum_neu_over_npu = 0;
  int ratio_n = 0;
  for (const std::string& ds : datasets) {
    line(absl::StrCat("### ", ds == "sharegpt" ? "ShareGPT" : "Alpaca"));
    line("");
    line(
        "| model | batch | NPU-only | NPU+PIM | NeuPIMs | NPU+PIM / NPU-only | NeuPIMs / NPU+PIM | "
        "NeuPIMs / NPU-only |");
    line("|---|---|---|---|---|---|---|---|");
    for (const std::string& model : models) {
      for (int bs : batch_sizes) {
        const StepResult& a = fig12[{model, ds, bs, "npu-only"}];
        const StepResult& b = fig12[{model, ds, bs, "npu+pim"}];
        const StepResult& c = fig12[{model, ds, bs, "neupims"}];
        if (!a.ok || !b.ok || !c.ok) {
          line(absl::StrCat("| ", model, " | ", bs, " | n/a: ", a.error, b.error, c.error,
                            " | | | | | |"));
          continue;
        }
        sum_pim_over_npu += b.tokens_per_s / a.tokens_per_s;
        sum_neu_over_pim += c.tokens_per_s / b.tokens_per_s;
        sum_neu_over_npu += c.tokens_per_s / a.tokens_per_s;
        ++ratio_n;
        line(absl::StrFormat("| %s | %d | %s | %s | %s | %.2fx | %.2fx | %.2fx |", model, bs,
                             FormatCount(a.tokens_per_s), FormatCount(b.tokens_per_s),
                             FormatCount(c.tokens_per_s), b.tokens_per_s / a.tokens_per_s,
                             c.tokens_per_s / b.tokens_per_s, c.tokens_per_s / a.tokens_per_s));
        raw["figure12"].push_back({{"model", model},
                                   {"dataset", ds},
                                   {"batch", bs},
                                   {"npu_only", a.tokens_per_s},
                                   {"npu_pim", b.tokens_per_s},
                                   {"neupims", c.tokens_per_s}});
      }
    }
    line("");
  }
  const double avg1 = ratio_n ? sum_pim_over_npu / ratio_n : 0;
  const double avg2 = ratio_n ? sum_neu_over_pim / ratio_n : 0;
  const double avg3 = ratio_n ? sum_neu_over_npu / ratio_n : 0;
  line("| average over all points | ours | paper |");
  line("|---|---|---|");
  line(absl::StrFormat("| NPU+PIM over NPU-only | %.2fx | 1.5x |", avg1));
  line(absl::StrFormat("| NeuPIMs over NPU+PIM | %.2fx | 1.6x |", avg2));
  line(absl::StrFormat("| NeuPIMs over NPU-only | %.2fx | 2.4x |", avg3));
  line("");

  line("## Table 4: utilisation, GPT3-30B, batch 256, ShareGPT");
  line("");
  line(
      "| resource | NPU-only (ours / paper) | NPU+PIM (ours / paper) | NeuPIMs (ours / paper) | "
      "NeuPIMs, interleaving forced (ours) |");
  line("|---|---|---|---|---|");
  const StepResult& u0 = fig12[{"gpt3-30b", "sharegpt", 256, "npu-only"}];
  const StepResult& u1 = fig12[{"gpt3-30b", "sharegpt", 256, "npu+pim"}];
  const StepResult& u2 = fig12[{"gpt3-30b", "sharegpt", 256, "neupims"}];
  if (u0.ok && u1.ok && u2.ok) {
    const StepResult& u3 = table4_sbi;
    line(absl::StrFormat("| NPU (systolic) | %s / 12.3%% | %s / 28.0%% | %s / 64.9%% | %s |",
                         FormatPercent(u0.npu), FormatPercent(u1.npu), FormatPercent(u2.npu),
                         FormatPercent(u3.npu)));
    line(absl::StrFormat("| PIM | - / - | %s / 17.0%% | %s / 26.4%% | %s |", FormatPercent(u1.pim),
                         FormatPercent(u2.pim), FormatPercent(u3.pim)));
    line(absl::StrFormat("| HBM bandwidth (NPU) | %s / 67.6%% | %s / 27.4%% | %s / 85.4%% | %s |",
                         FormatPercent(u0.bw), FormatPercent(u1.bw), FormatPercent(u2.bw),
                         FormatPercent(u3.bw)));
    line(absl::StrFormat("| tokens/s | %s | %s | %s | %s |", FormatCount(u0.tokens_per_s),
                         FormatCount(u1.tokens_per_s), FormatCount(u2.tokens_per_s),
                         FormatCount(u3.tokens_per_s)));
    raw["table4"] = {{"npu", {u0.npu, u1.npu, u2.npu}},
                     {"pim", {0, u1.pim, u2.pim}},
                     {"bandwidth", {u0.bw, u1.bw, u2.bw}}};
  }
  line("");
  line(
      "PIM utilisation is the fraction of time the PIM MAC datapath of a channel computes "
      "(column steps x tCCD_L over the iteration); NPU utilisation is MACs over the systolic "
      "arrays' peak; HBM bandwidth counts the NPU's own traffic over the device's peak.");
  line("");

  line("## Figure 13: ablation, GPT3-7B, ShareGPT (throughput over NPU+PIM)");
  line("");
  {
    std::string header = "| variant |";
    std::string sep = "|---|";
    for (int bs : batch_sizes) {
      absl::StrAppend(&header, " B=", bs, " |");
      absl::StrAppend(&sep, "---|");
    }
    line(header);
    line(sep);
    for (const Variant& v : variants) {
      std::string row = "| " + v.name + " |";
      for (int bs : batch_sizes) {
        const StepResult& base = fig13[{"NPU+PIM", bs}];
        const StepResult& r = fig13[{v.name, bs}];
        absl::StrAppend(&row, r.ok && base.ok
                                  ? absl::StrFormat(" %.2fx |", r.tokens_per_s / base.tokens_per_s)
                                  : " n/a |");
        raw["figure13"].push_back(
            {{"variant", v.name}, {"batch", bs}, {"tokens_per_s", r.tokens_per_s}});
      }
      line(row);
    }
  }
  line("");
  line(
      "Paper: dual row buffers +69.7% on average; min-load bin packing always helps; "
      "sub-batch interleaving loses at small batches and wins from B=256.");
  line("");

  line("## Figure 14: tensor vs pipeline parallelism, 256 requests (NeuPIMs, tokens/s)");
  line("");
  line(
      "Each model on its Table 3 device count (GPT3-7B/13B: 4, GPT3-30B: 8, GPT3-175B: 32), "
      "split every way that divides its heads and layers.");
  line("");
  for (const std::string& model : models) {
    std::string header = "| " + model + " |";
    std::string sep = "|---|";
    for (auto [tp, pp] : combos_for(model)) {
      absl::StrAppend(&header, " (TP ", tp, ", PP ", pp, ") |");
      absl::StrAppend(&sep, "---|");
    }
    line(header);
    line(sep);
    for (const std::string& ds : datasets) {
      std::string row = absl::StrCat("| ", ds, " |");
      for (auto [tp, pp] : combos_for(model)) {
        const StepResult& r = fig14[{model, ds, tp, pp}];
        absl::StrAppend(&row, r.ok ? " " + FormatCount(r.tokens_per_s) + " |" : " does not fit |");
        raw["figure14"].push_back({{"model", model},
                                   {"dataset", ds},
                                   {"tp", tp},
                                   {"pp", pp},
                                   {"tokens_per_s", r.ok ? r.tokens_per_s : 0.0}});
      }
      line(row);
    }
    line("");
  }
  line(
      "Paper: tensor parallelism beats pipeline parallelism for every model, because it keeps "
      "the per-device batch large; throughput falls as PP grows.");
  line("");
  // Numbers the discussion quotes.
  auto ratio = [&](const std::string& model, const std::string& ds, int bs, const char* num,
                   const char* den) {
    const StepResult& x = fig12[{model, ds, bs, num}];
    const StepResult& y = fig12[{model, ds, bs, den}];
    return x.ok && y.ok ? x.tokens_per_s / y.tokens_per_s : 0.0;
  };
  const int big = batch_sizes.back();
  const double share_7b = ratio("gpt3-7b", "sharegpt", big, "npu+pim", "npu-only");
  const double alpaca_7b = ratio("gpt3-7b", "alpaca", big, "npu+pim", "npu-only");
  const double neu_7b_big = ratio("gpt3-7b", "sharegpt", big, "neupims", "npu+pim");
  const double neu_7b_64 = ratio("gpt3-7b", "sharegpt", batch_sizes.front(), "neupims", "npu+pim");
  const double neu_175_big = ratio("gpt3-175b", "sharegpt", big, "neupims", "npu+pim");
  const StepResult& drb = fig13[{"+DRB", big}];
  const StepResult& base13 = fig13[{"NPU+PIM", big}];
  const StepResult& gm = fig13[{"+DRB+GMLBP", big}];
  if (f.reference_devices) {
    // The discussion and the attribution of the gaps live in docs/results.md; the device
    // independent sections (CNN offload, the reference section itself) are not repeated.
    line(
        "What moves these figures away from docs/results.md, switch by switch, is the "
        "attribution table in its \"Reference profiles\" section.");
    return WriteResults(f, md, raw, wall_s, avg1, avg2, avg3);
  }
  line("## Discussion of the differences");
  line("");
  line(
      "The paper's numbers come from a cycle-level simulator that runs one decoder layer of one "
      "iteration, ignores pipeline parallelism and inter-device communication, and gives the "
      "NPU a ~131 MB scratchpad (its configuration's value); ours run every layer of the device "
      "group with the effects below. Where the two differ, these are the reasons.");
  line("");
  line(absl::StrFormat(
      "- **NPU+PIM over NPU-only: ours %.2fx on average, paper 1.5x.** Offloading attention to "
      "PIM pays off in proportion to attention's share of an iteration. With ShareGPT's long "
      "contexts on GPT3-7B at B=%d we measure %.2fx, the paper's figure; with Alpaca's short "
      "contexts (~70 tokens) the attention is a few percent of the work and we measure %.2fx. "
      "For the pipeline-parallel models (GPT3-30B, 175B) every micro-batch re-streams its stage's "
      "weights, so the NPU's GEMMs dominate and the offload matters less. The paper also finds "
      "larger gains on ShareGPT (sec. 8.2: longer sequences); its simulator runs a single layer "
      "without the pipeline, which gives attention a larger share on both datasets.",
      avg1, big, share_7b, alpaca_7b));
  line(absl::StrFormat(
      "- **NeuPIMs over NPU+PIM: ours %.2fx on average, paper 1.6x.** On GPT3-7B/ShareGPT it "
      "grows from %.2fx at B=%d to %.2fx at B=%d, the paper's trend. Three first-principles "
      "effects keep it lower at moderate batches: (1) each sub-batch runs its own GEMMs, so a "
      "layer's weights (~100 MB per device for GPT3-7B/TP4, more than a 32 MiB scratchpad) are "
      "streamed twice per iteration and a 128-token sub-batch GEMM is bandwidth-bound; "
      "(2) while the PIM computes, its grouped activations use most of each die's tFAW budget, "
      "leaving the NPU ~84%% of a channel's bandwidth (docs/hw.md); (3) interleaving is only "
      "enabled from %d requests per micro-batch (the reference's guidance; below it interleaving "
      "loses, Figure 13), so pipeline-parallel models at small batches run without it "
      "(GPT3-175B at B=%d: %.2fx).",
      avg2, neu_7b_64, batch_sizes.front(), neu_7b_big, big, 256, big, neu_175_big));
  {
    // Points where NeuPIMs loses to NPU+PIM (the paper: it never does, sec. 8.2).
    std::vector<std::string> losses;
    for (const auto& [key, c] : fig12) {
      const auto& [model, ds, bs, mode] = key;
      if (mode != "neupims") continue;
      const double r = ratio(model, ds, bs, "neupims", "npu+pim");
      if (c.ok && r > 0 && r < 0.995) {
        losses.push_back(absl::StrFormat("%s, %s, B=%d: %.2fx", model,
                                         ds == "sharegpt" ? "ShareGPT" : "Alpaca", bs, r));
      }
    }
    if (!losses.empty()) {
      line(absl::StrCat(
          "- **Where NeuPIMs loses to NPU+PIM** (the paper: never, sec. 8.2): ",
          absl::StrJoin(losses, "; "),
          ". Automatic interleaving switches on once a micro-batch holds 256 requests (pipeline "
          "parallelism halves B=512), but with Alpaca's ~70-token contexts the attention is too "
          "short to hide the other sub-batch's GEMMs, while each sub-batch streams the stage's "
          "weights once more (effect (1) above). Compare `neupims step --model gpt3-30b --batch "
          "512 --seq-len 70` with `--sub-batch auto` and `--sub-batch off`. The threshold is the "
          "reference's guidance and is kept, not tuned to these points."));
    }
  }
  line(absl::StrFormat(
      "- **Dual row buffers alone (Figure 13): ours +%.0f%%, paper +69.7%%.** Without sub-batch "
      "interleaving the NPU and the PIM of one batch still wait for each other (QKV -> "
      "attention -> projection); what the second row buffer buys is the per-head softmax overlap "
      "of sec. 6.1 and the shorter NeuPIMs command stream. The paper's large gain implies a "
      "blocked baseline much slower than Table 2's timing gives (its Newton baseline drains the "
      "MEM queue before every PIM phase and issues only PIM commands in PIM mode). Min-load bin "
      "packing adds %.0f%% on top (the paper: always positive).",
      base13.ok && drb.ok ? 100 * (drb.tokens_per_s / base13.tokens_per_s - 1) : 0.0,
      gm.ok && drb.ok ? 100 * (gm.tokens_per_s / drb.tokens_per_s - 1) : 0.0));
  line(
      "- **Utilisation (Table 4).** GPT3-30B runs with PP 2, so B=256 is two micro-batches of "
      "128 and auto interleaving stays off; the forced column shows interleaving anyway. Our NPU "
      "utilisation counts MACs over peak; the reference simulator counts busy array cycles and "
      "charges whole 128-row tiles, which reads higher for the same work. Our PIM utilisation "
      "is the MAC datapath's duty cycle (activation, GWRITE and refresh time excluded).");
  line(
      "- **Refresh and the NPU (a known deviation).** The NPU streams from HBM at the full "
      "peak (`npu.hbm_bytes_per_cycle`) in these figures: all-bank refresh blocks each channel "
      "tRFC of every tREFI cycles (260 of 3,900 on the shipped HBM2, 6.7%), so a bandwidth-bound "
      "GEMM (and the NPU-only attention GEMVs) run up to 7% faster than refresh allows. It "
      "flatters NPU-only most, so the speed-ups over it are understated by up to ~7%. The "
      "reference profiles (`--reference-devices`) charge refresh, as the reference simulator "
      "does (`hbm_bytes_per_cycle_less_refresh`).");
  line(
      "- **Interconnect.** Two all-reduces per layer cross a 64 GB/s link; the paper models "
      "none. Sub-batch interleaving hides one sub-batch's all-reduce behind the other's "
      "compute (sec. 7.2), which favours NeuPIMs; `--interconnect-gbps 100000` removes the "
      "effect.");
  {
    std::vector<std::string> tp_wins, tp_loses;
    for (const std::string& model : models) {
      const auto combos = combos_for(model);
      bool best_is_tp = true;
      const StepResult& first = fig14[{model, "sharegpt", combos[0].first, combos[0].second}];
      for (auto [tp, pp] : combos) {
        const StepResult& r = fig14[{model, "sharegpt", tp, pp}];
        if (r.ok && (!first.ok || r.tokens_per_s > first.tokens_per_s)) best_is_tp = false;
      }
      (best_is_tp ? tp_wins : tp_loses).push_back(model);
    }
    std::string text =
        "- **Parallelism (Figure 14).** Pure tensor parallelism is best for " +
        (tp_wins.empty() ? std::string("no model") : absl::StrJoin(tp_wins, ", ")) +
        ", as in the paper: it keeps the per-device batch large, while every pipeline stage "
        "re-streams its weights per micro-batch and throughput falls as PP grows.";
    if (!tp_loses.empty()) {
      absl::StrAppend(&text, " For ", absl::StrJoin(tp_loses, ", "),
                      " the widest tensor split loses: a ring all-reduce over that many devices "
                      "takes 2 (TP - 1) link latencies per call, twice per layer, which the "
                      "paper's simulator does not model.");
    }
    absl::StrAppend(&text,
                    " Splits that put more weights on a device than its 32 GB hold are "
                    "reported as not fitting instead of being simulated.");
    line(text);
  }
  line("");

  absl::StatusOr<std::string> offload = RenderOffloadResults();
  if (!offload.ok()) return ReportError(offload.status());
  md = SpliceOffloadSection(md, *offload);
  absl::StatusOr<std::string> reference = RenderReferenceResults();
  if (!reference.ok()) return ReportError(reference.status());
  md = SpliceMarkedSection(md, *reference, kReferenceBegin, kReferenceEnd);
  return WriteResults(f, md, raw, wall_s, avg1, avg2, avg3);
}

}  // namespace

void RegisterExperimentsCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ExperimentFlags>();
  CLI::App* c = app.add_subcommand(
      "experiments",
      "Regenerate the NeuPIMs paper's experiments (Figures 12-14, Table 4) from the shipped "
      "configs and datasets and write them as Markdown (--out, by default the tracked "
      "docs/results.md)");
  c->add_option("--out", f->out,
                "Markdown file to write (the default overwrites the tracked docs/results.md)")
      ->capture_default_str()
      ->check(OutputFile());
  c->add_option("--json-out", f->json_out, "Also write the raw numbers as JSON")
      ->check(OutputFile());
  c->add_option("--samples", f->samples, "Batches sampled per point")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  c->add_option("--seed", f->seed, "Batch sampling seed")->check(Uint64())->capture_default_str();
  c->add_flag("--offload", f->offload,
              "Only regenerate the CNN offload section (DNNVM Tables 3-5) of --out, keeping the "
              "rest of the file (no datasets needed)");
  c->add_flag("--reference", f->reference,
              "Only regenerate the reference-profile section (issue 14: the *-ref devices against "
              "the defaults on the clb-0 batch files) of --out, keeping the rest of the file");
  c->add_flag("--reference-devices", f->reference_devices,
              "Run every figure on the reference profiles (npu-only-ref, newton-ref, "
              "neupims-ref) instead of the default devices; --out defaults to "
              "docs/results-reference.md");
  c->add_flag("--quick", f->quick, "Two batch sizes and two samples per point (for tests)");
  c->add_option("--jobs", f->jobs,
                "Engine configurations simulated in parallel (default: all cores; 1: serial). "
                "The results do not depend on it")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  c->add_option("--shard", f->shard,
                "Run every N-th engine configuration, i/N (0 <= i < N); needs --shard-out")
      ->capture_default_str();
  c->add_option("--shard-out", f->shard_out,
                "Write this shard's raw results as JSON (no Markdown); merge with --merge")
      ->check(OutputFile());
  c->add_option("--merge", f->merge,
                "Render --out from these shard files (same --quick/--samples/--seed) instead of "
                "running; the tables equal a single run's")
      ->excludes("--shard-out");
  c->add_flag("--no-progress", f->no_progress,
              "No progress line on stderr (it is only drawn when stderr is a terminal)");
  c->callback([f, c, exit_code] {
    if (f->reference_devices && c->count("--out") == 0) f->out = "docs/results-reference.md";
    *exit_code = RunExperiments(*f);
  });
}

}  // namespace neupims::cli
