#include "hw/fpga/fpga_spec.h"

#include "absl/strings/str_cat.h"
#include "common/builtin_configs.h"
#include "common/config_reader.h"
#include "common/status_macros.h"

namespace neupims::hw::fpga {
namespace {

int PositiveInt(ConfigObject& o, absl::string_view key, int64_t max) {
  return static_cast<int>(o.Int(key, {.min = 1, .max = max}));
}

void ParseSpec(ConfigObject root, FpgaSpec* s) {
  s->name = root.String("name");
  s->description = root.String("description");
  s->frequency_mhz = root.Double("frequency_mhz", {.min = 1, .max = 1e4});
  s->cores = PositiveInt(root, "cores", 64);
  s->bytes_per_element = PositiveInt(root, "bytes_per_element", 8);
  // Bounded physically: a milliwatt to 10 kW (the boards draw 7.5 and 22.8 W). 1e-308 used to load
  // and print "inf GOP/s/W", 0 an efficiency of inf.
  s->power_w = root.Double("power_w", {.min = 1e-3, .max = 1e4});
  s->bram18 = static_cast<int>(root.Int("bram18", {.min = 0, .max = 1 << 20}));
  s->dsp = static_cast<int>(root.Int("dsp", {.min = 0, .max = 1 << 20}));

  ConfigObject par = root.Child("parallelism");
  s->ic_p = PositiveInt(par, "ic_p", 1 << 12);
  s->oc_p = PositiveInt(par, "oc_p", 1 << 12);
  s->h_p = PositiveInt(par, "h_p", 1 << 12);
  if (s->ic_p % 2 != 0) par.Error("ic_p", "must be even (it counts a multiply and an add)");
  par.Finish();

  ConfigObject buf = root.Child("buffers_bytes");
  const IntRange bytes{.min = 1, .max = int64_t{1} << 34};
  s->input_buffer_bytes = buf.Int("input", bytes);
  s->weight_buffer_bytes = buf.Int("weights", bytes);
  s->output_buffer_bytes = buf.Int("output", bytes);
  buf.Finish();

  ConfigObject ddr = root.Child("ddr");
  s->ddr_peak_gb_per_s = ddr.Double("peak_gb_per_s", {.min = 1e-3, .max = 1e5});
  s->ddr_efficiency = ddr.Double("efficiency", {.min = 1e-3, .max = 1});
  ddr.Finish();

  ConfigObject eng = root.Child("engines");
  s->pool_ops_per_cycle = PositiveInt(eng, "pool_ops_per_cycle", 1 << 16);
  s->misc_ops_per_cycle = PositiveInt(eng, "misc_ops_per_cycle", 1 << 16);
  s->group_overhead_cycles = eng.Int("group_overhead_cycles", {.min = 0, .max = int64_t{1} << 32});
  eng.Finish();
  root.Finish();
}

}  // namespace

absl::StatusOr<FpgaSpec> LoadFpgaSpec(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("fpga", name_or_path));
  FpgaSpec spec;
  ParseSpec(doc->Root(), &spec);
  RETURN_IF_ERROR(doc->status());
  return spec;
}

std::vector<std::string> BuiltinFpgaNames() { return BuiltinConfigNames("fpga"); }

}  // namespace neupims::hw::fpga
