#include "engine/system_mode.h"

#include "absl/strings/str_cat.h"

namespace neupims::engine {

std::string SystemMode::default_device() const {
  if (!pim_attention) return "npu-only";
  return dual_row_buffers ? "neupims" : "newton";
}

absl::StatusOr<SystemMode> ParseSystemMode(absl::string_view name) {
  SystemMode m;
  m.name = std::string(name);
  if (name == "neupims") return m;
  if (name == "npu+pim") {
    m.adaptive_sub_batches = false;
    m.dual_row_buffers = false;
    m.channel_policy = scheduler::ChannelPolicy::kRoundRobin;
    m.sub_batch_interleaving = false;
    return m;
  }
  if (name == "npu-only") {
    m.adaptive_sub_batches = false;
    m.pim_attention = false;
    m.dual_row_buffers = false;
    m.channel_policy = scheduler::ChannelPolicy::kRoundRobin;
    m.sub_batch_interleaving = false;
    return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown system mode '", name, "' (choices: npu-only, npu+pim, neupims)"));
}

}  // namespace neupims::engine
