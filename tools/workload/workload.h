// Workloads for trace replay: request lengths and arrival times.
//
// Role: shared by `neupims simulate` (offline replay through the engine) and the gRPC load
// generator. Produces a list of RequestSpec (prompt and output lengths, arrival time) from
//   - a length dataset (TSV with header `input_toks<TAB>output_toks`, e.g.
//     ../shared/datasets/sharegpt_lengths.tsv, alpaca_lengths.tsv), sampled with a seed;
//   - a synthetic distribution (fixed lengths, or uniform ranges);
//   - a trace file with arrival times (CSV with header `arrival_s,prompt_tokens,output_tokens`
//     or JSONL objects with those keys; an optional `id` column/key is ignored);
// and an arrival process: all at t = 0, Poisson at a rate, gamma with a burstiness factor, or a
// closed loop at a fixed concurrency (arrival times are then decided by the driver).
//
// Filtering (documented in docs/workloads.md and reported in LoadReport): rows whose prompt +
// output exceed the model's context are dropped, rows with zero output tokens are dropped (a
// generation request must generate), rows with zero prompt tokens are dropped. Nothing is
// truncated or silently wrapped. Malformed lines are errors naming the file and line.
#ifndef NEUPIMS_TOOLS_WORKLOAD_WORKLOAD_H_
#define NEUPIMS_TOOLS_WORKLOAD_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/table_reader.h"

namespace neupims::workload {

struct RequestSpec {
  int64_t id = 0;
  double arrival_s = 0;  // seconds from the start of the run (0 for closed loop)
  int64_t prompt_tokens = 1;
  int64_t output_tokens = 1;
};

struct LengthPair {
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

// What loading and filtering did (printed by the tools so nothing is dropped silently).
struct LoadReport {
  std::string source;
  int64_t rows = 0;  // data rows read
  int64_t kept = 0;
  int64_t dropped_too_long = 0;  // prompt + output > max_seq_len
  int64_t dropped_zero_output = 0;
  int64_t dropped_zero_prompt = 0;
};

// "kept K of N rows (dropped A longer than the M-token context, B with zero output, C with zero
// prompt)": the line simulate prints and the error when nothing is kept (docs/workloads.md).
std::string DescribeKept(const LoadReport& report, int64_t max_seq_len);

struct LengthFilter {
  int64_t max_seq_len = 2048;  // the model's context window
};

// Reads a length dataset (TSV, header `input_toks<TAB>output_toks`) and filters it.
absl::StatusOr<std::vector<LengthPair>> LoadLengthDataset(const std::string& path,
                                                          const LengthFilter& filter,
                                                          LoadReport* report);

// The same on a table already open (fuzzing, tests): errors name table.path().
absl::StatusOr<std::vector<LengthPair>> ParseLengthDataset(TableReader& table,
                                                           const LengthFilter& filter,
                                                           LoadReport* report);

enum class ArrivalKind { kAllAtOnce, kPoisson, kGamma, kClosedLoop };

struct ArrivalOptions {
  ArrivalKind kind = ArrivalKind::kAllAtOnce;
  double rate_per_s = 0;    // kPoisson, kGamma: mean requests per second (> 0)
  double burstiness = 1.0;  // kGamma: shape of the gamma inter-arrival; 1 = Poisson
  int concurrency = 0;      // kClosedLoop: requests kept in flight (> 0)
};

// Parses "inf" / "all" (all at once) or a rate; used by --request-rate flags.
absl::StatusOr<ArrivalOptions> ParseArrival(absl::string_view request_rate, double burstiness,
                                            int max_concurrency);

// `count` arrival times (seconds, non-decreasing, the first at 0) for `arrivals`: all zero for
// kAllAtOnce and kClosedLoop; otherwise cumulative exponential (kPoisson) or gamma (kGamma, shape
// = burstiness, scale = 1 / (rate * burstiness)) gaps as in vLLM's benchmark_serving. Drawn from
// std::mt19937_64 seeded from `seed` (through a SplitMix64 mix, so arrival times depend only on
// the seed, the process and the count, not on the dataset). Errors: count < 1, bad options.
absl::StatusOr<std::vector<double>> ArrivalTimes(const ArrivalOptions& arrivals, int64_t count,
                                                 uint64_t seed);

// `count` requests sampled from `lengths` with `seed` (a seeded shuffle, taking the first
// `count`; reshuffled again if count exceeds the dataset), with arrival times from `arrivals`.
// Same inputs, same output. Errors: empty dataset, count < 1, bad arrival options.
absl::StatusOr<std::vector<RequestSpec>> SampleRequests(const std::vector<LengthPair>& lengths,
                                                        int64_t count, uint64_t seed,
                                                        const ArrivalOptions& arrivals);

struct SyntheticOptions {
  int64_t prompt_min = 128, prompt_max = 128;  // uniform in [min, max]; min == max: fixed
  int64_t output_min = 128, output_max = 128;
};

// Synthetic lengths (validated against the filter: a length over the context is an error).
absl::StatusOr<std::vector<LengthPair>> SyntheticLengths(const SyntheticOptions& options,
                                                         int64_t count, uint64_t seed,
                                                         const LengthFilter& filter);

// Reads a trace with arrival times (.csv or .jsonl by extension), filtered like datasets,
// sorted by arrival time.
absl::StatusOr<std::vector<RequestSpec>> LoadTrace(const std::string& path,
                                                   const LengthFilter& filter, LoadReport* report);

enum class TraceFormat { kCsv, kJsonl };

// The same on a table already open (read with ',' as the delimiter), in the given format.
absl::StatusOr<std::vector<RequestSpec>> ParseTrace(TableReader& table, TraceFormat format,
                                                    const LengthFilter& filter, LoadReport* report);

// Where ../shared/datasets lives: $NEUPIMS_DATASETS if set, else <source dir>/../shared/datasets,
// else ./../shared/datasets.
std::string DatasetsDir();
// Resolves "sharegpt" / "alpaca" to their TSV files in DatasetsDir(); other values are returned
// unchanged (a path).
std::string ResolveDataset(absl::string_view name_or_path);

// LoadLengthDataset(ResolveDataset(name_or_path), ...); when a named dataset is missing, the
// NOT_FOUND message says where it was looked for and how to point at it (NEUPIMS_DATASETS).
absl::StatusOr<std::vector<LengthPair>> LoadNamedDataset(absl::string_view name_or_path,
                                                         const LengthFilter& filter,
                                                         LoadReport* report);

}  // namespace neupims::workload

#endif  // NEUPIMS_TOOLS_WORKLOAD_WORKLOAD_H_
