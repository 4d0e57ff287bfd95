#include "hw/hpim/hpim_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"
#include "hw/sources.h"

namespace neupims::hw::hpim {
namespace {

void ParseSpec(ConfigObject root, HpimSpec* s) {
  s->name = root.String("name");
  s->description = root.String("description");
  s->vaults = static_cast<int>(root.Int("vaults", {.min = 1, .max = 1 << 12}));
  s->memory_clock_hz = root.Double("memory_clock_hz", {.min = 1e3, .max = 1e11});
  s->ff_units = static_cast<int>(root.Int("ff_units", {.min = 1, .max = 1 << 24}));
  s->core_count = static_cast<int>(root.Int("core_count", {.min = 1, .max = 1 << 12}));
  s->core_clock_hz = root.Double("core_clock_hz", {.min = 1e3, .max = 1e11});
  s->core_flops_per_cycle = root.Double("core_flops_per_cycle", {.min = 1e-3, .max = 1e4});
  s->internal_bytes_per_s = root.Double("internal_bytes_per_s", {.min = 1e3, .max = 1e15});
  s->memory_bytes = root.Int("memory_bytes", {.min = 1, .max = int64_t{1} << 50});
  s->host_launch_s = root.Double("host_launch_s", {.min = 0, .max = 1});
  s->ff_call_s = root.Double("ff_call_s", {.min = 0, .max = 1});
  s->ff_mul_energy_j = root.Double("ff_mul_energy_j", {.min = 0, .max = 1e-6});
  s->ff_add_energy_j = root.Double("ff_add_energy_j", {.min = 0, .max = 1e-6});
  s->core_flop_energy_j = root.Double("core_flop_energy_j", {.min = 0, .max = 1e-6});
  s->byte_energy_j = root.Double("byte_energy_j", {.min = 0, .max = 1e-6});
  s->bytes_per_element = static_cast<int>(root.Int("bytes_per_element", {.min = 1, .max = 8}));
  ReadSources(root, {"vaults", "memory_clock_hz", "ff_units", "core_count", "core_clock_hz",
                     "core_flops_per_cycle", "internal_bytes_per_s", "memory_bytes",
                     "host_launch_s", "ff_call_s", "ff_mul_energy_j", "ff_add_energy_j",
                     "core_flop_energy_j", "byte_energy_j"});
  root.Finish();
}

absl::Status CheckOp(const PimOp& op) {
  if (op.macs < 0 || op.other_flops < 0 || op.bytes < 0 || op.ff_width < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("PIM operation must be non-negative: macs ", op.macs, ", other flops ",
                     op.other_flops, ", bytes ", op.bytes, ", ff_width ", op.ff_width));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HpimSpec> LoadHpimSpec(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("hpim", name_or_path));
  HpimSpec spec;
  ParseSpec(doc->Root(), &spec);
  RETURN_IF_ERROR(doc->status());
  return spec;
}

std::vector<std::string> BuiltinHpimNames() { return BuiltinConfigNames("hpim"); }

absl::StatusOr<PimCost> HpimModel::Cost(const PimOp& op, bool recursive) const {
  RETURN_IF_ERROR(CheckOp(op));
  PimCost c;
  const int64_t width =
      op.ff_width == 0 ? spec_.ff_units : std::min<int64_t>(op.ff_width, spec_.ff_units);
  c.ff_utilization = op.macs > 0 ? static_cast<double>(width) / spec_.ff_units : 0;
  c.ff_s = static_cast<double>(op.macs) / (static_cast<double>(width) * spec_.memory_clock_hz);
  c.core_s = op.other_flops / spec_.core_flops_per_s();
  c.memory_s = static_cast<double>(op.bytes) / spec_.internal_bytes_per_s;
  const bool ff = op.macs > 0, core = op.other_flops > 0;
  // Recursive call: one kernel on the core that calls the units (sec. III-B, Fig. 6).
  // Otherwise each phase is its own host-launched kernel.
  c.launches = recursive ? 1 : std::max(1, int{ff} + int{core});
  const double call_s = recursive && ff && core ? spec_.ff_call_s : 0;
  c.time_s = std::max(c.core_s + c.ff_s, c.memory_s) + c.launches * spec_.host_launch_s + call_s;
  c.energy_j = static_cast<double>(op.macs) * (spec_.ff_mul_energy_j + spec_.ff_add_energy_j) +
               op.other_flops * spec_.core_flop_energy_j +
               static_cast<double>(op.bytes) * spec_.byte_energy_j;
  return c;
}

absl::StatusOr<StepTiming> HpimModel::Steps(const std::vector<PimOp>& ops, bool recursive,
                                            bool pipelined) const {
  StepTiming t;
  double ff_busy_s = 0, core_busy_s = 0, memory_busy_s = 0;
  for (const PimOp& op : ops) {
    ASSIGN_OR_RETURN(PimCost c, Cost(op, recursive));
    t.latency_s += c.time_s;
    ff_busy_s += static_cast<double>(op.macs) / spec_.ff_macs_per_s();
    core_busy_s += c.core_s;
    memory_busy_s += c.memory_s;
  }
  // Pipelined: the next step's independent MACs fill the units this step leaves idle (sec.
  // III-C), so steps repeat at the busiest resource's occupancy plus one host launch.
  t.interval_s = pipelined ? std::max({ff_busy_s, core_busy_s, memory_busy_s}) + spec_.host_launch_s
                           : t.latency_s;
  t.interval_s = std::min(t.interval_s, t.latency_s);
  return t;
}

}  // namespace neupims::hw::hpim
