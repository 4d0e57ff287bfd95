#include "engine/system_mode.h"

#include "common/status_macros.h"

namespace neupims::engine {
namespace {

constexpr EnumName<SystemModeKind> kSystemModes[] = {
    {"npu-only", SystemModeKind::kNpuOnly},
    {"npu+pim", SystemModeKind::kNpuPim},
    {"neupims", SystemModeKind::kNeuPims},
};

}  // namespace

const EnumNames<SystemModeKind>& SystemModeNames() {
  static constexpr EnumNames<SystemModeKind> kNames("system mode", kSystemModes);
  return kNames;
}

const char* ToString(SystemModeKind kind) { return SystemModeNames().ToString(kind); }

std::string SystemMode::default_device() const {
  if (!pim_attention) return "npu-only";
  return dual_row_buffers ? "neupims" : "newton";
}

SystemMode SystemModeFor(SystemModeKind kind) {
  SystemMode m;
  m.kind = kind;
  m.name = ToString(kind);
  if (kind == SystemModeKind::kNeuPims) return m;
  m.adaptive_sub_batches = false;
  m.dual_row_buffers = false;
  m.channel_policy = scheduler::ChannelPolicy::kRoundRobin;
  m.sub_batch_interleaving = false;
  m.pim_attention = kind != SystemModeKind::kNpuOnly;
  return m;
}

absl::StatusOr<SystemMode> ParseSystemMode(absl::string_view name) {
  ASSIGN_OR_RETURN(SystemModeKind kind, SystemModeNames().Parse(name));
  return SystemModeFor(kind);
}

absl::Status CheckDualRowBuffers(SystemModeKind kind, std::optional<bool> dual_row_buffers) {
  if (kind == SystemModeKind::kNpuOnly && dual_row_buffers.value_or(false)) {
    return absl::InvalidArgumentError(
        "--dual-row-buffers on needs PIM attention, which --mode npu-only does not use: pick "
        "--mode npu+pim or neupims, or leave --dual-row-buffers auto");
  }
  return absl::OkStatus();
}

}  // namespace neupims::engine
