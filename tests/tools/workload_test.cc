#include "tools/workload/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::workload {
namespace {

using ::testing::HasSubstr;

// Writes `contents` to a fresh file under the test temp dir and returns its path.
std::string WriteTemp(absl::string_view name, absl::string_view contents) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / std::string(name)).string();
  const absl::Status written = WriteFile(path, contents);
  EXPECT_TRUE(written.ok()) << written;
  return path;
}

std::vector<LengthPair> SmallDataset(int n) {
  std::vector<LengthPair> pairs;
  for (int i = 0; i < n; ++i) pairs.push_back({.prompt_tokens = 10 + i, .output_tokens = 20 + i});
  return pairs;
}

// Inter-arrival gaps of consecutive requests.
std::vector<double> Gaps(const std::vector<RequestSpec>& requests) {
  std::vector<double> gaps;
  for (size_t i = 1; i < requests.size(); ++i) {
    gaps.push_back(requests[i].arrival_s - requests[i - 1].arrival_s);
  }
  return gaps;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double CoefficientOfVariation(const std::vector<double>& v) {
  const double mean = Mean(v);
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / static_cast<double>(v.size() - 1)) / mean;
}

ArrivalOptions AllAtOnce() { return ArrivalOptions{}; }

bool SameRequests(const std::vector<RequestSpec>& a, const std::vector<RequestSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].arrival_s != b[i].arrival_s ||
        a[i].prompt_tokens != b[i].prompt_tokens || a[i].output_tokens != b[i].output_tokens) {
      return false;
    }
  }
  return true;
}

// ---- Real datasets -------------------------------------------------------------------------

TEST(LengthDataset, ShareGptLoadsAllRowsAndDropsAddUp) {
  const std::string path = ResolveDataset("sharegpt");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  LoadReport report;
  absl::StatusOr<std::vector<LengthPair>> pairs =
      LoadLengthDataset(path, LengthFilter{.max_seq_len = 2048}, &report);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(report.source, path);
  EXPECT_EQ(report.rows, 391726);
  EXPECT_EQ(report.dropped_zero_output, 907);  // documented in the datasets README
  EXPECT_GT(report.dropped_too_long, 0);
  EXPECT_EQ(report.kept + report.dropped_too_long + report.dropped_zero_output +
                report.dropped_zero_prompt,
            report.rows);
  EXPECT_EQ(static_cast<int64_t>(pairs->size()), report.kept);
  for (const LengthPair& pair : *pairs) {
    ASSERT_GE(pair.prompt_tokens, 1);
    ASSERT_GE(pair.output_tokens, 1);
    ASSERT_LE(pair.prompt_tokens + pair.output_tokens, 2048);
  }
}

TEST(LengthDataset, AlpacaZeroOutputRowsAreDroppedAndCounted) {
  const std::string path = ResolveDataset("alpaca");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  LoadReport report;
  absl::StatusOr<std::vector<LengthPair>> pairs =
      LoadLengthDataset(path, LengthFilter{.max_seq_len = 2048}, &report);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(report.rows, 52002);
  EXPECT_EQ(report.dropped_zero_output, 28);
  EXPECT_EQ(report.kept, 52002 - 28);
  EXPECT_EQ(report.dropped_too_long, 0);
  EXPECT_EQ(report.dropped_zero_prompt, 0);
  EXPECT_EQ(static_cast<int64_t>(pairs->size()), report.kept);
}

TEST(ResolveDataset, NamesMapToTsvFilesAndPathsPassThrough) {
  EXPECT_THAT(ResolveDataset("sharegpt"), ::testing::EndsWith("/sharegpt_lengths.tsv"));
  EXPECT_THAT(ResolveDataset("alpaca"), ::testing::EndsWith("/alpaca_lengths.tsv"));
  EXPECT_EQ(ResolveDataset("my/own.tsv"), "my/own.tsv");
}

