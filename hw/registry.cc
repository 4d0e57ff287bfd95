#include "hw/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace neupims::hw {
namespace {

struct PimEntry {
  const char* name;
  std::unique_ptr<PimModel> (*create)(const HbmSpec&, const PimModelOptions&);
};
struct NpuEntry {
  const char* name;
  std::unique_ptr<NpuModel> (*create)(const NpuSpec&);
};

constexpr PimEntry kPimModels[] = {
    {"command", &CreateCommandLevelPimModel},
    {"analytic", &CreateAnalyticPimModel},
};
constexpr NpuEntry kNpuModels[] = {
    {"tiled", &CreateTiledNpuModel},
    {"analytic", &CreateAnalyticNpuModel},
};

constexpr EnumName<DetailLevel> kDetailLevels[] = {
    {"command", DetailLevel::kCommand},
    {"analytic", DetailLevel::kAnalytic},
};

}  // namespace

std::vector<std::string> PimModelNames() {
  std::vector<std::string> out;
  for (const auto& e : kPimModels) out.emplace_back(e.name);
  return out;
}

std::vector<std::string> NpuModelNames() {
  std::vector<std::string> out;
  for (const auto& e : kNpuModels) out.emplace_back(e.name);
  return out;
}

const EnumNames<DetailLevel>& DetailLevelNames() {
  static constexpr EnumNames<DetailLevel> kNames("level of detail", kDetailLevels);
  return kNames;
}

const char* ToString(DetailLevel level) { return DetailLevelNames().ToString(level); }

absl::StatusOr<std::unique_ptr<PimModel>> CreatePimModel(absl::string_view name,
                                                         const DeviceConfig& device,
                                                         const PimModelOptions& options) {
  // The controller issues real commands under the timing table; the reference simulator's
  // DRAM-level choices (pim.timing) exist only as closed forms.
  if (name == "command" && !device.hbm.pim.timing.IsDefault()) {
    return absl::InvalidArgumentError(
        "pim.timing (the reference simulator's DRAM-level switches) is modelled by the "
        "analytic PIM model only; use the analytic level of detail with this device");
  }
  for (const auto& e : kPimModels) {
    if (name == e.name) return e.create(device.hbm, options);
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown PIM model '", name, "' (choices: ", absl::StrJoin(PimModelNames(), ", "), ")"));
}

absl::StatusOr<std::unique_ptr<NpuModel>> CreateNpuModel(absl::string_view name,
                                                         const DeviceConfig& device) {
  for (const auto& e : kNpuModels) {
    if (name == e.name) return e.create(device.npu);
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown NPU model '", name, "' (choices: ", absl::StrJoin(NpuModelNames(), ", "), ")"));
}

DetailModels DetailModelsFor(DetailLevel level) {
  switch (level) {
    case DetailLevel::kCommand:
      return {"command", "tiled"};
    case DetailLevel::kAnalytic:
      return {"analytic", "analytic"};
  }
  return {"analytic", "analytic"};
}

}  // namespace neupims::hw
