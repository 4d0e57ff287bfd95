#include "hw/roofline/roofline.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"
#include "common/table_reader.h"
#include "hw/sources.h"

namespace neupims::hw::roofline {
namespace {

void ParseSpec(ConfigObject root, RooflineSpec* s) {
  s->name = root.String("name");
  s->description = root.String("description");
  s->peak_flops_per_s = root.Double("peak_flops_per_s", {.min = 1e6, .max = 1e18});
  s->compute_efficiency = root.Double("compute_efficiency", {.min = 1e-3, .max = 1});
  s->memory_bytes_per_s = root.Double("memory_bytes_per_s", {.min = 1e6, .max = 1e15});
  s->bandwidth_efficiency = root.Double("bandwidth_efficiency", {.min = 1e-3, .max = 1});
  s->power_w = root.Double("power_w", {.min = 1e-3, .max = 1e5});
  s->per_layer_overhead_s = root.Double("per_layer_overhead_s", {.min = 0, .max = 1});
  s->memory_bytes = root.Int("memory_bytes", {.min = 1, .max = int64_t{1} << 50});
  s->bytes_per_element = static_cast<int>(root.Int("bytes_per_element", {.min = 1, .max = 8}));
  ReadSources(root, {"peak_flops_per_s", "compute_efficiency", "memory_bytes_per_s",
                     "bandwidth_efficiency", "power_w", "per_layer_overhead_s", "memory_bytes"});
  root.Finish();
}

absl::StatusOr<double> NonNegative(TableReader& t, absl::string_view field,
                                   absl::string_view what) {
  double v = 0;
  if (!absl::SimpleAtod(field, &v) || !std::isfinite(v) || v < 0) {
    return t.Error(absl::StrCat(what, " must be a number >= 0, got '", field, "'"));
  }
  return v;
}

}  // namespace

absl::StatusOr<RooflineSpec> LoadRooflineSpec(absl::string_view kind,
                                              absl::string_view name_or_path) {
  if (kind != "cpu" && kind != "gpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("roofline device kind must be cpu or gpu, got '", kind, "'"));
  }
  ASSIGN_OR_RETURN(auto doc, OpenConfig(kind, name_or_path));
  RooflineSpec spec;
  spec.kind = std::string(kind);
  ParseSpec(doc->Root(), &spec);
  RETURN_IF_ERROR(doc->status());
  return spec;
}

std::vector<std::string> BuiltinRooflineNames(absl::string_view kind) {
  return BuiltinConfigNames(kind);
}

absl::StatusOr<MeasuredProfile> LoadMeasuredProfile(const std::string& path) {
  ASSIGN_OR_RETURN(TableReader table, TableReader::Open(path, ','));
  std::vector<absl::string_view> fields;
  if (!table.NextRow(&fields) || fields.size() != 3 || fields[0] != "layer" ||
      fields[1] != "time_s" || fields[2] != "energy_j") {
    return table.Error("expected the header 'layer,time_s,energy_j'");
  }
  MeasuredProfile out;
  while (table.NextRow(&fields)) {
    if (fields.size() != 3) return table.Error("expected 3 fields: layer,time_s,energy_j");
    ASSIGN_OR_RETURN(double time_s, NonNegative(table, fields[1], "time_s"));
    ASSIGN_OR_RETURN(double energy_j, NonNegative(table, fields[2], "energy_j"));
    if (!out.emplace(std::string(fields[0]), Cost{time_s, energy_j}).second) {
      return table.Error(absl::StrCat("duplicate layer '", fields[0], "'"));
    }
  }
  return out;
}

Cost RooflineModel::Estimate(const Work& work) const {
  const double compute_s = work.flops / (spec_.peak_flops_per_s * spec_.compute_efficiency);
  const double memory_s =
      static_cast<double>(work.bytes) / (spec_.memory_bytes_per_s * spec_.bandwidth_efficiency);
  const double time_s = spec_.per_layer_overhead_s + std::max(compute_s, memory_s);
  return {.time_s = time_s, .energy_j = spec_.power_w * time_s};
}

Cost RooflineModel::CostOf(absl::string_view layer, const Work& work) const {
  auto it = measured_.find(layer);
  return it != measured_.end() ? it->second : Estimate(work);
}

}  // namespace neupims::hw::roofline