// Sets an environment variable for one scope and restores its previous state.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) saved_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (saved_.has_value()) {
      setenv(name_, saved_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

TEST(ResolveDataset, EnvironmentVariableOverridesTheDirectory) {
  ScopedEnv env("NEUPIMS_DATASETS", "/some/where");
  EXPECT_EQ(ResolveDataset("alpaca"), "/some/where/alpaca_lengths.tsv");
}

TEST(LoadNamedDataset, MissingNamedDatasetSaysHowToPointAtIt) {
  const std::string empty_dir = (std::filesystem::path(::testing::TempDir()) / "no_datasets");
  std::filesystem::create_directories(empty_dir);
  ScopedEnv env("NEUPIMS_DATASETS", empty_dir);
  const absl::StatusOr<std::vector<LengthPair>> named =
      LoadNamedDataset("sharegpt", {2048}, nullptr);
  EXPECT_EQ(named.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(named.status().message(), HasSubstr("--dataset sharegpt"));
  EXPECT_THAT(named.status().message(), HasSubstr(empty_dir + "/sharegpt_lengths.tsv"));
  EXPECT_THAT(named.status().message(), HasSubstr("NEUPIMS_DATASETS"));
  // A plain path gets the plain message: the user named the file, no hint about datasets.
  const absl::StatusOr<std::vector<LengthPair>> path =
      LoadNamedDataset(empty_dir + "/mine.tsv", {2048}, nullptr);
  EXPECT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(path.status().message(), ::testing::Not(HasSubstr("NEUPIMS_DATASETS")));
}

// ---- Dataset parsing and filtering ---------------------------------------------------------

TEST(LengthDataset, FiltersEachRowIntoExactlyOneCategory) {
  const std::string path = WriteTemp("filter.tsv",
                                     "input_toks\toutput_toks\n"
                                     "10\t20\n"
                                     "0\t5\n"      // zero prompt
                                     "5\t0\n"      // zero output
                                     "0\t0\n"      // zero output (counted once)
                                     "100\t29\n"   // exactly the context: kept
                                     "100\t30\n"   // one over: too long
                                     "\n"          // blank lines are skipped
                                     "7\t8\r\n");  // CRLF accepted
  LoadReport report;
  absl::StatusOr<std::vector<LengthPair>> pairs =
      LoadLengthDataset(path, LengthFilter{.max_seq_len = 129}, &report);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(report.rows, 7);
  EXPECT_EQ(report.kept, 3);
  EXPECT_EQ(report.dropped_zero_prompt, 1);
  EXPECT_EQ(report.dropped_zero_output, 2);
  EXPECT_EQ(report.dropped_too_long, 1);
  ASSERT_EQ(pairs->size(), 3u);
  EXPECT_EQ((*pairs)[1].prompt_tokens, 100);
  EXPECT_EQ((*pairs)[1].output_tokens, 29);
  EXPECT_EQ((*pairs)[2].prompt_tokens, 7);
  EXPECT_EQ((*pairs)[2].output_tokens, 8);
}

// The loader reads "123<TAB>45" rows in one pass and every other form through the general
// reader: both must give the same values.
TEST(LengthDataset, PlainAndPaddedRowsReadAlike) {
  const std::string path = WriteTemp("forms.tsv",
                                     "input_toks\toutput_toks\n"
                                     "12\t34\n"
                                     " 12 \t 34\n"    // spaces: the general reader trims them
                                     "0012\t034\r\n"  // leading zeros, CRLF
                                     "   \n"          // whitespace only: blank
                                     "12\t0000000000000000000034\n");  // 22 digits
  absl::StatusOr<std::vector<LengthPair>> pairs =
      LoadLengthDataset(path, LengthFilter{.max_seq_len = 2048}, nullptr);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 4u);
  for (const LengthPair& p : *pairs) {
    EXPECT_EQ(p.prompt_tokens, 12);
    EXPECT_EQ(p.output_tokens, 34);
  }
}

// The one-pass "123<TAB>45" rows and the general reader agree at every edge of that form.
TEST(LengthDataset, FastRowsAndGeneralRowsMeetAtTheEdgesOfTheForm) {
  const std::string path = WriteTemp("edges.tsv",
                                     "input_toks\toutput_toks\n"
                                     "12\t34\r\n"                 // CRLF
                                     "000000000000000012\t34\n"   // 18 digits: one pass
                                     "0000000000000000012\t34\n"  // 19 digits: general reader
                                     "12\t34 \n"                  // trailing space: general
                                     "\n"                         // blank
                                     "12\t34\r");                 // CR at the end of the file
  absl::StatusOr<std::vector<LengthPair>> pairs =
      LoadLengthDataset(path, LengthFilter{.max_seq_len = 2048}, nullptr);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 5u);
  for (const LengthPair& p : *pairs) {
    EXPECT_EQ(p.prompt_tokens, 12);
    EXPECT_EQ(p.output_tokens, 34);
  }
  // A bad row after one-pass rows still names its own line.
  const std::string bad = WriteTemp("late.tsv", "input_toks\toutput_toks\n1\t2\n3\t4\r\n5\t\n");
  EXPECT_THAT(LoadLengthDataset(bad, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(bad, ":4: ")));
}

