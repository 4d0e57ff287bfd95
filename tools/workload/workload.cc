#include "tools/workload/workload.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/config_reader.h"
#include "common/option_ranges.h"
#include "common/splitmix64.h"
#include "common/status_macros.h"
#include "common/table_reader.h"
#include "nlohmann/json.hpp"

namespace neupims::workload {
namespace {

constexpr absl::string_view kDatasetHeader = "input_toks\toutput_toks";

// Lines quoted in error messages are cut to this many characters.
constexpr size_t kMaxQuoted = 80;

std::string Quote(absl::string_view text) {
  if (text.size() <= kMaxQuoted) return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kMaxQuoted), "...'");
}

bool IsBlank(absl::string_view line) { return absl::StripAsciiWhitespace(line).empty(); }

// A non-negative decimal integer filling all of `field` (surrounding spaces allowed).
std::optional<int64_t> ParseCount(absl::string_view field) {
  // Hot path (two per dataset row): trims inline, as absl::StripAsciiWhitespace would.
  while (!field.empty() && absl::ascii_isspace(static_cast<unsigned char>(field.front()))) {
    field.remove_prefix(1);
  }
  while (!field.empty() && absl::ascii_isspace(static_cast<unsigned char>(field.back()))) {
    field.remove_suffix(1);
  }
  if (field.empty()) return std::nullopt;
  int64_t value = 0;
  const char* end = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), end, value);
  if (ec != std::errc() || ptr != end || value < 0) return std::nullopt;
  return value;
}

// A finite non-negative number filling all of `field` (surrounding spaces allowed).
std::optional<double> ParseSeconds(absl::string_view field) {
  field = absl::StripAsciiWhitespace(field);
  if (field.empty()) return std::nullopt;
  double value = 0;
  const char* end = field.data() + field.size();
  auto [ptr, ec] = std::from_chars(field.data(), end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

absl::Status ValidateFilter(const LengthFilter& filter) {
  if (filter.max_seq_len < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_seq_len must be at least 2 (one prompt and one output token), got ",
                     filter.max_seq_len));
  }
  return absl::OkStatus();
}

// Applies the documented filter to one row, counting it in `report`. Each dropped row is counted
// once, in the first applicable category: zero output, zero prompt, too long.
bool Keep(const LengthFilter& filter, int64_t prompt, int64_t output, LoadReport& report) {
  ++report.rows;
  if (output == 0) {
    ++report.dropped_zero_output;
    return false;
  }
  if (prompt == 0) {
    ++report.dropped_zero_prompt;
    return false;
  }
  // prompt + output > max_seq_len, written so the sum cannot overflow.
  if (prompt > filter.max_seq_len || output > filter.max_seq_len - prompt) {
    ++report.dropped_too_long;
    return false;
  }
  ++report.kept;
  return true;
}

absl::Status ValidateArrivals(const ArrivalOptions& arrivals) {
  switch (arrivals.kind) {
    case ArrivalKind::kAllAtOnce:
      return absl::OkStatus();
    case ArrivalKind::kPoisson:
    case ArrivalKind::kGamma:
      if (!std::isfinite(arrivals.rate_per_s) || arrivals.rate_per_s <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "arrival rate must be a positive finite number, got ", arrivals.rate_per_s));
      }
      if (arrivals.kind == ArrivalKind::kGamma &&
          (!std::isfinite(arrivals.burstiness) || arrivals.burstiness <= 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("burstiness must be a positive finite number, got ", arrivals.burstiness));
      }
      return absl::OkStatus();
    case ArrivalKind::kClosedLoop:
      if (arrivals.concurrency <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("closed-loop concurrency must be positive, got ", arrivals.concurrency));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError("unknown arrival kind");
}

// Column layout of a CSV trace, from its header.
struct CsvColumns {
  int arrival = -1;
  int prompt = -1;
  int output = -1;
  size_t count = 0;
};

