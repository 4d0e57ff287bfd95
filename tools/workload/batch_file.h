// Batch files of `neupims step --batch-file`: one decode step's requests, as a CSV.
//
//   seq_len,channel        (or ch_idx; the channel column is optional)
//   512,0
//   1024,3
//
// The header names `seq_len` and at most one channel column; unknown, repeated and conflicting
// columns are errors, never ignored. Every row has one integer per column; a channel is >= 0
// (leave the column out to let the engine's policy assign channels). At most kMaxBatchRequests
// rows. Errors name the file and line (TableReader). Whether the lengths fit the model and the
// device is the engine's to judge (Engine::SimulateStep), not the reader's.
#ifndef NEUPIMS_TOOLS_WORKLOAD_BATCH_FILE_H_
#define NEUPIMS_TOOLS_WORKLOAD_BATCH_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_reader.h"

namespace neupims::workload {

// The most requests a batch may hold, from --batch or a batch file alike.
inline constexpr int64_t kMaxBatchRequests = int64_t{1} << 20;

struct BatchRow {
  int64_t seq_len = 1;
  std::optional<int> channel;  // none: the policy assigns one
  int64_t line = 0;            // in the file, for errors about the row (header: line 1)
};

absl::StatusOr<std::vector<BatchRow>> ReadBatchFile(const std::string& path);
// The same on a table already open (read with ',' as the delimiter).
absl::StatusOr<std::vector<BatchRow>> ParseBatchFile(TableReader& table);

}  // namespace neupims::workload

#endif  // NEUPIMS_TOOLS_WORKLOAD_BATCH_FILE_H_
