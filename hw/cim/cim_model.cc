#include "hw/cim/cim_model.h"

#include <algorithm>
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
  s->max_global_bus_bits = SmallInt(root, "max_global_bus_bits", 1 << 20);
  s->buffer_line_bits = SmallInt(root, "buffer_line_bits", 1 << 20);
  s->buffer_bit_energy_j = root.Double("buffer_bit_energy_j", {.min = 0, .max = 1e-6});
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
                     "weight_capacity",
                     "max_global_bus_bits",
                     "buffer_line_bits",
                     "buffer_bit_energy_j"});
  root.Finish();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A weight matrix with no empty side.
bool ValidMatrix(const MvmOp& op) {
  return op.in_channels > 0 && op.out_channels > 0 && op.kernel_h > 0 && op.kernel_w > 0 &&
         op.groups > 0;
}

bool ValidShape(const MvmOp& op) {
  return ValidMatrix(op) && op.out_pixels > 0 && op.buffer_share > 0 && op.bus_bits >= 0;
}

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
  const int64_t columns_per_weight = spec_.cells_per_weight();
  const int64_t oc_per_group = CeilDiv(op.out_channels, op.groups);
  m.row_arrays = op.kernel_h * op.kernel_w * CeilDiv(op.in_channels, spec_.array_rows);
  m.col_arrays = CeilDiv(oc_per_group * columns_per_weight, spec_.array_cols);
  m.arrays = m.row_arrays * m.col_arrays * op.groups;
  return m;
}

absl::StatusOr<CimCost> CimModel::Mvm(const MvmOp& op) const {
  if (!ValidShape(op)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CIM layer shape must be positive: IC ", op.in_channels, ", OC ", op.out_channels,
        ", kernel ", op.kernel_h, "x", op.kernel_w, ", groups ", op.groups, ", pixels ",
        op.out_pixels, ", buffer share ", op.buffer_share, ", bus bits ", op.bus_bits));
  }
  CimCost c;
  c.mapping = Map(op);
  const double pixels = static_cast<double>(op.out_pixels);
  const double bit_reads = pixels * spec_.input_bits;  // NeuroSim's numInVector
  c.read_s = bit_reads * spec_.columns_per_adc * spec_.read_pulse_s * spec_.sensing_latency_factor;
  const int64_t cells_per_weight = spec_.cells_per_weight();
  const double shift_cycles =
      spec_.columns_per_adc +
      std::ceil(static_cast<double>(spec_.columns_per_adc) / cells_per_weight);
  c.shift_add_s = bit_reads * shift_cycles / spec_.clock_hz;
  const double tree_stages = std::ceil(std::log2(static_cast<double>(c.mapping.row_arrays)));
  c.accumulate_s = pixels * spec_.columns_per_adc * tree_stages / spec_.clock_hz;
  AddMovement(op, &c);
  c.time_s = c.read_s + c.shift_add_s + c.accumulate_s + c.buffer_s + c.interconnect_s;

  // Only the mapped part of each sub-array is driven and converted (NeuroSim maps the weight
  // matrix onto numRowMatrix x numColMatrix of a sub-array).
  const double weight_columns = static_cast<double>(op.out_channels) *
                                static_cast<double>(spec_.cells_per_weight());  // all groups
  const double cells =
      static_cast<double>(op.kernel_h * op.kernel_w * op.in_channels) * weight_columns;
  c.cell_energy_j = bit_reads * cells * spec_.input_activity * spec_.cell_read_energy_j();
  c.adc_energy_j =
      bit_reads * static_cast<double>(c.mapping.row_arrays) * weight_columns * spec_.adc_energy_j;
  c.accumulate_energy_j = bit_reads * static_cast<double>(op.out_channels) *
                          static_cast<double>(c.mapping.row_arrays - 1) * spec_.add_energy_j;
  c.energy_j = c.cell_energy_j + c.adc_energy_j + c.accumulate_energy_j + c.buffer_energy_j;
  return c;
}

void CimModel::AddMovement(const MvmOp& op, CimCost* c) const {
  const double pixels = static_cast<double>(op.out_pixels);
  const int64_t rows_loaded = op.novel_mapping ? op.kernel_w : op.kernel_h * op.kernel_w;
  const double bits_in =
      static_cast<double>(op.in_channels * op.groups * rows_loaded) * spec_.input_bits * pixels;
  const double bits_out = static_cast<double>(op.out_channels) * spec_.input_bits * pixels;
  c->bits_moved = bits_in + bits_out;
  const double bus = op.bus_bits > 0 ? op.bus_bits : spec_.max_global_bus_bits;
  const double line = spec_.buffer_line_bits;
  const double buffer_bits_per_cycle = std::ceil(bus / line) * line;
  c->buffer_s =
      c->bits_moved / buffer_bits_per_cycle * static_cast<double>(op.buffer_share) / spec_.clock_hz;
  c->interconnect_s = std::ceil(c->bits_moved / bus) / spec_.clock_hz;
  c->buffer_energy_j = c->bits_moved * spec_.buffer_bit_energy_j;
}

