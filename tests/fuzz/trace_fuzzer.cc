// Fuzzes the trace readers (CSV and JSONL; the first byte picks): every kept request fits the
// context and arrives at a finite, non-negative time, in order; a refusal names the file.
// (Arrivals beyond the simulated clock are refused later, by BuildWorkload, for every source.)
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/table_reader.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/workload/workload.h"

namespace wl = neupims::workload;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool csv = data[0] % 2 == 0;
  const char* source = csv ? "fuzz.csv" : "fuzz.jsonl";
  neupims::TableReader table(source, std::string(neupims::fuzz::AsText(data + 1, size - 1)), ',');
  const wl::LengthFilter filter{.max_seq_len = 2048};
  wl::LoadReport report;
  absl::StatusOr<std::vector<wl::RequestSpec>> requests =
      wl::ParseTrace(table, csv ? wl::TraceFormat::kCsv : wl::TraceFormat::kJsonl, filter, &report);
  if (!requests.ok()) {
    neupims::fuzz::CheckRefusal(requests.status(), source);
    return 0;
  }
  FUZZ_CHECK(report.kept == static_cast<int64_t>(requests->size()), "kept");
  double last = 0;
  for (const wl::RequestSpec& r : *requests) {
    FUZZ_CHECK(std::isfinite(r.arrival_s) && r.arrival_s >= last, "arrival order");
    FUZZ_CHECK(r.prompt_tokens >= 1 && r.output_tokens >= 1, "lengths");
    FUZZ_CHECK(r.prompt_tokens + r.output_tokens <= filter.max_seq_len, "context");
    last = r.arrival_s;
  }
  return 0;
}
