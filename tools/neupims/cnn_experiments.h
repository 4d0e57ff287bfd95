// The DNNVM experiments (paper 002, Tables 3-5) regenerated from the shipped CNN graphs and FPGA
// devices, rendered as a Markdown section of docs/results.md next to the paper's figures.
#ifndef NEUPIMS_TOOLS_NEUPIMS_CNN_EXPERIMENTS_H_
#define NEUPIMS_TOOLS_NEUPIMS_CNN_EXPERIMENTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::cli {

// The section, between the markers below, ready to splice into results.md.
absl::StatusOr<std::string> RenderOffloadResults();

inline constexpr absl::string_view kOffloadBegin = "<!-- offload-results:begin -->";
inline constexpr absl::string_view kOffloadEnd = "<!-- offload-results:end -->";

// `text` with its marked offload section replaced by `section` (appended when absent).
std::string SpliceOffloadSection(absl::string_view text, absl::string_view section);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_CNN_EXPERIMENTS_H_
