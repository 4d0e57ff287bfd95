// Engine configuration flags shared by `simulate`, `step`, `experiments` and `serve`.
#ifndef NEUPIMS_TOOLS_NEUPIMS_ENGINE_FLAGS_H_
#define NEUPIMS_TOOLS_NEUPIMS_ENGINE_FLAGS_H_

#include "CLI/CLI.hpp"
#include "engine/engine.h"

namespace neupims::cli {

// Adds --model, --mode, --device, the ablation switches, parallelism, batch and prefill
// options, bound to `flags->options`. Enum flags take the names of their option's names table.
struct EngineFlags {
  engine::EngineOptions options;
};
void AddEngineFlags(CLI::App* cmd, EngineFlags* flags);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_ENGINE_FLAGS_H_
