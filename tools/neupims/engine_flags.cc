#include "tools/neupims/engine_flags.h"

#include <string>

#include "common/option_ranges.h"
#include "engine/system_mode.h"
#include "tools/neupims/enum_flag.h"
#include "tools/workload/range_flag.h"

namespace neupims::cli {

namespace {

// --dual-row-buffers: on / off, or auto (the mode's choice).
constexpr EnumName<bool> kOnOff[] = {{"on", true}, {"off", false}};
constexpr EnumNames<bool> kOnOffNames("switch", kOnOff);

}  // namespace

void AddEngineFlags(CLI::App* cmd, EngineFlags* f) {
  engine::EngineOptions& o = f->options;
  cmd->add_option("--model", o.model,
                  "Model: built-in (gpt3-7b, gpt3-13b, gpt3-30b, gpt3-175b, llama2-7b, "
                  "llama2-70b, phi-2) or a JSON file")
      ->capture_default_str();
  AddEnumFlag(cmd, "--mode", engine::SystemModeNames(), &o.mode,
              "System: npu-only, npu+pim or neupims");
  cmd->add_option_function<std::string>(
      "--device", [&o](const std::string& d) { o.device = d; },
      "Device config: a built-in name (e.g. neupims-ref, the reference profiles) or a JSON "
      "file (default: the mode's: npu-only, newton or neupims)");
  AddOptionalEnumFlag(cmd, "--dual-row-buffers", kOnOffNames, &o.dual_row_buffers, "auto",
                      "Ablation: PIM banks with dual row buffers (on/off/auto = the mode's)");
  AddOptionalEnumFlag(cmd, "--sub-batch", engine::SubBatchInterleavingNames(),
                      &o.sub_batch_interleaving, "mode",
                      "Sub-batch interleaving: on, off, auto (only iterations with >= "
                      "--sbi-min-batch requests per micro-batch) or mode (the mode's choice: auto "
                      "for neupims, off otherwise)");
  cmd->add_option("--sbi-min-batch", o.sbi_min_batch,
                  "Smallest batch (per micro-batch) that auto interleaving splits")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  AddOptionalEnumFlag(cmd, "--channel-policy", scheduler::ChannelPolicyNames(), &o.channel_policy,
                      "",
                      "Ablation: channel assignment round_robin or min_load (default: the mode's)");
  AddEnumFlag(cmd, "--mha-estimator", engine::MhaEstimatorNames(), &o.mha_estimator,
              "MHA latency estimate for min-load packing: analytic or algorithm1");
  cmd->add_option("--tp", o.tp, "Tensor-parallel devices (default: the model's, Table 3)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--pp", o.pp, "Pipeline-parallel stages (default: the model's, Table 3)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--max-batch", o.max_batch, "Requests running at once (Orca max batch)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--max-prefill-tokens", o.max_prefill_tokens,
                  "Prompt tokens admitted per iteration")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--block-tokens", o.block_tokens, "KV-cache block size in tokens")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  AddEnumFlag(cmd, "--prefill", engine::PrefillPlacementNames(), &o.prefill,
              "Prefill on standalone NPUs (KV sent over a link) or local (same device)");
  cmd->add_option("--prefill-groups", o.prefill_groups,
                  "Standalone prefill instances (each tp x pp NPUs)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--prefill-link-gbps", o.prefill_link.gb_per_s,
                  "KV-transfer link bandwidth, GB/s")
      ->check(InRange(option_ranges::kLinkGbps))
      ->capture_default_str();
  cmd->add_option("--interconnect-gbps", o.interconnect.gb_per_s,
                  "Device-to-device link bandwidth for TP all-reduce / PP hand-off, GB/s")
      ->check(InRange(option_ranges::kLinkGbps))
      ->capture_default_str();
  cmd->add_option("--interconnect-latency-ns", o.interconnect.latency_ns,
                  "Device-to-device message latency, ns")
      ->check(InRange(option_ranges::kLinkLatencyNs))
      ->capture_default_str();
  AddEnumFlag(cmd, "--level", hw::DetailLevelNames(), &o.level,
              "Hardware detail: analytic or command (slow)");
  // Refused before the engine is built: otherwise the combination reaches the NPU model as a
  // zero bandwidth share and surfaces as its internal error.
  cmd->parse_complete_callback([&o] {
    const absl::Status s = engine::CheckDualRowBuffers(o.mode, o.dual_row_buffers);
    if (!s.ok()) throw CLI::ValidationError(std::string(s.message()));
  });
}

}  // namespace neupims::cli
