#include "tools/neupims/sweep_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_io.h"
#include "common/json_file.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "engine/engine.h"
#include "nlohmann/json.hpp"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/shard.h"
#include "tools/neupims/step_eval.h"
#include "tools/workload/range_flag.h"
#include "tools/workload/workload.h"

namespace neupims::cli {
namespace {

using nlohmann::json;

constexpr char kShardFormat[] = "neupims-sweep-shard/1";

// The grid. Every list is non-empty; "devices" absent = each mode's own device ("").
struct SweepSpec {
  std::vector<std::string> models, devices, modes, datasets;
  std::vector<int> batches;
  int samples = 10;
  uint64_t seed = 1;
};

struct Point {
  std::string model, device, mode, dataset;
  int batch = 0;
};

// Points in the fixed order every shard and the merge agree on.
std::vector<Point> Grid(const SweepSpec& s) {
  std::vector<Point> out;
  for (const auto& model : s.models) {
    for (const auto& device : s.devices) {
      for (const auto& mode : s.modes) {
        for (const auto& dataset : s.datasets) {
          for (int batch : s.batches) out.push_back({model, device, mode, dataset, batch});
        }
      }
    }
  }
  return out;
}

json SpecJson(const SweepSpec& s) {
  return {{"models", s.models},     {"devices", s.devices}, {"modes", s.modes},
          {"datasets", s.datasets}, {"batches", s.batches}, {"samples", s.samples},
          {"seed", s.seed}};
}

// Strict: unknown keys, wrong types, empty lists and unknown modes are errors naming the key.
absl::StatusOr<SweepSpec> ParseSpec(const json& j, const std::string& source) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
  };
  if (!j.is_object()) return bad("a sweep spec is a JSON object");
  static const std::set<std::string> kKeys = {"models",  "devices", "modes", "datasets",
                                              "batches", "samples", "seed"};
  for (const auto& [key, value] : j.items()) {
    if (!kKeys.contains(key)) return bad(absl::StrCat("unknown key '", key, "'"));
  }
  SweepSpec s;
  auto strings = [&](const char* key, std::vector<std::string>* out,
                     bool required) -> absl::Status {
    if (!j.contains(key)) {
      return required ? bad(absl::StrCat("'", key, "' is required")) : absl::OkStatus();
    }
    const json& v = j.at(key);
    if (!v.is_array() || v.empty())
      return bad(absl::StrCat("'", key, "' must be a non-empty list"));
    for (const json& x : v) {
      if (!x.is_string()) return bad(absl::StrCat("'", key, "' must list strings"));
      out->push_back(x.get<std::string>());
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(strings("models", &s.models, true));
  RETURN_IF_ERROR(strings("devices", &s.devices, false));
  if (s.devices.empty()) s.devices = {""};
  RETURN_IF_ERROR(strings("modes", &s.modes, true));
  for (const std::string& m : s.modes) {
    absl::StatusOr<engine::SystemModeKind> kind = engine::SystemModeNames().Parse(m);
    if (!kind.ok()) return bad(absl::StrCat("'modes': ", kind.status().message()));
  }
  RETURN_IF_ERROR(strings("datasets", &s.datasets, true));
  if (!j.contains("batches") || !j.at("batches").is_array() || j.at("batches").empty()) {
    return bad("'batches' must be a non-empty list");
  }
  for (const json& b : j.at("batches")) {
    if (!b.is_number_integer() || b.get<int64_t>() < 1 || b.get<int64_t>() > (1 << 14)) {
      return bad("'batches' must list integers in [1, 16384]");
    }
    s.batches.push_back(b.get<int>());
  }
  if (j.contains("samples")) {
    const json& v = j.at("samples");
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 100) {
      return bad("'samples' must be an integer in [1, 100]");
    }
    s.samples = v.get<int>();
  }
  if (j.contains("seed")) {
    if (!j.at("seed").is_number_unsigned()) return bad("'seed' must be a non-negative integer");
    s.seed = j.at("seed").get<uint64_t>();
  }
  return s;
}

// One point: its own engine and its own batches, seeded by (seed, dataset, batch) only, so a
// point's result does not depend on the shard or the thread that runs it.
StepResult RunPoint(const SweepSpec& spec, const Point& p,
                    const std::map<std::string, std::vector<workload::LengthPair>>& lengths,
                    size_t dataset_index) {
  engine::EngineOptions o;
  o.model = p.model;
  o.mode = *engine::SystemModeNames().Parse(p.mode);
  if (!p.device.empty()) o.device = p.device;
  o.max_batch = 1 << 14;  // the batch is the point's, never capped
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::Engine::Create(o);
  if (!e.ok()) {
    StepResult r;
    r.error = std::string(e.status().message());
    return r;
  }
  BatchSampler sampler(lengths.at(p.dataset),
                       spec.seed * 1'000'003 + dataset_index * 65'537 + p.batch);
  Batches batches;
  for (int i = 0; i < spec.samples; ++i) batches.push_back(sampler.Sample(p.batch));
  return Evaluate(**e, batches);
}

struct RunFlags {
  std::string spec_path, shard = "0/1", out;
  int jobs = DefaultJobs();
};

int RunSweep(const RunFlags& f) {
  absl::StatusOr<Shard> shard = ParseShard(f.shard);
  if (!shard.ok()) return ReportError(shard.status());
  absl::StatusOr<json> spec_json = ReadStrictJsonFile(f.spec_path);
  if (!spec_json.ok()) return ReportError(spec_json.status());
  absl::StatusOr<SweepSpec> spec = ParseSpec(*spec_json, f.spec_path);
  if (!spec.ok()) return ReportError(spec.status());
  std::map<std::string, std::vector<workload::LengthPair>> lengths;
  for (const std::string& ds : spec->datasets) {
    workload::LoadReport report;
    auto l = workload::LoadNamedDataset(ds, {2048}, &report);
    if (!l.ok()) return ReportError(l.status());
    lengths[ds] = *std::move(l);
  }
  const std::vector<Point> grid = Grid(*spec);
  std::vector<int> owned;
  for (int i = 0; i < static_cast<int>(grid.size()); ++i) {
    if (shard->Owns(i)) owned.push_back(i);
  }
  std::vector<StepResult> results(owned.size());
  ParallelFor(static_cast<int>(owned.size()), f.jobs, [&](int k) {
    const Point& p = grid[owned[k]];
    const size_t ds =
        static_cast<size_t>(std::find(spec->datasets.begin(), spec->datasets.end(), p.dataset) -
                            spec->datasets.begin());
    results[k] = RunPoint(*spec, p, lengths, ds);
  });
  json out = {{"format", kShardFormat},
              {"spec", SpecJson(*spec)},
              {"shard", {{"index", shard->index}, {"count", shard->count}}},
              {"points", json::array()}};
  for (size_t k = 0; k < owned.size(); ++k) {
    out["points"].push_back({{"index", owned[k]}, {"result", ToJson(results[k])}});
  }
  if (absl::Status s = WriteFile(f.out, out.dump(1) + "\n"); !s.ok()) return ReportError(s);
  std::fprintf(stderr, "sweep: shard %d/%d: %zu of %zu points -> %s\n", shard->index, shard->count,
               owned.size(), grid.size(), f.out.c_str());
  return 0;
}

// ---- merge ------------------------------------------------------------------------------

// One shard file's points into `results` (the first file fixes the spec).
absl::Status MergeShard(const std::string& path, const std::string& first, const json& j,
                        SweepSpec* spec, std::optional<json>& spec_json,
                        std::vector<std::optional<StepResult>>& results) {
  if (j.value("format", "") != kShardFormat) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a sweep shard file"));
  }
  if (!spec_json) {
    spec_json = j.at("spec");
    ASSIGN_OR_RETURN(*spec, ParseSpec(*spec_json, path));
    results.resize(Grid(*spec).size());
  } else if (j.at("spec") != *spec_json) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a different sweep spec than ", first));
  }
  for (const json& p : j.at("points")) {
    const int64_t i = p.at("index").get<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(results.size())) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": point ", i, " is not in the grid"));
    }
    if (results[i].has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": point ", i, " given twice"));
    }
    ASSIGN_OR_RETURN(results[i], StepResultFromJson(p.at("result")));
  }
  return absl::OkStatus();
}