absl::StatusOr<CsvColumns> ParseCsvHeader(const TableReader& table) {
  const absl::string_view line = table.line();
  CsvColumns columns;
  bool has_id = false;
  const std::vector<absl::string_view> names = table.Split(line);
  columns.count = names.size();
  for (size_t i = 0; i < names.size(); ++i) {
    const absl::string_view name = absl::StripAsciiWhitespace(names[i]);
    int* slot = nullptr;
    if (name == "arrival_s") {
      slot = &columns.arrival;
    } else if (name == "prompt_tokens") {
      slot = &columns.prompt;
    } else if (name == "output_tokens") {
      slot = &columns.output;
    } else if (name == "id") {
      if (has_id) return table.Error("duplicate column 'id'");
      has_id = true;
      continue;
    } else {
      return table.Error(absl::StrCat("unknown column ", Quote(name),
                                      " (expected arrival_s, prompt_tokens, output_tokens and an "
                                      "optional id)"));
    }
    if (*slot >= 0) return table.Error(absl::StrCat("duplicate column ", Quote(name)));
    *slot = static_cast<int>(i);
  }
  std::vector<std::string> missing;
  if (columns.arrival < 0) missing.push_back("arrival_s");
  if (columns.prompt < 0) missing.push_back("prompt_tokens");
  if (columns.output < 0) missing.push_back("output_tokens");
  if (!missing.empty()) {
    return table.Error(absl::StrCat("header ", Quote(line), " lacks column(s) ",
                                    absl::StrJoin(missing, ", "),
                                    " (expected arrival_s,prompt_tokens,output_tokens)"));
  }
  return columns;
}

absl::Status ParseCsvTrace(TableReader& table, const LengthFilter& filter, LoadReport& report,
                           std::vector<RequestSpec>& out) {
  absl::string_view header;
  if (!table.NextLine(&header) || IsBlank(header)) {
    return table.Error("missing header 'arrival_s,prompt_tokens,output_tokens'");
  }
  ASSIGN_OR_RETURN(const CsvColumns columns, ParseCsvHeader(table));
  std::vector<absl::string_view> fields;
  while (table.NextRow(&fields)) {
    if (fields.size() != columns.count) {
      return table.Error(absl::StrCat("expected ", columns.count, " comma-separated fields, got ",
                                      fields.size(), " in ", Quote(table.line())));
    }
    const std::optional<double> arrival = ParseSeconds(fields[columns.arrival]);
    if (!arrival) {
      return table.Error(absl::StrCat("arrival_s ", Quote(fields[columns.arrival]),
                                      " is not a finite non-negative number"));
    }
    const std::optional<int64_t> prompt = ParseCount(fields[columns.prompt]);
    if (!prompt) {
      return table.Error(absl::StrCat("prompt_tokens ", Quote(fields[columns.prompt]),
                                      " is not a non-negative integer"));
    }
    const std::optional<int64_t> output = ParseCount(fields[columns.output]);
    if (!output) {
      return table.Error(absl::StrCat("output_tokens ", Quote(fields[columns.output]),
                                      " is not a non-negative integer"));
    }
    if (Keep(filter, *prompt, *output, report)) {
      out.push_back(RequestSpec{
          .id = 0, .arrival_s = *arrival, .prompt_tokens = *prompt, .output_tokens = *output});
    }
  }
  return absl::OkStatus();
}

// A non-negative integer member of a JSON object.
absl::StatusOr<int64_t> JsonCount(const nlohmann::ordered_json& value, absl::string_view key) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(key, " ", v, " is too large"));
    }
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) {
    const auto v = value.get<int64_t>();
    if (v >= 0) return v;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(key, " ", Quote(value.dump()), " is not a non-negative integer"));
}

