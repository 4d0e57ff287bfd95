// Fuzzes the length-dataset TSV reader: what is kept fits the context, the report adds up, and a
// refusal names the file.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/table_reader.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/workload/workload.h"

namespace wl = neupims::workload;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr char kSource[] = "fuzz.tsv";
  neupims::TableReader table(kSource, std::string(neupims::fuzz::AsText(data, size)), '\t');
  const wl::LengthFilter filter{.max_seq_len = 2048};
  wl::LoadReport report;
  absl::StatusOr<std::vector<wl::LengthPair>> pairs =
      wl::ParseLengthDataset(table, filter, &report);
  if (!pairs.ok()) {
    neupims::fuzz::CheckRefusal(pairs.status(), kSource);
    return 0;
  }
  FUZZ_CHECK(report.kept == static_cast<int64_t>(pairs->size()), "kept");
  FUZZ_CHECK(report.rows == report.kept + report.dropped_too_long + report.dropped_zero_output +
                                report.dropped_zero_prompt,
             "rows");
  for (const wl::LengthPair& p : *pairs) {
    FUZZ_CHECK(p.prompt_tokens >= 1 && p.output_tokens >= 1, "lengths");
    FUZZ_CHECK(p.prompt_tokens + p.output_tokens <= filter.max_seq_len, "context");
  }
  return 0;
}
