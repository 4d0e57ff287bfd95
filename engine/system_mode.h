// System modes of NeuPIMs sec. 8.1 and the ablation switches of Figure 13.
//
//   npu-only : attention GEMVs on the NPU (bandwidth-bound), no PIM.
//   npu+pim  : Newton PIM in blocked mode (single row buffer), round-robin channels, no
//              sub-batch interleaving; logit -> softmax -> attend run one after another.
//   neupims  : dual row buffers + greedy min-load bin packing + sub-batch interleaving (for
//              batches large enough to profit, sec. 8.2 / Fig. 13), and the per-head softmax
//              overlap of sec. 6.1.
// Each technique can be switched on or off separately (the ablation of Figure 13).
#ifndef NEUPIMS_ENGINE_SYSTEM_MODE_H_
#define NEUPIMS_ENGINE_SYSTEM_MODE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/enum_names.h"
#include "scheduler/scheduler.h"

namespace neupims::engine {

enum class SystemModeKind { kNpuOnly, kNpuPim, kNeuPims };
// "npu-only", "npu+pim", "neupims".
const EnumNames<SystemModeKind>& SystemModeNames();
const char* ToString(SystemModeKind kind);

struct SystemMode {
  SystemModeKind kind = SystemModeKind::kNeuPims;
  std::string name = "neupims";  // SystemModeNames()' name of `kind`, for messages
  bool pim_attention = true;     // attention GEMVs on PIM (false: on the NPU)
  bool dual_row_buffers = true;  // MEM traffic proceeds while the PIM computes
  scheduler::ChannelPolicy channel_policy = scheduler::ChannelPolicy::kMinLoad;
  bool sub_batch_interleaving = true;
  // Interleave only large enough batches (see EngineOptions::sbi_min_batch).
  bool adaptive_sub_batches = true;

  // Softmax of head h overlaps the PIM GEMVs of the other heads (sec. 6.1): needs the vector
  // units to read partial logits while the PIM runs, i.e. dual row buffers.
  bool softmax_overlap() const { return pim_attention && dual_row_buffers; }
  // The built-in device a mode runs on unless the user picks one.
  std::string default_device() const;
};

// The mode's techniques before any ablation override.
SystemMode SystemModeFor(SystemModeKind kind);
// SystemModeFor the mode named `name`; InvalidArgument listing the choices if unknown.
absl::StatusOr<SystemMode> ParseSystemMode(absl::string_view name);

// Whether the row-buffer override (EngineOptions::dual_row_buffers, unset = the mode's) can apply
// to mode `kind`: dual row buffers belong to the PIM banks, which npu-only does not compute on,
// so "on" there is InvalidArgument naming both options ("off" is what npu-only already is).
absl::Status CheckDualRowBuffers(SystemModeKind kind, std::optional<bool> dual_row_buffers);

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_SYSTEM_MODE_H_
