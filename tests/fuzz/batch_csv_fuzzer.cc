// Fuzzes the `neupims step --batch-file` reader: an accepted batch holds 1 to kMaxBatchRequests
// rows with non-negative channels; a refusal names the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/table_reader.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/workload/batch_file.h"

namespace wl = neupims::workload;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr char kSource[] = "fuzz-batch.csv";
  neupims::TableReader table(kSource, std::string(neupims::fuzz::AsText(data, size)), ',');
  absl::StatusOr<std::vector<wl::BatchRow>> rows = wl::ParseBatchFile(table);
  if (!rows.ok()) {
    neupims::fuzz::CheckRefusal(rows.status(), kSource);
    return 0;
  }
  FUZZ_CHECK(!rows->empty() && static_cast<int64_t>(rows->size()) <= wl::kMaxBatchRequests,
             "row count");
  for (const wl::BatchRow& r : *rows) FUZZ_CHECK(!r.channel || *r.channel >= 0, "channel");
  return 0;
}