absl::Status ParseJsonlTrace(TableReader& lines, const LengthFilter& filter, LoadReport& report,
                             std::vector<RequestSpec>& out) {
  absl::string_view line;
  while (lines.NextLine(&line)) {
    if (IsBlank(line)) continue;
    nlohmann::ordered_json object;
    // Strict: duplicate keys and out-of-range numbers are errors, never exceptions.
    if (absl::Status parsed = ParseStrictJson(line, "", &object); !parsed.ok()) {
      return lines.Error(parsed.message());
    }
    if (!object.is_object()) {
      return lines.Error(absl::StrCat("expected a JSON object, got ", Quote(line)));
    }
    std::optional<double> arrival;
    std::optional<int64_t> prompt, output;
    for (const auto& [key, value] : object.items()) {
      if (key == "arrival_s") {
        if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
          return lines.Error(absl::StrCat("arrival_s ", Quote(value.dump()),
                                          " is not a finite non-negative number"));
        }
        arrival = value.get<double>();
      } else if (key == "prompt_tokens" || key == "output_tokens") {
        absl::StatusOr<int64_t> count = JsonCount(value, key);
        if (!count.ok()) return lines.Error(count.status().message());
        (key == "prompt_tokens" ? prompt : output) = *count;
      } else if (key != "id") {
        return lines.Error(absl::StrCat("unknown key ", Quote(key),
                                        " (expected arrival_s, prompt_tokens, output_tokens and "
                                        "an optional id)"));
      }
    }
    std::vector<std::string> missing;
    if (!arrival) missing.push_back("arrival_s");
    if (!prompt) missing.push_back("prompt_tokens");
    if (!output) missing.push_back("output_tokens");
    if (!missing.empty()) {
      return lines.Error(absl::StrCat("missing key(s) ", absl::StrJoin(missing, ", ")));
    }
    if (Keep(filter, *prompt, *output, report)) {
      out.push_back(RequestSpec{
          .id = 0, .arrival_s = *arrival, .prompt_tokens = *prompt, .output_tokens = *output});
    }
  }
  return absl::OkStatus();
}

// A length-dataset row in any form TableReader::NextRow accepts (surrounding spaces), with the
// errors naming the field; `line` is the table's line last returned and not blank.
absl::Status ParseDatasetRow(const TableReader& table, absl::string_view line, int64_t* prompt,
                             int64_t* output) {
  const std::vector<absl::string_view> fields = table.Split(line);
  if (fields.size() != 2) {
    return table.Error(absl::StrCat(
        "expected 2 tab-separated fields (input_toks, output_toks), got ", Quote(table.line())));
  }
  const std::optional<int64_t> p = ParseCount(fields[0]);
  if (!p) {
    return table.Error(
        absl::StrCat("input_toks ", Quote(fields[0]), " is not a non-negative integer"));
  }
  const std::optional<int64_t> o = ParseCount(fields[1]);
  if (!o) {
    return table.Error(
        absl::StrCat("output_toks ", Quote(fields[1]), " is not a non-negative integer"));
  }
  *prompt = *p;
  *output = *o;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<LengthPair>> LoadLengthDataset(const std::string& path,
                                                          const LengthFilter& filter,
                                                          LoadReport* report) {
  RETURN_IF_ERROR(ValidateFilter(filter));
  ASSIGN_OR_RETURN(TableReader table, TableReader::Open(path, '\t'));
  return ParseLengthDataset(table, filter, report);
}

absl::StatusOr<std::vector<LengthPair>> ParseLengthDataset(TableReader& table,
                                                           const LengthFilter& filter,
                                                           LoadReport* report) {
  RETURN_IF_ERROR(ValidateFilter(filter));
  LoadReport local;
  local.source = table.path();
  absl::string_view header;
  if (!table.NextLine(&header)) return table.Error("empty file (expected header)");
  if (header != kDatasetHeader) {
    return table.Error(
        absl::StrCat("expected header 'input_toks<TAB>output_toks', got ", Quote(header)));
  }
  // One pair per line at most: this never reallocates, and reserves no more than the rows
  // need (no shrink_to_fit, which would copy every pair).
  std::vector<LengthPair> pairs;
  pairs.reserve(table.LinesLeftBound());
  // The filter by value: a reference's max_seq_len could be any int64_t the pairs' stores
  // write, so it was loaded again for every row.
  auto add = [filter, &local, &pairs](int64_t prompt, int64_t output) {
    if (Keep(filter, prompt, output, local)) {
      pairs.push_back(LengthPair{.prompt_tokens = prompt, .output_tokens = output});
    }
  };
  absl::string_view line;
  while (true) {
    // The shipped datasets' form, "123<TAB>45", by the reader's fast path; any other line
    // (blank lines, spaces, errors) on the general path, then the fast path again.
    table.TakeCountPairs(add);
    if (!table.NextLine(&line)) break;
    if (IsBlank(line)) continue;
    int64_t prompt = 0, output = 0;
    RETURN_IF_ERROR(ParseDatasetRow(table, line, &prompt, &output));
    add(prompt, output);
  }
  if (report != nullptr) *report = std::move(local);
  return pairs;
}

absl::StatusOr<ArrivalOptions> ParseArrival(absl::string_view request_rate, double burstiness,
                                            int max_concurrency) {
  if (const std::string problem = DoubleRangeProblem(burstiness, option_ranges::kBurstiness);
      !problem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--burstiness ", burstiness, " ", problem));
  }
  if (max_concurrency < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-concurrency must be positive (0 = open loop), got ", max_concurrency));
  }
  const absl::string_view rate_text = absl::StripAsciiWhitespace(request_rate);
  const bool all_at_once =
      absl::EqualsIgnoreCase(rate_text, "inf") || absl::EqualsIgnoreCase(rate_text, "all");
  ArrivalOptions options;
  options.burstiness = burstiness;
  if (max_concurrency > 0) {
    if (!all_at_once) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--request-rate must be 'inf' or 'all' with --max-concurrency (a closed loop sends a "
          "new request when one finishes), got '",
          request_rate, "'"));
    }
    options.kind = ArrivalKind::kClosedLoop;
    options.concurrency = max_concurrency;
    return options;
  }
  if (all_at_once) {
    options.kind = ArrivalKind::kAllAtOnce;
    return options;
  }
  double rate = 0;
  const char* end = rate_text.data() + rate_text.size();
  auto [ptr, ec] = std::from_chars(rate_text.data(), end, rate);
  if (rate_text.empty() || ec != std::errc() || ptr != end || !std::isfinite(rate) || rate <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--request-rate must be 'inf', 'all' or a positive number of requests per "
                     "second, got '",
                     request_rate, "'"));
  }
  options.kind = burstiness == 1.0 ? ArrivalKind::kPoisson : ArrivalKind::kGamma;
  options.rate_per_s = rate;
  return options;
}

