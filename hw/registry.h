// The one explicit registry of hardware model implementations, chosen by name.
//
//   PIM: "command" (command-level controller), "analytic" (closed form)
//   NPU: "tiled"   (tile-by-tile pipeline),    "analytic" (closed form)
// Levels of detail (DetailLevel) used by the engine and the tools map onto these:
// command -> {PIM command, NPU tiled}, analytic -> {PIM analytic, NPU analytic}.
#ifndef NEUPIMS_HW_REGISTRY_H_
#define NEUPIMS_HW_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/enum_names.h"
#include "hw/device.h"
#include "hw/npu/npu_model.h"
#include "hw/pim/pim_model.h"

namespace neupims::hw {

std::vector<std::string> PimModelNames();
std::vector<std::string> NpuModelNames();

enum class DetailLevel { kCommand, kAnalytic };
// "command", "analytic".
const EnumNames<DetailLevel>& DetailLevelNames();
const char* ToString(DetailLevel level);

absl::StatusOr<std::unique_ptr<PimModel>> CreatePimModel(absl::string_view name,
                                                         const DeviceConfig& device,
                                                         const PimModelOptions& options = {});
absl::StatusOr<std::unique_ptr<NpuModel>> CreateNpuModel(absl::string_view name,
                                                         const DeviceConfig& device);

// Implementation names (in the tables above) for a detail level.
struct DetailModels {
  std::string pim;
  std::string npu;
};
DetailModels DetailModelsFor(DetailLevel level);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_REGISTRY_H_
