// The typed choices of EngineOptions (engine.h), each with its one names table: the CLI flags,
// the server config, the experiments and the engine parse and print them through these tables.
// System modes are in system_mode.h, channel policies in scheduler/scheduler.h and hardware
// detail levels in hw/registry.h, next to what they select.
#ifndef NEUPIMS_ENGINE_OPTIONS_H_
#define NEUPIMS_ENGINE_OPTIONS_H_

#include "common/enum_names.h"

namespace neupims::engine {

// Where prompts are prefilled: on standalone NPUs whose KV cache then crosses a link to the
// decode devices (NeuPIMs sec. 4), or inside the decode device's iterations.
enum class PrefillPlacement { kStandalone, kLocal };
// "standalone", "local".
const EnumNames<PrefillPlacement>& PrefillPlacementNames();
const char* ToString(PrefillPlacement p);

// The MHA latency estimate that drives min-load channel packing: the analytic PIM model, or
// NeuPIMs Algorithm 1.
enum class MhaEstimatorKind { kAnalytic, kAlgorithm1 };
// "analytic", "algorithm1".
const EnumNames<MhaEstimatorKind>& MhaEstimatorNames();
const char* ToString(MhaEstimatorKind k);

// Sub-batch interleaving override (Figure 13 ablation); kAuto interleaves only iterations whose
// micro-batches decode at least EngineOptions::sbi_min_batch requests.
enum class SubBatchInterleaving { kOn, kOff, kAuto };
// "on", "off", "auto".
const EnumNames<SubBatchInterleaving>& SubBatchInterleavingNames();
const char* ToString(SubBatchInterleaving s);

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_OPTIONS_H_
