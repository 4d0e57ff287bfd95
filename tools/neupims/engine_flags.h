// Engine configuration flags shared by `simulate`, `step`, `experiments` and `serve`.
#ifndef NEUPIMS_TOOLS_NEUPIMS_ENGINE_FLAGS_H_
#define NEUPIMS_TOOLS_NEUPIMS_ENGINE_FLAGS_H_

#include <string>

#include "CLI/CLI.hpp"
#include "engine/engine.h"

namespace neupims::cli {

// Adds --model, --mode, --device, the ablation switches, parallelism, batch and prefill
// options, bound to `o`. `dual`/`sbi` hold the on/off/auto strings of the ablation switches.
struct EngineFlags {
  engine::EngineOptions options;
  std::string dual_row_buffers = "auto";
  std::string sub_batch = "mode";

  // Applies the on/off/auto switches to `options`.
  engine::EngineOptions Resolve() const;
};
void AddEngineFlags(CLI::App* cmd, EngineFlags* flags);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_ENGINE_FLAGS_H_
