#include "tools/neupims/cnn_partition_commands.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "scheduler/partition/hype.h"
#include "scheduler/partition/pim_selection.h"
#include "tools/neupims/cli_util.h"
#include "tools/workload/range_flag.h"

namespace neupims::cli {
namespace {

using nlohmann::json;
namespace part = scheduler::partition;

// ---------------------------------------------------------------------------------------------
// select

struct SelectFlags {
  std::string model = "vgg19";
  std::string profiles = "hpim_table1";
  double coverage = 0.9;
  bool json = false;
};

std::string Share(const std::optional<double>& s) { return s ? FormatFixed(*s * 100, 2) : "-"; }

const part::PimOpShare* FindOp(const part::PimOpProfile& p, const std::string& name) {
  for (const part::PimOpShare& op : p.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

json SelectJson(const part::PimOpProfile& p, const part::PimSelection& s, double coverage) {
  json ranking = json::array();
  for (size_t i = 0; i < s.global_list.size(); ++i) {
    const part::RankedPimOp& r = s.global_list[i];
    const part::PimOpShare* op = FindOp(p, r.name);
    ranking.push_back(
        {{"name", r.name},
         {"time_rank", r.time_rank},
         {"memory_rank", r.memory_rank},
         {"global_index", r.global_index},
         {"time_share", op->time_share ? json(*op->time_share) : json()},
         {"memory_access_share", op->memory_access_share ? json(*op->memory_access_share) : json()},
         {"selected", i < s.selected.size()}});
  }
  return {{"model", p.model},
          {"display_name", p.display_name},
          {"coverage_target", coverage},
          {"selected", s.selected},
          {"covered_time_share", s.covered_time_share},
          {"target_reached", s.target_reached},
          {"ranking", ranking}};
}

void PrintSelect(const part::PimOpProfile& p, const part::PimSelection& s, double coverage) {
  std::printf("%s (%s): offload selection for heterogeneous PIM, target %s of step time\n",
              p.display_name.c_str(), p.model.c_str(), FormatPercent(coverage).c_str());
  std::printf("%-22s %7s %7s %6s %6s %7s  %s\n", "operation", "time%", "memacc%", "t-rank",
              "m-rank", "global", "selected");
  for (size_t i = 0; i < s.global_list.size(); ++i) {
    const part::RankedPimOp& r = s.global_list[i];
    const part::PimOpShare* op = FindOp(p, r.name);
    std::printf("%-22s %7s %7s %6d %6d %7d  %s\n", r.name.c_str(), Share(op->time_share).c_str(),
                Share(op->memory_access_share).c_str(), r.time_rank, r.memory_rank, r.global_index,
                i < s.selected.size() ? "yes" : "");
  }
  std::printf("selected: %s\ncovering %s%% of the step's execution time%s\n",
              absl::StrJoin(s.selected, ", ").c_str(),
              FormatFixed(s.covered_time_share * 100, 2).c_str(),
              s.target_reached ? "" : " (every listed operation: the target is not reached)");
}

int RunSelect(const SelectFlags& f) {
  absl::StatusOr<std::vector<part::PimOpProfile>> tables = part::LoadPimOpProfiles(f.profiles);
  if (!tables.ok()) return ReportError(tables.status());
  absl::StatusOr<part::PimOpProfile> p = part::FindPimOpProfile(*tables, f.model);
  if (!p.ok()) return ReportError(p.status());
  absl::StatusOr<part::PimSelection> s = part::SelectPimOffload(*p, f.coverage);
  if (!s.ok()) return ReportError(s.status());
  if (f.json) {
    std::printf("%s\n", SelectJson(*p, *s, f.coverage).dump(2).c_str());
  } else {
    PrintSelect(*p, *s, f.coverage);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// hype

struct HypeFlags {
  std::string workload = "cnn-step";
  std::optional<double> power_cap_w;
  bool json = false;
};

struct HypeRun {
  part::HypeWorkload w;
  part::HypePlan plan;
  part::HypeSchedule schedule;
  part::HypeSchedule gpu_only;
};

std::vector<std::string> Offloaded(const HypeRun& r) {
  std::vector<std::string> out;
  for (size_t i = 0; i < r.w.ops.size(); ++i) {
    if (r.plan.ops[i].device == part::HypeDevice::kFpga) out.push_back(r.w.ops[i].name);
  }
  return out;
}

json ScheduleJson(const part::HypeSchedule& s) {
  json power = json::array();
  for (const part::PowerStep& p : s.power)
    power.push_back({{"t_s", p.t_s}, {"power_w", p.power_w}});
  return {{"makespan_s", s.makespan_s},
          {"peak_power_w", s.peak_power_w},
          {"energy_j", s.energy_j},
          {"power_timeline", power}};
}

json HypeJson(const HypeRun& r, const std::optional<double>& cap) {
  json ops = json::array();
  for (size_t i = 0; i < r.w.ops.size(); ++i) {
    const part::OpPlacement& o = r.plan.ops[i];
    const part::SimulatedOp& s = r.schedule.ops[i];
    ops.push_back({{"name", r.w.ops[i].name},
                   {"kind", r.w.ops[i].kind},
                   {"size", part::InputSizeNames().ToString(r.w.ops[i].size)},
                   {"placement", part::HypeDeviceNames().ToString(o.device)},
                   {"reason", part::PlacementReasonNames().ToString(o.reason)},
                   {"passes_filter", o.passes_filter},
                   {"gpu_slack_s", o.gpu_slack_s},
                   {"ran_on", part::HypeDeviceNames().ToString(s.device)},
                   {"start_s", s.start_s},
                   {"end_s", s.end_s},
                   {"power_w", s.power_w}});
  }
  return {{"workload", r.w.name},
          {"power_cap_w", cap ? json(*cap) : json()},
          {"thresholds",
           {{"mem_bw_bytes_per_s", r.plan.thresholds.mem_bw_bytes_per_s},
            {"ipc", r.plan.thresholds.ipc}}},
          {"offloaded", Offloaded(r)},
          {"gpu_only_critical_path_s", r.plan.gpu_only_critical_path_s},
          {"critical_path_s", r.plan.critical_path_s},
          {"ops", ops},
          {"makespan_s", r.schedule.makespan_s},
          {"peak_power_w", r.schedule.peak_power_w},
          {"energy_j", r.schedule.energy_j},
          {"schedule", ScheduleJson(r.schedule)},
          {"gpu_only", ScheduleJson(r.gpu_only)}};
}

void PrintKernels(const HypeRun& r) {
  for (size_t k = 0; k < r.w.kernels.size(); ++k) {
    const part::KernelVariantSpace& space = r.w.kernels[k];
    const part::KernelVariantChoice& c = r.plan.kernel_choices[k];
    const part::FpgaKernelConfig& cfg = space.configs[c.config];
    std::printf("kernel %s/%s: CU %d, SIMD %d, work group %d, unroll %d at %.0f MHz (LI %.2f)\n",
                space.kind.c_str(), part::InputSizeNames().ToString(space.size), cfg.cu_num,
                cfg.simd_width, cfg.work_group_size, cfg.unroll, cfg.fmax_hz / 1e6,
                c.latency_indicator);
  }
}

void PrintHype(const HypeRun& r, const std::optional<double>& cap) {
  std::printf("workload %s: filter thresholds %.2f GB/s, IPC %.3f (from %s)\n", r.w.name.c_str(),
              r.plan.thresholds.mem_bw_bytes_per_s / 1e9, r.plan.thresholds.ipc,
              absl::StrJoin(r.w.threshold_kinds, ", ").c_str());
  PrintKernels(r);
  std::printf("%-20s %-21s %-6s %-5s %-22s %6s %9s %9s %9s %5s\n", "op", "kind", "size", "place",
              "reason", "filter", "slack ms", "start ms", "end ms", "ran");
  for (size_t i = 0; i < r.w.ops.size(); ++i) {
    const part::OpPlacement& o = r.plan.ops[i];
    const part::SimulatedOp& s = r.schedule.ops[i];
    std::printf("%-20s %-21s %-6s %-5s %-22s %6s %9.3f %9.3f %9.3f %5s\n", r.w.ops[i].name.c_str(),
                r.w.ops[i].kind.c_str(), part::InputSizeNames().ToString(r.w.ops[i].size),
                part::HypeDeviceNames().ToString(o.device),
                part::PlacementReasonNames().ToString(o.reason), o.passes_filter ? "pass" : "-",
                o.gpu_slack_s * 1e3, s.start_s * 1e3, s.end_s * 1e3,
                part::HypeDeviceNames().ToString(s.device));
  }
  std::printf("offloaded: %s\n", absl::StrJoin(Offloaded(r), ", ").c_str());
  std::printf("critical path: %.3f ms (GPU only %.3f ms)\n", r.plan.critical_path_s * 1e3,
              r.plan.gpu_only_critical_path_s * 1e3);
  std::printf("makespan: %.3f ms (GPU only %.3f ms)\n", r.schedule.makespan_s * 1e3,
              r.gpu_only.makespan_s * 1e3);
  std::printf("peak power: %.1f W%s (GPU only %.1f W)\n", r.schedule.peak_power_w,
              cap ? absl::StrCat(", cap ", *cap, " W").c_str() : "", r.gpu_only.peak_power_w);
  std::printf("energy: %.4f J (GPU only %.4f J)\n", r.schedule.energy_j, r.gpu_only.energy_j);
}

int RunHype(const HypeFlags& f) {
  HypeRun r;
  absl::StatusOr<part::HypeWorkload> w = part::LoadHypeWorkload(f.workload);
  if (!w.ok()) return ReportError(w.status());
  r.w = *std::move(w);
  absl::StatusOr<part::HypePlan> plan = part::PlanHype(r.w);
  if (!plan.ok()) return ReportError(plan.status());
  r.plan = *std::move(plan);
  absl::StatusOr<part::HypeSchedule> s = part::SimulateHype(r.w, Placement(r.plan), f.power_cap_w);
  if (!s.ok()) return ReportError(s.status());
  r.schedule = *std::move(s);
  const std::vector<part::HypeDevice> all_gpu(r.w.ops.size(), part::HypeDevice::kGpu);
  absl::StatusOr<part::HypeSchedule> g = part::SimulateHype(r.w, all_gpu);
  if (!g.ok()) return ReportError(g.status());
  r.gpu_only = *std::move(g);
  if (f.json) {
    std::printf("%s\n", HypeJson(r, f.power_cap_w).dump(2).c_str());
  } else {
    PrintHype(r, f.power_cap_w);
  }
  return 0;
}

}  // namespace

void RegisterCnnPartitionCommands(CLI::App* cnn, int* exit_code) {
  auto sf = std::make_shared<SelectFlags>();
  CLI::App* sel = cnn->add_subcommand(
      "select", "Heterogeneous-PIM offload selection (paper 000 sec. III-C) on profiled ops");
  sel->add_option("--model", sf->model, "Profiled network in the profile table (vgg19, ...)")
      ->capture_default_str();
  sel->add_option("--profiles", sf->profiles, "Built-in profile table or a JSON path")
      ->capture_default_str();
  sel->add_option("--coverage", sf->coverage, "Share of step time to cover, in (0, 1]")
      ->check(InRange(DoubleRange{.min = 0, .max = 1, .min_exclusive = true}))
      ->capture_default_str();
  sel->add_flag("--json", sf->json, "Print JSON");
  sel->callback([sf, exit_code] { *exit_code = RunSelect(*sf); });

  auto hf = std::make_shared<HypeFlags>();
  CLI::App* hype = cnn->add_subcommand(
      "hype", "Hype-training GPU+FPGA per-op placement and runtime schedule (paper 004)");
  hype->add_option(
          "--workload", hf->workload,
          absl::StrCat("Built-in workload (", absl::StrJoin(part::BuiltinHypeWorkloadNames(), ", "),
                       ") or a JSON path"))
      ->capture_default_str();
  hype->add_option_function<double>(
          "--power-cap-w", [hf](double w) { hf->power_cap_w = w; },
          "System power cap in watts (runtime case 2)")
      ->check(NonNegative());
  hype->add_flag("--json", hf->json, "Print JSON");
  hype->callback([hf, exit_code] { *exit_code = RunHype(*hf); });
}

}  // namespace neupims::cli