// Every point of the grid exactly once, from shard files of one spec.
absl::StatusOr<std::vector<StepResult>> MergeShards(const std::vector<std::string>& paths,
                                                    SweepSpec* spec) {
  std::optional<json> spec_json;
  std::vector<std::optional<StepResult>> results;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(json j, ReadStrictJsonFile(path));
    RETURN_IF_ERROR(CatchJsonErrors(
        path, [&] { return MergeShard(path, paths.front(), j, spec, spec_json, results); }));
  }
  std::vector<StepResult> out;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("point ", i, " is in no shard file (a shard is missing)"));
    }
    out.push_back(*results[i]);
  }
  return out;
}

// Markdown: per dataset, tokens/s of each mode side by side, then utilisation.
std::string Tables(const SweepSpec& spec, const std::vector<StepResult>& results) {
  const std::vector<Point> grid = Grid(spec);
  std::map<std::tuple<std::string, std::string, std::string, std::string, int>, StepResult> at;
  for (size_t i = 0; i < grid.size(); ++i) {
    const Point& p = grid[i];
    at[{p.model, p.device, p.mode, p.dataset, p.batch}] = results[i];
  }
  std::string md =
      absl::StrCat("# Sweep: steady-state decode throughput\n\n", grid.size(), " points, ",
                   spec.samples, " batches each, seed ", spec.seed, " (`neupims sweep`).\n");
  auto device_name = [](const std::string& d) { return d.empty() ? std::string("(mode's)") : d; };
  std::string header = "| model | device | batch |";
  for (const auto& m : spec.modes) absl::StrAppend(&header, " ", m, " |");
  absl::StrAppend(&header, "\n|---|---|---|");
  for (size_t k = 0; k < spec.modes.size(); ++k) absl::StrAppend(&header, "---|");
  absl::StrAppend(&header, "\n");
  // One table per dataset and measure: a row per (model, device, batch), a column per mode.
  auto table = [&](const std::string& ds, const std::string& title,
                   std::string (*cell)(const StepResult&)) {
    absl::StrAppend(&md, "\n## ", ds, ": ", title, "\n\n", header);
    for (const auto& model : spec.models) {
      for (const auto& dev : spec.devices) {
        for (int b : spec.batches) {
          absl::StrAppend(&md, "| ", model, " | ", device_name(dev), " | ", b, " |");
          for (const auto& m : spec.modes) {
            absl::StrAppend(&md, " ", cell(at[{model, dev, m, ds, b}]), " |");
          }
          absl::StrAppend(&md, "\n");
        }
      }
    }
  };
  for (const std::string& ds : spec.datasets) {
    table(ds, "tokens/s", [](const StepResult& r) {
      return r.ok ? FormatCount(r.tokens_per_s) : std::string("n/a");
    });
    table(ds, "utilisation (NPU systolic / PIM / HBM bandwidth)", [](const StepResult& r) {
      return r.ok ? absl::StrCat(FormatPercent(r.npu), " / ", FormatPercent(r.pim), " / ",
                                 FormatPercent(r.bw))
                  : absl::StrCat("n/a: ", r.error);
    });
  }
  return md;
}

