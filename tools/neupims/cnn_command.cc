#include "tools/neupims/cnn_command.h"

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/cnn/fpga_compiler.h"
#include "hw/fpga/fpga_spec.h"
#include "models/cnn/graph.h"
#include "models/cnn/strategy.h"
#include "nlohmann/json.hpp"
#include "tools/neupims/cli_util.h"
#include "tools/neupims/cnn_partition_commands.h"
#include "tools/neupims/cnn_plan_command.h"
#include "tools/neupims/enum_flag.h"

namespace neupims::cli {
namespace {

using nlohmann::json;

struct CompileFlags {
  std::string model = "resnet50";
  std::string device = "zu2";
  models::cnn::StrategyKind strategy = models::cnn::StrategyKind::kOptimal;
  std::optional<int64_t> batch;
  bool json = false;
};

int RunModels() {
  std::printf("%-10s %-12s %6s %6s %6s %9s %10s  %s\n", "name", "input", "layers", "nodes", "convs",
              "conv GOP", "weights MB", "source");
  for (const std::string& name : models::cnn::BuiltinGraphNames()) {
    absl::StatusOr<models::cnn::Graph> g = models::cnn::LoadGraph(name);
    if (!g.ok()) return ReportError(g.status());
    absl::StatusOr<models::cnn::Graph> x = models::cnn::Canonicalize(*g);
    if (!x.ok()) return ReportError(x.status());
    int convs = 0;
    int64_t weights = 0;
    for (int i = 0; i < static_cast<int>(x->nodes.size()); ++i) {
      if (x->nodes[i].kind == models::cnn::OpKind::kConv) ++convs;
      weights += models::cnn::Work(*x, i).weight_bytes;
    }
    const models::cnn::Shape& in = g->nodes[0].out;
    std::printf("%-10s %-12s %6zu %6zu %6d %9.2f %10.1f  %s\n", name.c_str(),
                absl::StrCat(in.c, "x", in.h, "x", in.w).c_str(), g->nodes.size() - 1,
                x->nodes.size() - 1, convs, models::cnn::ConvGops(*x), weights / 1e6,
                g->source.c_str());
  }
  return 0;
}

json ToJson(const engine::cnn::FpgaCompilation& c) {
  json groups = json::array();
  for (const engine::cnn::CompiledGroup& g : c.groups) {
    groups.push_back({{"label", g.label},
                      {"fusion", std::string(models::cnn::FusionKindName(g.group.kind))},
                      {"nodes", g.group.nodes},
                      {"time_s", g.cost.time_s},
                      {"cycles", g.cost.cycles},
                      {"gop", g.cost.ops / 1e9},
                      {"gops_per_s", g.cost.time_s > 0 ? g.cost.ops / 1e9 / g.cost.time_s : 0},
                      {"load_bytes", g.cost.load_bytes},
                      {"save_bytes", g.cost.save_bytes},
                      {"conv_cycles", g.cost.conv_cycles},
                      {"pool_cycles", g.cost.pool_cycles},
                      {"misc_cycles", g.cost.misc_cycles},
                      {"ddr_cycles", g.cost.ddr_cycles}});
  }
  return {{"model", c.model},
          {"device", c.device},
          {"strategy", models::cnn::StrategyKindNames().ToString(c.strategy)},
          {"batch", c.batch},
          {"active_cores", c.active_cores},
          {"candidates", c.candidates},
          {"fused_groups", c.fused_groups},
          {"conv_gop", c.conv_gop},
          {"time_s", c.time_s},
          {"gops_per_s", c.gops_per_s},
          {"energy_j", c.energy_j},
          {"gops_per_w", c.gops_per_w},
          {"load_bytes", c.load_bytes},
          {"save_bytes", c.save_bytes},
          {"host_nodes", c.host_nodes},
          {"groups", groups}};
}

void PrintText(const engine::cnn::FpgaCompilation& c) {
  std::printf("%-4s %-44s %-12s %9s %8s %8s %9s %9s\n", "#", "group", "fusion", "time ms", "GOP",
              "GOP/s", "load KB", "save KB");
  for (size_t i = 0; i < c.groups.size(); ++i) {
    const engine::cnn::CompiledGroup& g = c.groups[i];
    std::string label = g.label;
    if (label.size() > 44) label = label.substr(0, 41) + "...";
    std::printf("%-4zu %-44s %-12s %9.4f %8.4f %8.1f %9.1f %9.1f\n", i, label.c_str(),
                std::string(models::cnn::FusionKindName(g.group.kind)).c_str(), g.cost.time_s * 1e3,
                g.cost.ops / 1e9, g.cost.time_s > 0 ? g.cost.ops / 1e9 / g.cost.time_s : 0.0,
                g.cost.load_bytes / 1e3, g.cost.save_bytes / 1e3);
  }
  KeyValueTable t(absl::StrCat(c.model, " on ", c.device, ", ",
                               models::cnn::StrategyKindNames().ToString(c.strategy),
                               " fusion, batch ", c.batch));
  t.Add("fusion candidates (Algorithm 1)", FormatCount(c.candidates));
  t.Add("groups on the FPGA", absl::StrCat(c.groups.size(), " (", c.fused_groups, " fused)"));
  t.Add("convolution work", absl::StrCat(FormatFixed(c.conv_gop, 2), " GOP"));
  t.Add("time", FormatSi(c.time_s, "s"));
  t.Add("throughput", absl::StrCat(FormatFixed(c.gops_per_s, 1), " GOP/s"));
  t.Add("energy", FormatSi(c.energy_j, "J"));
  t.Add("efficiency", absl::StrCat(FormatFixed(c.gops_per_w, 1), " GOP/s/W"));
  t.Add("DDR traffic", absl::StrCat(FormatFixed((c.load_bytes + c.save_bytes) / 1e6, 1), " MB"));
  t.Add("on the host CPU", c.host_nodes.empty() ? "-" : absl::StrJoin(c.host_nodes, ", "));
  t.Print();
}

int RunCompile(const CompileFlags& f) {
  absl::StatusOr<models::cnn::Graph> g = models::cnn::LoadGraph(f.model);
  if (!g.ok()) return ReportError(g.status());
  if (f.batch) g->batch = *f.batch;
  absl::StatusOr<hw::fpga::FpgaSpec> spec = hw::fpga::LoadFpgaSpec(f.device);
  if (!spec.ok()) return ReportError(spec.status());
  absl::StatusOr<engine::cnn::FpgaCompilation> c =
      engine::cnn::CompileForFpga(*g, *spec, f.strategy);
  if (!c.ok()) return ReportError(c.status());
  if (f.json) {
    std::printf("%s\n", ToJson(*c).dump(2).c_str());
  } else {
    PrintText(*c);
  }
  return 0;
}

}  // namespace

void RegisterCnnCommand(CLI::App& app, int* exit_code) {
  CLI::App* cnn = app.add_subcommand(
      "cnn", "CNN offload: the built-in networks and the DNNVM compiler for FPGA devices");
  cnn->require_subcommand(1);
  CLI::App* models = cnn->add_subcommand("models", "List the built-in CNN networks");
  models->callback([exit_code] { *exit_code = RunModels(); });

  auto f = std::make_shared<CompileFlags>();
  CLI::App* c = cnn->add_subcommand(
      "compile", "Compile a CNN for a DNNVM FPGA device: per-group time, fusions, throughput");
  c->add_option("--model", f->model, "Built-in network (neupims cnn models) or a graph JSON")
      ->capture_default_str();
  c->add_option("--device", f->device,
                absl::StrCat("Built-in FPGA (", absl::StrJoin(hw::fpga::BuiltinFpgaNames(), ", "),
                             ") or a device JSON"))
      ->capture_default_str();
  AddEnumFlag(c, "--strategy", models::cnn::StrategyKindNames(), &f->strategy,
              "Fusion strategy: none (baseline), greedy, optimal (Algorithm 2)");
  c->add_option_function<int64_t>(
       "--batch", [f](int64_t b) { f->batch = b; }, "Images per batch (default: the graph's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_flag("--json", f->json, "Print JSON");
  c->callback([f, exit_code] { *exit_code = RunCompile(*f); });

  RegisterCnnPlanCommands(cnn, exit_code);
  RegisterCnnPartitionCommands(cnn, exit_code);
}

}  // namespace neupims::cli