// Random files whose rows are all "123<TAB>45" lines (LF or CRLF, the last one ending in LF,
// CRLF, CR or nothing), read by the rows' fast path, and the same files with a blank line in
// front of the rows (taken by the general path first): both give the same pairs and the same
// report, filter included.
TEST(LengthDataset, ABlankLineBeforeTheRowsChangesNeitherThePairsNorTheReport) {
  std::mt19937_64 rng(7);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const char* const kEnds[] = {"\n", "\r\n", "\r", ""};
  for (int file = 0; file < 40; ++file) {
    SCOPED_TRACE(::testing::Message() << "file " << file);
    std::string rows;
    const int64_t count = uniform(0, 60);
    for (int64_t i = 0; i < count; ++i) {
      // Leading zeros, zero counts and rows too long for the context, all in the form.
      absl::StrAppend(&rows, std::string(static_cast<size_t>(uniform(0, 1)), '0'), uniform(0, 1500),
                      "\t", uniform(0, 1500),
                      i + 1 < count ? kEnds[uniform(0, 1)] : kEnds[uniform(0, 3)]);
    }
    const LengthFilter filter{.max_seq_len = 2048};
    TableReader rows_only("a.tsv", absl::StrCat("input_toks\toutput_toks\n", rows), '\t');
    TableReader blank_first("a.tsv", absl::StrCat("input_toks\toutput_toks\n\n", rows), '\t');
    LoadReport a, b;
    const absl::StatusOr<std::vector<LengthPair>> fast = ParseLengthDataset(rows_only, filter, &a);
    const absl::StatusOr<std::vector<LengthPair>> general =
        ParseLengthDataset(blank_first, filter, &b);
    ASSERT_TRUE(fast.ok()) << fast.status();
    ASSERT_TRUE(general.ok()) << general.status();
    ASSERT_EQ(fast->size(), general->size());
    for (size_t i = 0; i < fast->size(); ++i) {
      EXPECT_EQ((*fast)[i].prompt_tokens, (*general)[i].prompt_tokens) << i;
      EXPECT_EQ((*fast)[i].output_tokens, (*general)[i].output_tokens) << i;
    }
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.rows, count);
    EXPECT_EQ(b.rows, count);
    EXPECT_EQ(a.kept, b.kept);
    EXPECT_EQ(a.dropped_too_long, b.dropped_too_long);
    EXPECT_EQ(a.dropped_zero_output, b.dropped_zero_output);
    EXPECT_EQ(a.dropped_zero_prompt, b.dropped_zero_prompt);
  }
}

// A "123<TAB>45" row is read by the one-pass digit loop, the same row after a space only by the
// general reader (which trims it): every random short row gives the same pair, or an error, on
// both.
TEST(LengthDataset, OnePassRowsMatchTheGeneralReader) {
  std::mt19937_64 rng(13);
  // Digits mostly; rows up to 22 bytes (across the one-pass form's 18-byte limit), a NUL inside
  // a row, and a last row without its LF (followed by the contents' NUL).
  std::string alphabet = "0123456789012345678901234567890123456789\t\t\t \rx-";
  alphabet += '\0';
  const LengthFilter filter{.max_seq_len = 1 << 30};
  for (int trial = 0; trial < 20000; ++trial) {
    std::string row;
    const size_t size = rng() % 23;
    for (size_t i = 0; i < size; ++i) row += alphabet[rng() % alphabet.size()];
    const char* const end = rng() % 4 == 0 ? "" : "\n";
    SCOPED_TRACE(::testing::Message()
                 << "row '" << absl::CEscape(row) << "', end '" << absl::CEscape(end) << "'");
    TableReader plain("a.tsv", absl::StrCat("input_toks\toutput_toks\n", row, end), '\t');
    TableReader padded("a.tsv", absl::StrCat("input_toks\toutput_toks\n ", row, end), '\t');
    const absl::StatusOr<std::vector<LengthPair>> a = ParseLengthDataset(plain, filter, nullptr);
    const absl::StatusOr<std::vector<LengthPair>> b = ParseLengthDataset(padded, filter, nullptr);
    ASSERT_EQ(a.ok(), b.ok()) << a.status() << " / " << b.status();
    if (!a.ok()) continue;
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].prompt_tokens, (*b)[i].prompt_tokens);
      EXPECT_EQ((*a)[i].output_tokens, (*b)[i].output_tokens);
    }
  }
}

TEST(LengthDataset, MalformedLineErrorNamesFileAndLine) {
  const std::string path =
      WriteTemp("bad.tsv", "input_toks\toutput_toks\n1\t2\n3\t4\n5\tx7\n8\t9\n");
  absl::StatusOr<std::vector<LengthPair>> pairs = LoadLengthDataset(path, LengthFilter{}, nullptr);
  ASSERT_EQ(pairs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pairs.status().message(), HasSubstr(absl::StrCat(path, ":4: ")));
  EXPECT_THAT(pairs.status().message(), HasSubstr("output_toks"));
}