absl::StatusOr<std::vector<double>> ArrivalTimes(const ArrivalOptions& arrivals, int64_t count,
                                                 uint64_t seed) {
  RETURN_IF_ERROR(ValidateArrivals(arrivals));
  if (count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("request count must be positive, got ", count));
  }
  std::vector<double> times(static_cast<size_t>(count), 0.0);
  if (arrivals.kind == ArrivalKind::kAllAtOnce || arrivals.kind == ArrivalKind::kClosedLoop) {
    return times;
  }
  // SplitMix64 of the user's seed: arrival times do not share a random stream with the shuffle.
  std::mt19937_64 rng(SplitMix64(seed));
  // As vLLM's benchmark_serving: the first request goes at t = 0, each later one after an
  // independent inter-arrival gap.
  double t = 0;
  if (arrivals.kind == ArrivalKind::kPoisson) {
    std::exponential_distribution<double> gap(arrivals.rate_per_s);
    for (int64_t i = 1; i < count; ++i) times[i] = t += gap(rng);
  } else {
    std::gamma_distribution<double> gap(arrivals.burstiness,
                                        1.0 / (arrivals.rate_per_s * arrivals.burstiness));
    for (int64_t i = 1; i < count; ++i) times[i] = t += gap(rng);
  }
  return times;
}

