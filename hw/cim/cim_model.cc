#include "hw/cim/cim_model.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"
#include "hw/sources.h"

namespace neupims::hw::cim {
namespace {

int SmallInt(ConfigObject& o, absl::string_view key, int64_t max) {
  return static_cast<int>(o.Int(key, {.min = 1, .max = max}));
}

void ParseSpec(ConfigObject root, CimSpec* s) {
  s->name = root.String("name");
  s->description = root.String("description");
  s->cell = root.Enum("cell", {"1T1R", "crossbar"});
  s->technology_nm = SmallInt(root, "technology_nm", 1000);
  s->array_rows = SmallInt(root, "array_rows", 1 << 16);
  s->array_cols = SmallInt(root, "array_cols", 1 << 16);
  s->cell_bits = SmallInt(root, "cell_bits", 8);
  s->weight_bits = SmallInt(root, "weight_bits", 32);
  s->input_bits = SmallInt(root, "input_bits", 32);
  s->adc_bits = SmallInt(root, "adc_bits", 16);
  s->columns_per_adc = SmallInt(root, "columns_per_adc", 1 << 10);
  s->read_pulse_s = root.Double("read_pulse_s", {.min = 1e-12, .max = 1e-3});
  s->sensing_latency_factor = root.Double("sensing_latency_factor", {.min = 1, .max = 100});
  s->clock_hz = root.Double("clock_hz", {.min = 1e3, .max = 1e11});
  s->read_voltage_v = root.Double("read_voltage_v", {.min = 1e-3, .max = 10});
  s->r_on_ohm = root.Double("r_on_ohm", {.min = 1, .max = 1e12});
  s->r_off_ohm = root.Double("r_off_ohm", {.min = 1, .max = 1e12});
  s->input_activity = root.Double("input_activity", {.min = 0, .max = 1});
  s->adc_energy_j = root.Double("adc_energy_j", {.min = 0, .max = 1e-6});
  s->add_energy_j = root.Double("add_energy_j", {.min = 0, .max = 1e-6});
  s->digital_ops_per_cycle = SmallInt(root, "digital_ops_per_cycle", 1 << 20);
  s->weight_capacity = root.Int("weight_capacity", {.min = 1, .max = int64_t{1} << 50});
  if (s->weight_bits % s->cell_bits != 0) {
    root.Error("cell_bits", "must divide weight_bits (a weight spans whole cells)");
  }
  if (s->array_cols % s->columns_per_adc != 0) {
    root.Error("columns_per_adc", "must divide array_cols");
  }
  if (s->r_off_ohm < s->r_on_ohm) root.Error("r_off_ohm", "must be >= r_on_ohm");
  ReadSources(root, {"cell",
                     "technology_nm",
                     "array_rows",
                     "array_cols",
                     "cell_bits",
                     "weight_bits",
                     "input_bits",
                     "adc_bits",
                     "columns_per_adc",
                     "read_pulse_s",
                     "sensing_latency_factor",
                     "clock_hz",
                     "read_voltage_v",
                     "r_on_ohm",
                     "r_off_ohm",
                     "input_activity",
                     "adc_energy_j",
                     "add_energy_j",
                     "digital_ops_per_cycle",
                     "weight_capacity"});
  root.Finish();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::StatusOr<CimSpec> LoadCimSpec(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("cim", name_or_path));
  CimSpec spec;
  ParseSpec(doc->Root(), &spec);
  RETURN_IF_ERROR(doc->status());
  return spec;
}

std::vector<std::string> BuiltinCimNames() { return BuiltinConfigNames("cim"); }

ArrayMapping CimModel::Map(const MvmOp& op) const {
  ArrayMapping m;
  const int64_t columns_per_weight = spec_.weight_bits / spec_.cell_bits;
  const int64_t oc_per_group = CeilDiv(op.out_channels, op.groups);
  m.row_arrays = op.kernel_h * op.kernel_w * CeilDiv(op.in_channels, spec_.array_rows);
  m.col_arrays = CeilDiv(oc_per_group * columns_per_weight, spec_.array_cols);
  m.arrays = m.row_arrays * m.col_arrays * op.groups;
  return m;
}

absl::StatusOr<CimCost> CimModel::Mvm(const MvmOp& op) const {
  if (op.in_channels <= 0 || op.out_channels <= 0 || op.kernel_h <= 0 || op.kernel_w <= 0 ||
      op.groups <= 0 || op.out_pixels <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CIM layer shape must be positive: IC ", op.in_channels, ", OC ",
                     op.out_channels, ", kernel ", op.kernel_h, "x", op.kernel_w, ", groups ",
                     op.groups, ", pixels ", op.out_pixels));
  }
  CimCost c;
  c.mapping = Map(op);
  const double pixels = static_cast<double>(op.out_pixels);
  const double bit_reads = pixels * spec_.input_bits;  // NeuroSim's numInVector
  c.read_s = bit_reads * spec_.columns_per_adc * spec_.read_pulse_s * spec_.sensing_latency_factor;
  const double tree_stages = std::ceil(std::log2(static_cast<double>(c.mapping.row_arrays)));
  c.accumulate_s = pixels * spec_.columns_per_adc * tree_stages / spec_.clock_hz;
  c.time_s = c.read_s + c.accumulate_s;

  // Only the mapped part of each sub-array is driven and converted (NeuroSim maps the weight
  // matrix onto numRowMatrix x numColMatrix of a sub-array).
  const double weight_columns =
      static_cast<double>(op.out_channels) * (spec_.weight_bits / spec_.cell_bits);  // all groups
  const double cells =
      static_cast<double>(op.kernel_h * op.kernel_w * op.in_channels) * weight_columns;
  c.cell_energy_j = bit_reads * cells * spec_.input_activity * spec_.cell_read_energy_j();
  c.adc_energy_j =
      bit_reads * static_cast<double>(c.mapping.row_arrays) * weight_columns * spec_.adc_energy_j;
  c.accumulate_energy_j = bit_reads * static_cast<double>(op.out_channels) *
                          static_cast<double>(c.mapping.row_arrays - 1) * spec_.add_energy_j;
  c.energy_j = c.cell_energy_j + c.adc_energy_j + c.accumulate_energy_j;
  return c;
}

CimCost CimModel::Digital(double ops) const {
  CimCost c;
  c.time_s = ops / (spec_.digital_ops_per_cycle * spec_.clock_hz);
  c.energy_j = ops * spec_.add_energy_j;
  return c;
}

}  // namespace neupims::hw::cim
