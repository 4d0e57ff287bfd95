// The reference-profile section of docs/results.md (issue 14): what the reference profiles
// (configs/devices/*-ref.json) predict next to our defaults on the shipped decode batches.
#ifndef NEUPIMS_TOOLS_NEUPIMS_REFERENCE_EXPERIMENTS_H_
#define NEUPIMS_TOOLS_NEUPIMS_REFERENCE_EXPERIMENTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::cli {

inline constexpr absl::string_view kReferenceBegin = "<!-- reference-profiles:begin -->";
inline constexpr absl::string_view kReferenceEnd = "<!-- reference-profiles:end -->";

// The section, between the markers above: one decoder layer of GPT3-7B/TP4 on the clb-0 batch
// files of B = 64, 128 and 256 (../shared/datasets/batches) in every system mode, on the
// default devices and on the reference profiles, with the three speed-up ratios and the
// sub-batch-interleaving crossover. NotFound naming the file when a batch file is missing.
absl::StatusOr<std::string> RenderReferenceResults();

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_REFERENCE_EXPERIMENTS_H_