TEST(LengthDataset, WrongFieldCountAndNegativeValuesAreErrors) {
  const std::string three = WriteTemp("three.tsv", "input_toks\toutput_toks\n1\t2\t3\n");
  EXPECT_THAT(LoadLengthDataset(three, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(three, ":2: expected 2 tab-separated fields")));
  const std::string one = WriteTemp("one.tsv", "input_toks\toutput_toks\n1 2\n");
  EXPECT_THAT(LoadLengthDataset(one, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(one, ":2: ")));
  const std::string negative = WriteTemp("negative.tsv", "input_toks\toutput_toks\n-1\t2\n");
  EXPECT_THAT(LoadLengthDataset(negative, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(negative, ":2: input_toks")));
}

// Lines the fast path leaves to the general reader keep its errors, naming the line and field:
// a leading '+', a count past int64_t, an empty field, a third column (after fast rows).
TEST(LengthDataset, SignsOverflowsEmptyFieldsAndExtraColumnsAreErrorsNamingLineAndField) {
  const std::pair<const char*, const char*> cases[] = {
      {"+12\t3", ":3: input_toks '+12' is not a non-negative integer"},
      {"12\t+3", ":3: output_toks '+3' is not a non-negative integer"},
      {"99999999999999999999\t3", ":3: input_toks '99999999999999999999' is not a"},
      {"12\t", ":3: output_toks '' is not a non-negative integer"},
      {"12\t3\t4", ":3: expected 2 tab-separated fields"},
  };
  for (const auto& [row, error] : cases) {
    const std::string path =
        WriteTemp("edge_error.tsv", absl::StrCat("input_toks\toutput_toks\n1\t2\r\n", row, "\n"));
    EXPECT_THAT(LoadLengthDataset(path, LengthFilter{}, nullptr).status().message(),
                HasSubstr(absl::StrCat(path, error)))
        << row;
  }
}

TEST(LengthDataset, WrongHeaderIsAnError) {
  const std::string path = WriteTemp("header.tsv", "prompt\toutput\n1\t2\n");
  absl::StatusOr<std::vector<LengthPair>> pairs = LoadLengthDataset(path, LengthFilter{}, nullptr);
  ASSERT_EQ(pairs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pairs.status().message(), HasSubstr(absl::StrCat(path, ":1: expected header")));
  const std::string empty = WriteTemp("empty.tsv", "");
  EXPECT_EQ(LoadLengthDataset(empty, LengthFilter{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LengthDataset, MissingFileIsNotFoundNamingThePath) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "does_not_exist.tsv").string();
  absl::StatusOr<std::vector<LengthPair>> pairs = LoadLengthDataset(path, LengthFilter{}, nullptr);
  EXPECT_EQ(pairs.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(pairs.status().message(), HasSubstr(path));
}

// ---- Sampling ------------------------------------------------------------------------------

TEST(SampleRequests, SameSeedGivesIdenticalListsAndDifferentSeedDiffers) {
  const std::vector<LengthPair> data = SmallDataset(500);
  const ArrivalOptions poisson{.kind = ArrivalKind::kPoisson, .rate_per_s = 4.0};
  auto a = SampleRequests(data, 100, 42, poisson);
  auto b = SampleRequests(data, 100, 42, poisson);
  auto c = SampleRequests(data, 100, 43, poisson);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(SameRequests(*a, *b));
  EXPECT_FALSE(SameRequests(*a, *c));
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ((*a)[i].id, i);
}

TEST(SampleRequests, SamplesWithoutReplacementUpToTheDatasetSize) {
  const std::vector<LengthPair> data = SmallDataset(50);
  auto requests = SampleRequests(data, 50, 7, AllAtOnce());
  ASSERT_TRUE(requests.ok()) << requests.status();
  std::vector<int64_t> prompts;
  for (const RequestSpec& r : *requests) prompts.push_back(r.prompt_tokens);
  std::sort(prompts.begin(), prompts.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(prompts[i], 10 + i);
}

TEST(SampleRequests, CountLargerThanDatasetReshuffles) {
  const std::vector<LengthPair> data = SmallDataset(10);
  auto requests = SampleRequests(data, 35, 1, AllAtOnce());
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 35u);
  // Each full pass of 10 is a permutation of the dataset.
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<int64_t> prompts;
    for (int i = 0; i < 10; ++i) prompts.push_back((*requests)[pass * 10 + i].prompt_tokens);
    std::sort(prompts.begin(), prompts.end());
    for (int i = 0; i < 10; ++i) EXPECT_EQ(prompts[i], 10 + i);
  }
  for (int64_t i = 0; i < 35; ++i) EXPECT_EQ((*requests)[i].id, i);
}

// The rows are taken in the order of std::shuffle over size_t indices 0 .. n-1 from
// std::mt19937_64(seed), reshuffled in place when used up (the sampler stores its indices in 32
// bits; std::shuffle's draws depend on the range's length, not the element type): checked on odd
// and even sizes, 1 .. 10,007 rows, with counts past the size.
TEST(SampleRequests, OrderIsTheSeededShuffleOfSizeTIndices) {
  for (const int n : {1, 2, 3, 10, 11, 500, 10007}) {
    for (const int64_t count : {int64_t{1}, int64_t{n}, int64_t{2 * n + 3}}) {
      SCOPED_TRACE(absl::StrCat(n, " rows, ", count, " requests"));
      const std::vector<LengthPair> data = SmallDataset(n);
      const uint64_t seed = 1000 + n;
      absl::StatusOr<std::vector<RequestSpec>> got = SampleRequests(data, count, seed, AllAtOnce());
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), static_cast<size_t>(count));
      std::mt19937_64 rng(seed);
      std::vector<size_t> order(data.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      for (int64_t i = 0; i < count; ++i) {
        const size_t at = static_cast<size_t>(i) % order.size();
        if (at == 0) std::shuffle(order.begin(), order.end(), rng);
        ASSERT_EQ((*got)[i].prompt_tokens, data[order[at]].prompt_tokens) << i;
        ASSERT_EQ((*got)[i].output_tokens, data[order[at]].output_tokens) << i;
      }
    }
  }
}