CimCost CimModel::Digital(double ops) const {
  CimCost c;
  c.time_s = ops / (spec_.digital_ops_per_cycle * spec_.clock_hz);
  c.energy_j = ops * spec_.add_energy_j;
  return c;
}

namespace {

int64_t PowerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

// The most common kernel area above 1 (Chip.cpp: the PEs of a novel-mapped tile).
int64_t MostCommonKernelArea(const std::vector<MvmOp>& layers) {
  int64_t best = 1, best_count = 0;
  for (const MvmOp& a : layers) {
    const int64_t area = a.kernel_h * a.kernel_w;
    if (area == 1) continue;
    int64_t count = 0;
    for (const MvmOp& b : layers) count += b.kernel_h * b.kernel_w == area ? 1 : 0;
    if (count > best_count) best = area, best_count = count;
  }
  return best;
}

struct Matrix {
  int64_t rows = 0, cols = 0, copies = 1;  // per group; `copies` groups
};

// Chip.cpp TileDesignNM / TileDesignCM: of the sizes max, max/2, ... while above `floor`,
// the one that maps the most of its tiles' cells (ties: the larger). A tile is `pes` PEs of
// size x size cells.
int64_t BestTileSize(const std::vector<Matrix>& ms, int64_t floor, int64_t pes) {
  int64_t largest = floor;
  for (const Matrix& m : ms) largest = std::max(largest, PowerOfTwoAtLeast(m.cols));
  int64_t best = largest;
  double best_use = -1;
  for (int64_t size = largest; size == largest || size > floor; size /= 2) {
    double cells = 0, tiles = 0;
    for (const Matrix& m : ms) {
      // In doubles: a user graph's FC layer can have 2^60 inputs.
      cells += static_cast<double>(m.rows) * static_cast<double>(m.cols) *
               static_cast<double>(m.copies) * static_cast<double>(pes);
      tiles += static_cast<double>(CeilDiv(m.rows, size)) *
               static_cast<double>(CeilDiv(m.cols, size)) * static_cast<double>(m.copies);
    }
    const double use = cells / (tiles * static_cast<double>(size) * static_cast<double>(size) *
                                static_cast<double>(pes));
    if (use > best_use) {
      best = size;
      best_use = use;
    }
  }
  return best;
}

}  // namespace

std::vector<ChipLayer> CimModel::Floorplan(const std::vector<MvmOp>& layers) const {
  const int64_t pes = MostCommonKernelArea(layers);
  const int64_t columns_per_weight = spec_.cells_per_weight();
  std::vector<ChipLayer> out(layers.size());
  std::vector<Matrix> nm, cm;  // novel mapping: IC rows per PE; conventional: IC*K^2 rows
  for (size_t i = 0; i < layers.size(); ++i) {
    const MvmOp& l = layers[i];
    if (!ValidMatrix(l)) {  // Mvm refuses it; here it takes one tile and divides nothing by 0
      cm.push_back({1, 1, 1});
      continue;
    }
    const int64_t area = l.kernel_h * l.kernel_w;
    const int64_t cols = CeilDiv(l.out_channels, l.groups) * columns_per_weight;
    out[i].novel_mapping = area == pes && area > 1 && l.in_channels * area >= spec_.array_rows;
    if (out[i].novel_mapping) {
      nm.push_back({l.in_channels, cols, l.groups});
    } else {
      cm.push_back({l.in_channels * area, cols, l.groups});
    }
  }
  const int64_t pe = nm.empty() ? 0 : BestTileSize(nm, 2 * spec_.array_rows, pes);
  const int64_t tile = cm.empty() ? 0 : BestTileSize(cm, 4 * spec_.array_rows, 1);
  int64_t total = 0;
  double bus = 0;
  size_t next_nm = 0, next_cm = 0;
  for (ChipLayer& c : out) {
    const Matrix& m = c.novel_mapping ? nm[next_nm++] : cm[next_cm++];
    const int64_t size = c.novel_mapping ? pe : tile;
    c.tiles = CeilDiv(m.rows, size) * CeilDiv(m.cols, size) * m.copies;
    total += c.tiles;
    // Chip.cpp ChipInitialize: each layer's tile interface, its columns and their ADC outputs.
    const double columns =
        c.novel_mapping ? static_cast<double>(pe) * std::ceil(std::sqrt(static_cast<double>(pes)))
                        : static_cast<double>(tile);
    bus += columns + columns / spec_.columns_per_adc;
  }
  while (bus > spec_.max_global_bus_bits) bus /= 2;
  for (ChipLayer& c : out) {
    c.buffer_share = CeilDiv(total, c.tiles);
    c.bus_bits = bus;
  }
  return out;
}

}  // namespace neupims::hw::cim