namespace {

// std::shuffle itself, with every call inside it inlined (GCC's `flatten`): the 195k draws of a
// ShareGPT shuffle went through two out-of-line calls each (uniform_int_distribution's
// operator() and the engine's), with their prologues, epilogues and reloads of the engine's
// state. The same code runs, so the same permutation and the same engine state come out.
template <typename Index>
[[gnu::flatten]] void Shuffle(Index* first, Index* last, std::mt19937_64& rng) {
  std::shuffle(first, last, rng);
}

// std::iota(order, order + n, 0) for the 32-bit indices, four a step: GCC -O2 does not
// vectorise the iota loop (5 instructions an index, 1.9 M for ShareGPT's 391k rows).
void Iota(uint32_t* order, size_t n) {
  using Lanes = uint32_t __attribute__((vector_size(16)));
  Lanes next = {0, 1, 2, 3};
  size_t i = 0;
  for (; n - i >= 4; i += 4) {
    std::memcpy(order + i, &next, sizeof next);
    next += 4;
  }
  for (; i < n; ++i) order[i] = static_cast<uint32_t>(i);
}
void Iota(size_t* order, size_t n) { std::iota(order, order + n, size_t{0}); }

// The first `count` rows of `lengths` in the order of a seeded shuffle of 0 .. n-1, shuffled again
// in place each time the order is used up. std::shuffle takes its draws by the range's length
// (the iterator's difference type), never by the element type, so the indices are stored in
// the narrowest type that holds them: the same permutation as size_t indices with half the
// memory, and no zeroing pass before the iota (std::vector would value-initialise them).
template <typename Index>
std::vector<RequestSpec> SampleInShuffledOrder(const std::vector<LengthPair>& lengths,
                                               int64_t count, uint64_t seed,
                                               const std::vector<double>& times) {
  std::mt19937_64 rng(seed);
  const size_t n = lengths.size();
  const std::unique_ptr<Index[]> order(new Index[n]);
  Iota(order.get(), n);
  std::vector<RequestSpec> requests;
  requests.reserve(static_cast<size_t>(count));
  size_t next = n;  // forces the first shuffle
  for (int64_t i = 0; i < count; ++i) {
    if (next == n) {
      Shuffle(order.get(), order.get() + n, rng);
      next = 0;
    }
    const LengthPair& pair = lengths[order[next++]];
    requests.push_back(RequestSpec{.id = i,
                                   .arrival_s = times[static_cast<size_t>(i)],
                                   .prompt_tokens = pair.prompt_tokens,
                                   .output_tokens = pair.output_tokens});
  }
  return requests;
}

}  // namespace

absl::StatusOr<std::vector<RequestSpec>> SampleRequests(const std::vector<LengthPair>& lengths,
                                                        int64_t count, uint64_t seed,
                                                        const ArrivalOptions& arrivals) {
  if (lengths.empty()) return absl::InvalidArgumentError("cannot sample from an empty dataset");
  ASSIGN_OR_RETURN(const std::vector<double> times, ArrivalTimes(arrivals, count, seed));
  if (lengths.size() <= std::numeric_limits<uint32_t>::max()) {
    return SampleInShuffledOrder<uint32_t>(lengths, count, seed, times);
  }
  return SampleInShuffledOrder<size_t>(lengths, count, seed, times);
}

absl::StatusOr<std::vector<LengthPair>> SyntheticLengths(const SyntheticOptions& options,
                                                         int64_t count, uint64_t seed,
                                                         const LengthFilter& filter) {
  RETURN_IF_ERROR(ValidateFilter(filter));
  if (count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("request count must be positive, got ", count));
  }
  if (options.prompt_min < 1 || options.prompt_min > options.prompt_max) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt length range must satisfy 1 <= min <= max, got [", options.prompt_min,
                     ", ", options.prompt_max, "]"));
  }
  if (options.output_min < 1 || options.output_min > options.output_max) {
    return absl::InvalidArgumentError(
        absl::StrCat("output length range must satisfy 1 <= min <= max, got [", options.output_min,
                     ", ", options.output_max, "]"));
  }
  if (options.prompt_max > filter.max_seq_len ||
      options.output_max > filter.max_seq_len - options.prompt_max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "longest synthetic request (prompt ", options.prompt_max, " + output ", options.output_max,
        " tokens) exceeds the model's max sequence length ", filter.max_seq_len));
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> prompt(options.prompt_min, options.prompt_max);
  std::uniform_int_distribution<int64_t> output(options.output_min, options.output_max);
  std::vector<LengthPair> pairs;
  pairs.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    LengthPair pair;
    pair.prompt_tokens = prompt(rng);
    pair.output_tokens = output(rng);
    pairs.push_back(pair);
  }
  return pairs;
}