struct MergeFlags {
  std::vector<std::string> inputs;
  std::string out, json_out;
};

int RunMerge(const MergeFlags& f) {
  SweepSpec spec;
  absl::StatusOr<std::vector<StepResult>> results = MergeShards(f.inputs, &spec);
  if (!results.ok()) return ReportError(results.status());
  const std::string md = Tables(spec, *results);
  if (f.out.empty()) {
    std::fputs(md.c_str(), stdout);
  } else if (absl::Status s = WriteFile(f.out, md); !s.ok()) {
    return ReportError(s);
  }
  if (!f.json_out.empty()) {
    json all = {{"spec", SpecJson(spec)}, {"points", json::array()}};
    const std::vector<Point> grid = Grid(spec);
    for (size_t i = 0; i < grid.size(); ++i) {
      const Point& p = grid[i];
      all["points"].push_back({{"model", p.model},
                               {"device", p.device},
                               {"mode", p.mode},
                               {"dataset", p.dataset},
                               {"batch", p.batch},
                               {"result", ToJson((*results)[i])}});
    }
    if (absl::Status s = WriteFile(f.json_out, all.dump(1) + "\n"); !s.ok()) return ReportError(s);
  }
  return 0;
}

}  // namespace

void RegisterSweepCommand(CLI::App& app, int* exit_code) {
  auto run = std::make_shared<RunFlags>();
  auto merge = std::make_shared<MergeFlags>();
  CLI::App* c = app.add_subcommand(
      "sweep",
      "Steady-state decode throughput over a grid (models x devices x modes x datasets x "
      "batches, from a JSON spec); --shard i/N runs every N-th point and writes one JSON per "
      "shard, `sweep merge` turns shard files into tables (docs/deploy.md)");
  c->add_option("--spec", run->spec_path,
                "Sweep spec JSON: {\"models\", \"devices\" (optional), \"modes\", \"datasets\", "
                "\"batches\", \"samples\", \"seed\"}")
      ->check(NonEmpty());
  c->add_option("--shard", run->shard, "This process's part of the grid, i/N (0 <= i < N)")
      ->capture_default_str();
  c->add_option("--out", run->out, "Shard JSON to write")->check(OutputFile());
  c->add_option("--jobs", run->jobs,
                "Points simulated in parallel (default: all cores). Results do not depend on it")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  CLI::App* m = c->add_subcommand(
      "merge", "Combine shard files (all of one spec, every point once) into Markdown tables");
  m->add_option("inputs", merge->inputs, "Shard JSON files")->required();
  m->add_option("--out", merge->out, "Markdown file to write (default: stdout)")
      ->check(OutputFile());
  m->add_option("--json-out", merge->json_out, "Also write every point's result as JSON")
      ->check(OutputFile());
  m->callback([merge, exit_code] { *exit_code = RunMerge(*merge); });
  c->callback([c, m, run, exit_code] {
    if (m->parsed()) return;  // `sweep merge` ran its own callback
    if (run->spec_path.empty() || run->out.empty()) {
      *exit_code = ReportError(absl::InvalidArgumentError(
          "sweep: --spec and --out are required (or use `sweep merge`)"));
      return;
    }
    *exit_code = RunSweep(*run);
  });
}

}  // namespace neupims::cli