TEST(SampleRequests, RejectsEmptyDatasetBadCountAndBadArrivals) {
  EXPECT_EQ(SampleRequests({}, 1, 0, AllAtOnce()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SampleRequests(SmallDataset(3), 0, 0, AllAtOnce()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SampleRequests(SmallDataset(3), 1, 0, {.kind = ArrivalKind::kPoisson}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      SampleRequests(SmallDataset(3), 1, 0, {.kind = ArrivalKind::kClosedLoop}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// ---- Arrival processes ---------------------------------------------------------------------

TEST(Arrivals, PoissonMeanInterArrivalMatchesRate) {
  const double rate = 8.0;
  auto requests = SampleRequests(SmallDataset(100), 20000, 3,
                                 {.kind = ArrivalKind::kPoisson, .rate_per_s = rate});
  ASSERT_TRUE(requests.ok()) << requests.status();
  EXPECT_EQ(requests->front().arrival_s, 0.0);
  const std::vector<double> gaps = Gaps(*requests);
  for (double g : gaps) ASSERT_GE(g, 0.0);
  EXPECT_NEAR(Mean(gaps), 1.0 / rate, 0.05 / rate);
  EXPECT_NEAR(CoefficientOfVariation(gaps), 1.0, 0.1);
}

TEST(Arrivals, GammaBurstinessSetsCoefficientOfVariation) {
  const double rate = 5.0;
  auto options = ParseArrival("5", 0.5, 0);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, ArrivalKind::kGamma);
  auto requests = SampleRequests(SmallDataset(100), 20000, 11, *options);
  ASSERT_TRUE(requests.ok()) << requests.status();
  const std::vector<double> gaps = Gaps(*requests);
  EXPECT_NEAR(Mean(gaps), 1.0 / rate, 0.05 / rate);
  const double expected_cv = 1.0 / std::sqrt(0.5);
  EXPECT_NEAR(CoefficientOfVariation(gaps), expected_cv, 0.1 * expected_cv);
}

TEST(Arrivals, AllAtOnceArrivesAtZero) {
  auto options = ParseArrival("inf", 1.0, 0);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, ArrivalKind::kAllAtOnce);
  auto requests = SampleRequests(SmallDataset(10), 25, 5, *options);
  ASSERT_TRUE(requests.ok()) << requests.status();
  for (const RequestSpec& r : *requests) EXPECT_EQ(r.arrival_s, 0.0);
}

TEST(Arrivals, ClosedLoopIsFlaggedWithConcurrencyAndZeroArrivals) {
  auto options = ParseArrival("all", 1.0, 16);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->kind, ArrivalKind::kClosedLoop);
  EXPECT_EQ(options->concurrency, 16);
  auto requests = SampleRequests(SmallDataset(10), 20, 5, *options);
  ASSERT_TRUE(requests.ok()) << requests.status();
  for (const RequestSpec& r : *requests) EXPECT_EQ(r.arrival_s, 0.0);
}

TEST(Arrivals, ArrivalTimesDoNotDependOnTheDataset) {
  const ArrivalOptions poisson{.kind = ArrivalKind::kPoisson, .rate_per_s = 2.0};
  auto a = SampleRequests(SmallDataset(10), 50, 9, poisson);
  auto b = SampleRequests(SmallDataset(1000), 50, 9, poisson);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ((*a)[i].arrival_s, (*b)[i].arrival_s);
}

TEST(ParseArrival, RatesAndBurstinessSelectTheProcess) {
  auto poisson = ParseArrival("2.5", 1.0, 0);
  ASSERT_TRUE(poisson.ok()) << poisson.status();
  EXPECT_EQ(poisson->kind, ArrivalKind::kPoisson);
  EXPECT_DOUBLE_EQ(poisson->rate_per_s, 2.5);
  auto gamma = ParseArrival("10", 2.0, 0);
  ASSERT_TRUE(gamma.ok()) << gamma.status();
  EXPECT_EQ(gamma->kind, ArrivalKind::kGamma);
  EXPECT_DOUBLE_EQ(gamma->rate_per_s, 10);
  EXPECT_DOUBLE_EQ(gamma->burstiness, 2.0);
  EXPECT_EQ(ParseArrival("ALL", 1.0, 0)->kind, ArrivalKind::kAllAtOnce);
}

TEST(ParseArrival, BadInputsAreInvalidArgumentNamingTheFlag) {
  for (const char* bad : {"", "fast", "0", "-3", "1.5x", "nan", "1e999"}) {
    auto options = ParseArrival(bad, 1.0, 0);
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(options.status().message(), HasSubstr("--request-rate")) << bad;
  }
  auto closed_with_rate = ParseArrival("5", 1.0, 4);
  EXPECT_EQ(closed_with_rate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(closed_with_rate.status().message(), HasSubstr("--request-rate"));
  EXPECT_THAT(ParseArrival("5", 0.0, 0).status().message(), HasSubstr("--burstiness"));
  EXPECT_THAT(ParseArrival("5", -1.0, 0).status().message(), HasSubstr("--burstiness"));
  EXPECT_THAT(ParseArrival("inf", 1.0, -2).status().message(), HasSubstr("--max-concurrency"));
}

// ---- Synthetic lengths ---------------------------------------------------------------------

TEST(SyntheticLengths, UniformStaysWithinBoundsAndIsDeterministic) {
  const SyntheticOptions options{
      .prompt_min = 16, .prompt_max = 512, .output_min = 1, .output_max = 256};
  auto a = SyntheticLengths(options, 5000, 21, LengthFilter{.max_seq_len = 1024});
  auto b = SyntheticLengths(options, 5000, 21, LengthFilter{.max_seq_len = 1024});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->size(), 5000u);
  int64_t min_prompt = 1 << 30, max_prompt = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    const LengthPair& p = (*a)[i];
    ASSERT_GE(p.prompt_tokens, 16);
    ASSERT_LE(p.prompt_tokens, 512);
    ASSERT_GE(p.output_tokens, 1);
    ASSERT_LE(p.output_tokens, 256);
    EXPECT_EQ(p.prompt_tokens, (*b)[i].prompt_tokens);
    EXPECT_EQ(p.output_tokens, (*b)[i].output_tokens);
    min_prompt = std::min(min_prompt, p.prompt_tokens);
    max_prompt = std::max(max_prompt, p.prompt_tokens);
  }
  EXPECT_LT(min_prompt, 40);  // the range is actually covered
  EXPECT_GT(max_prompt, 480);
}

TEST(SyntheticLengths, EqualBoundsGiveFixedLengths) {
  auto pairs = SyntheticLengths(
      SyntheticOptions{.prompt_min = 128, .prompt_max = 128, .output_min = 64, .output_max = 64},
      100, 1, LengthFilter{});
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  for (const LengthPair& p : *pairs) {
    EXPECT_EQ(p.prompt_tokens, 128);
    EXPECT_EQ(p.output_tokens, 64);
  }
}

TEST(SyntheticLengths, InvalidRangesAndOverlongRequestsAreErrors) {
  const LengthFilter filter{.max_seq_len = 256};
  EXPECT_EQ(SyntheticLengths({.prompt_min = 0, .prompt_max = 4}, 1, 0, filter).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SyntheticLengths({.prompt_min = 8, .prompt_max = 4}, 1, 0, filter).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SyntheticLengths({.output_min = 0, .output_max = 4}, 1, 0, filter).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto too_long = SyntheticLengths(
      {.prompt_min = 1, .prompt_max = 200, .output_min = 1, .output_max = 57}, 1, 0, filter);
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.status().message(), HasSubstr("256"));
  EXPECT_TRUE(
      SyntheticLengths({.prompt_min = 1, .prompt_max = 200, .output_min = 1, .output_max = 56}, 1,
                       0, filter)
          .ok());
  EXPECT_EQ(SyntheticLengths({}, 0, 0, filter).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---- Traces --------------------------------------------------------------------------------

TEST(LoadTrace, CsvWithIdColumnIsParsedFilteredAndSorted) {
  const std::string path = WriteTemp("trace.csv",
                                     "id,arrival_s,prompt_tokens,output_tokens\n"
                                     "a,2.5,100,10\n"
                                     "b,0.5,200,20\n"
                                     "c,1.0,300,0\n"  // zero output: dropped
                                     "d,1.5,50,5\n");
  LoadReport report;
  auto requests = LoadTrace(path, LengthFilter{}, &report);
  ASSERT_TRUE(requests.ok()) << requests.status();
  EXPECT_EQ(report.rows, 4);
  EXPECT_EQ(report.kept, 3);
  EXPECT_EQ(report.dropped_zero_output, 1);
  ASSERT_EQ(requests->size(), 3u);
  EXPECT_DOUBLE_EQ((*requests)[0].arrival_s, 0.5);
  EXPECT_EQ((*requests)[0].prompt_tokens, 200);
  EXPECT_DOUBLE_EQ((*requests)[1].arrival_s, 1.5);
  EXPECT_EQ((*requests)[1].output_tokens, 5);
  EXPECT_DOUBLE_EQ((*requests)[2].arrival_s, 2.5);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ((*requests)[i].id, i);
}

TEST(LoadTrace, CsvColumnsMayComeInAnyOrder) {
  const std::string path = WriteTemp("order.csv",
                                     "output_tokens,prompt_tokens,arrival_s,id\n"
                                     "7,3,0.25,x\n");
  auto requests = LoadTrace(path, LengthFilter{}, nullptr);
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 1u);
  EXPECT_EQ((*requests)[0].prompt_tokens, 3);
  EXPECT_EQ((*requests)[0].output_tokens, 7);
  EXPECT_DOUBLE_EQ((*requests)[0].arrival_s, 0.25);
}

TEST(LoadTrace, CsvMalformedValueNamesLine) {
  const std::string path = WriteTemp("badvalue.csv",
                                     "arrival_s,prompt_tokens,output_tokens\n"
                                     "0,10,10\n"
                                     "1,ten,10\n");
  auto requests = LoadTrace(path, LengthFilter{}, nullptr);
  ASSERT_EQ(requests.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(requests.status().message(), HasSubstr(absl::StrCat(path, ":3: prompt_tokens")));
  const std::string negative = WriteTemp("negtime.csv",
                                         "arrival_s,prompt_tokens,output_tokens\n"
                                         "-1,10,10\n");
  EXPECT_THAT(LoadTrace(negative, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(negative, ":2: arrival_s")));
  const std::string fields = WriteTemp("fields.csv",
                                       "arrival_s,prompt_tokens,output_tokens\n"
                                       "1,10\n");
  EXPECT_THAT(LoadTrace(fields, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(fields, ":2: expected 3")));
}

TEST(LoadTrace, CsvHeaderIsChecked) {
  const std::string unknown = WriteTemp("unknown.csv", "arrival_s,prompt,output_tokens\n");
  EXPECT_THAT(LoadTrace(unknown, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(unknown, ":1: unknown column 'prompt'")));
  const std::string missing = WriteTemp("missing.csv", "arrival_s,prompt_tokens\n");
  EXPECT_THAT(LoadTrace(missing, LengthFilter{}, nullptr).status().message(),
              HasSubstr("output_tokens"));
}

TEST(LoadTrace, JsonlWithIdKeyIsParsedFilteredAndSorted) {
  const std::string path =
      WriteTemp("trace.jsonl",
                "{\"id\": \"r1\", \"arrival_s\": 3, \"prompt_tokens\": 30, \"output_tokens\": 3}\n"
                "\n"
                "{\"arrival_s\": 1.25, \"prompt_tokens\": 10, \"output_tokens\": 1, \"id\": 7}\n"
                "{\"arrival_s\": 2, \"prompt_tokens\": 2000, \"output_tokens\": 100}\n"
                "{\"arrival_s\": 0, \"prompt_tokens\": 0, \"output_tokens\": 5}\n");
  LoadReport report;
  auto requests = LoadTrace(path, LengthFilter{.max_seq_len = 2048}, &report);
  ASSERT_TRUE(requests.ok()) << requests.status();
  EXPECT_EQ(report.rows, 4);
  EXPECT_EQ(report.kept, 2);
  EXPECT_EQ(report.dropped_too_long, 1);
  EXPECT_EQ(report.dropped_zero_prompt, 1);
  ASSERT_EQ(requests->size(), 2u);
  EXPECT_DOUBLE_EQ((*requests)[0].arrival_s, 1.25);
  EXPECT_EQ((*requests)[0].prompt_tokens, 10);
  EXPECT_EQ((*requests)[0].id, 0);
  EXPECT_DOUBLE_EQ((*requests)[1].arrival_s, 3.0);
  EXPECT_EQ((*requests)[1].output_tokens, 3);
  EXPECT_EQ((*requests)[1].id, 1);
}

TEST(LoadTrace, JsonlMalformedValueNamesLine) {
  const std::string path =
      WriteTemp("bad.jsonl",
                "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n"
                "{\"arrival_s\": 1, \"prompt_tokens\": 1.5, \"output_tokens\": 1}\n");
  auto requests = LoadTrace(path, LengthFilter{}, nullptr);
  ASSERT_EQ(requests.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(requests.status().message(), HasSubstr(absl::StrCat(path, ":2: prompt_tokens")));

  const std::string syntax = WriteTemp("syntax.jsonl", "{\"arrival_s\": 0,\n");
  EXPECT_THAT(LoadTrace(syntax, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(syntax, ":1: invalid JSON")));
  const std::string missing = WriteTemp("missingkey.jsonl", "{\"arrival_s\": 0}\n");
  EXPECT_THAT(LoadTrace(missing, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(missing, ":1: missing key(s) prompt_tokens, output_tokens")));
  const std::string unknown = WriteTemp(
      "unknownkey.jsonl",
      "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"model\": \"x\"}\n");
  EXPECT_THAT(LoadTrace(unknown, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(unknown, ":1: unknown key 'model'")));
}

TEST(LoadTrace, JsonlRefusesOutOfRangeNumbersAndDuplicateKeys) {
  const std::string huge = WriteTemp(
      "huge.jsonl", "{\"arrival_s\": 1e400, \"prompt_tokens\": 1, \"output_tokens\": 1}\n");
  auto requests = LoadTrace(huge, LengthFilter{}, nullptr);
  ASSERT_EQ(requests.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(requests.status().message(),
              HasSubstr(absl::StrCat(huge, ":1: number out of range at field 'arrival_s'")));
  const std::string dup = WriteTemp(
      "dup.jsonl",
      "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"prompt_tokens\": 9, \"output_tokens\": 1}\n");
  EXPECT_THAT(LoadTrace(dup, LengthFilter{}, nullptr).status().message(),
              HasSubstr(absl::StrCat(dup, ":1: duplicate key 'prompt_tokens'")));
}

TEST(LoadNamedDataset, EveryRowDroppedNamesTheFileAndWhy) {
  const std::string path =
      WriteTemp("all_dropped.tsv", "input_toks\toutput_toks\n3000\t10\n5\t0\n0\t4\n");
  LoadReport report;
  auto lengths = LoadNamedDataset(path, LengthFilter{.max_seq_len = 2048}, &report);
  ASSERT_EQ(lengths.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lengths.status().message(),
              HasSubstr(absl::StrCat(path,
                                     ": no usable rows: kept 0 of 3 rows (dropped 1 longer "
                                     "than the 2048-token context, 1 with zero output, 1 with "
                                     "zero prompt)")));
  EXPECT_FALSE(LoadNamedDataset(path, LengthFilter{}, nullptr).ok());
}

TEST(LoadTrace, MissingFileIsNotFoundAndUnknownExtensionIsAnError) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / "nope.csv").string();
  auto missing = LoadTrace(path, LengthFilter{}, nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
  const std::string txt = WriteTemp("trace.txt", "arrival_s,prompt_tokens,output_tokens\n");
  EXPECT_EQ(LoadTrace(txt, LengthFilter{}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ParseFromText, DatasetsAndTracesReadFromAnOpenTableNameIt) {
  TableReader dataset("inline.tsv", "input_toks\toutput_toks\n10\t20\n0\t5\n", '\t');
  LoadReport report;
  const absl::StatusOr<std::vector<LengthPair>> pairs =
      ParseLengthDataset(dataset, LengthFilter{}, &report);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(pairs->size(), 1u);
  EXPECT_EQ(report.source, "inline.tsv");
  EXPECT_EQ(report.dropped_zero_prompt, 1);
  TableReader jsonl("inline.jsonl", R"({"arrival_s": 1, "prompt_tokens": 2, "output_tokens": x})",
                    ',');
  const absl::StatusOr<std::vector<RequestSpec>> bad =
      ParseTrace(jsonl, TraceFormat::kJsonl, LengthFilter{}, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("inline.jsonl:1"));
  TableReader csv("inline.csv", "arrival_s,prompt_tokens,output_tokens\n2,1,1\n1,3,3\n", ',');
  const absl::StatusOr<std::vector<RequestSpec>> sorted =
      ParseTrace(csv, TraceFormat::kCsv, LengthFilter{}, nullptr);
  ASSERT_TRUE(sorted.ok()) << sorted.status();
  EXPECT_EQ((*sorted)[0].prompt_tokens, 3);
}

}  // namespace
}  // namespace neupims::workload
