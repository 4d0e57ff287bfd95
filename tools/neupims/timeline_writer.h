// Chrome trace-event JSON of simulated iterations (opens in ui.perfetto.dev / chrome://tracing):
// one lane per NPU unit, the interconnect and every PIM channel; slices are named by operation
// and sub-batch ("qkv SB1", "mha SB2") so the two sub-batches get their own colours.
#ifndef NEUPIMS_TOOLS_NEUPIMS_TIMELINE_WRITER_H_
#define NEUPIMS_TOOLS_NEUPIMS_TIMELINE_WRITER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"

namespace neupims::cli {

struct IterationMark {
  int64_t index = 0;
  engine::SimTime start = 0, end = 0;
};

// `events` carry absolute simulated times (ns).
absl::Status WriteTimeline(const std::string& path,
                           const std::vector<engine::TimelineEvent>& events,
                           const std::vector<IterationMark>& iterations, const engine::Engine& e);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_TIMELINE_WRITER_H_