absl::StatusOr<std::vector<RequestSpec>> LoadTrace(const std::string& path,
                                                   const LengthFilter& filter, LoadReport* report) {
  RETURN_IF_ERROR(ValidateFilter(filter));
  const std::string extension =
      absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  if (extension != ".csv" && extension != ".jsonl") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unknown trace format (expected a .csv or .jsonl file)"));
  }
  ASSIGN_OR_RETURN(TableReader table, TableReader::Open(path, ','));
  return ParseTrace(table, extension == ".csv" ? TraceFormat::kCsv : TraceFormat::kJsonl, filter,
                    report);
}

absl::StatusOr<std::vector<RequestSpec>> ParseTrace(TableReader& table, TraceFormat format,
                                                    const LengthFilter& filter,
                                                    LoadReport* report) {
  RETURN_IF_ERROR(ValidateFilter(filter));
  LoadReport local;
  local.source = table.path();
  std::vector<RequestSpec> requests;
  if (format == TraceFormat::kCsv) {
    RETURN_IF_ERROR(ParseCsvTrace(table, filter, local, requests));
  } else {
    RETURN_IF_ERROR(ParseJsonlTrace(table, filter, local, requests));
  }
  std::stable_sort(
      requests.begin(), requests.end(),
      [](const RequestSpec& a, const RequestSpec& b) { return a.arrival_s < b.arrival_s; });
  for (size_t i = 0; i < requests.size(); ++i) requests[i].id = static_cast<int64_t>(i);
  if (report != nullptr) *report = std::move(local);
  return requests;
}

std::string DatasetsDir() {
  const char* env = std::getenv("NEUPIMS_DATASETS");
  if (env != nullptr && *env != '\0') return env;
#ifdef NEUPIMS_SOURCE_DIR
  {
    const std::filesystem::path dir =
        (std::filesystem::path(NEUPIMS_SOURCE_DIR) / ".." / "shared" / "datasets")
            .lexically_normal();
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec)) return dir.string();
  }
#endif
  return "../shared/datasets";
}

std::string ResolveDataset(absl::string_view name_or_path) {
  if (name_or_path == "sharegpt") return DatasetsDir() + "/sharegpt_lengths.tsv";
  if (name_or_path == "alpaca") return DatasetsDir() + "/alpaca_lengths.tsv";
  return std::string(name_or_path);
}

std::string DescribeKept(const LoadReport& report, int64_t max_seq_len) {
  return absl::StrCat("kept ", report.kept, " of ", report.rows, " rows (dropped ",
                      report.dropped_too_long, " longer than the ", max_seq_len, "-token context, ",
                      report.dropped_zero_output, " with zero output, ", report.dropped_zero_prompt,
                      " with zero prompt)");
}

absl::StatusOr<std::vector<LengthPair>> LoadNamedDataset(absl::string_view name_or_path,
                                                         const LengthFilter& filter,
                                                         LoadReport* report) {
  const std::string path = ResolveDataset(name_or_path);
  LoadReport local;
  if (report == nullptr) report = &local;
  absl::StatusOr<std::vector<LengthPair>> pairs = LoadLengthDataset(path, filter, report);
  if (pairs.ok() && pairs->empty()) {  // every row dropped: say which file and why
    return absl::InvalidArgumentError(absl::StrCat(
        "--dataset ", path, ": no usable rows: ", DescribeKept(*report, filter.max_seq_len)));
  }
  // ResolveDataset returns a plain path unchanged; only a resolved name gets the hint.
  if (absl::IsNotFound(pairs.status()) && path != name_or_path) {
    return absl::NotFoundError(absl::StrCat(
        "--dataset ", name_or_path, ": ", pairs.status().message(),
        " (named datasets are read from $NEUPIMS_DATASETS, else from ../shared/datasets beside "
        "the source tree; set NEUPIMS_DATASETS to the directory holding ",
        std::filesystem::path(path).filename().string(), ")"));
  }
  return pairs;
}

}  // namespace neupims::workload
