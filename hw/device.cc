#include "hw/device.h"

#include "absl/strings/str_cat.h"
#include "common/builtin_configs.h"
#include "common/status_macros.h"
#include "hw/pim/tile_cost.h"

namespace neupims::hw {

double DeviceConfig::PeakHbmBytesPerSecond() const {
  return hbm.org.channels * hbm.peak_bytes_per_cycle() * hbm.frequency_mhz * 1e6;
}

namespace {

absl::StatusOr<DeviceConfig> FromDocument(ConfigDocument& doc) {
  DeviceConfig cfg;
  ConfigObject root = doc.Root();
  cfg.name = root.String("name");
  cfg.description = root.OptionalString("description", "");
  cfg.tp_all_reduce = root.OptionalBool("tp_all_reduce", true);
  cfg.stage_barriers = root.OptionalBool("stage_barriers", false);
  ParseNpuSpec(root.Child("npu"), &cfg.npu);
  ParseHbmSpec(root.Child("hbm"), &cfg.hbm);
  ParsePimSpec(root.Child("pim"), &cfg.hbm.pim);
  root.Finish();
  RETURN_IF_ERROR(doc.status());
  auto wrap = [&](absl::Status s) {
    return s.ok() ? s : absl::InvalidArgumentError(absl::StrCat(doc.source(), ": ", s.message()));
  };
  RETURN_IF_ERROR(wrap(ValidateHbmSpec(cfg.hbm)));
  RETURN_IF_ERROR(wrap(ValidateRefreshLeavesRoomForATile(cfg.hbm)));
  // The NPU streams from every channel: peak bytes per NPU cycle.
  cfg.npu.hbm_bytes_per_cycle =
      cfg.hbm.org.channels * cfg.hbm.peak_bytes_per_cycle() * cfg.HbmCyclesPerNpuCycle();
  cfg.npu.hbm_refresh_fraction =
      static_cast<double>(cfg.hbm.timing.tRFC) / static_cast<double>(cfg.hbm.timing.tREFI);
  RETURN_IF_ERROR(wrap(ValidateNpuSpec(cfg.npu)));
  return cfg;
}

}  // namespace

absl::StatusOr<DeviceConfig> LoadDeviceConfig(absl::string_view name_or_path) {
  ASSIGN_OR_RETURN(auto doc, OpenConfig("devices", name_or_path));
  return FromDocument(*doc);
}

absl::StatusOr<DeviceConfig> ParseDeviceConfig(absl::string_view json, absl::string_view source) {
  ASSIGN_OR_RETURN(auto doc, ConfigDocument::FromString(json, std::string(source)));
  return FromDocument(*doc);
}

}  // namespace neupims::hw
