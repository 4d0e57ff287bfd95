#include "common/table_reader.h"

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TableReader, SplitsRowsAtTheDelimiterAndSkipsBlankLines) {
  TableReader table("t.csv", "a,b\n1,2\n\n  \n3,\n", ',');
  absl::string_view header;
  ASSERT_TRUE(table.NextLine(&header));
  EXPECT_EQ(header, "a,b");
  EXPECT_THAT(table.Split(header), ElementsAre("a", "b"));
  std::vector<absl::string_view> fields;
  ASSERT_TRUE(table.NextRow(&fields));
  EXPECT_THAT(fields, ElementsAre("1", "2"));
  EXPECT_EQ(table.line_number(), 2);
  ASSERT_TRUE(table.NextRow(&fields));
  EXPECT_THAT(fields, ElementsAre("3", ""));  // fields are not trimmed or dropped
  EXPECT_EQ(table.line_number(), 5);          // blank lines 3 and 4 still count
  EXPECT_EQ(table.line(), "3,");
  EXPECT_FALSE(table.NextRow(&fields));
}

TEST(TableReader, HandlesCrlfTabsAByteOrderMarkAndNoFinalNewline) {
  TableReader table("t.tsv", "\xEF\xBB\xBFx\ty\r\n1\t2", '\t');
  absl::string_view line;
  ASSERT_TRUE(table.NextLine(&line));
  EXPECT_EQ(line, "x\ty");
  std::vector<absl::string_view> fields;
  ASSERT_TRUE(table.NextRow(&fields));
  EXPECT_THAT(fields, ElementsAre("1", "2"));
  EXPECT_FALSE(table.NextLine(&line));
}

// The one line rule: LF ends a line, one CR before the LF or before the end of the file is not
// part of it, a CR anywhere else is.
TEST(TableReader, LinesEndAtLfWithOneCrStrippedBeforeTheEnd) {
  TableReader table("t.tsv", "1\t2\n3\t4\r\n5\r6\n\r\n\n7\t8\r\r\n9\r", '\t');
  absl::string_view line;
  std::vector<absl::string_view> lines;
  while (table.NextLine(&line)) {
    lines.push_back(line);
    EXPECT_EQ(table.line(), line);
  }
  EXPECT_THAT(lines, ElementsAre("1\t2", "3\t4", "5\r6", "", "", "7\t8\r", "9"));
  EXPECT_EQ(table.line_number(), 7);
  EXPECT_EQ(table.Error("x").message(), "t.tsv:7: x");
}

// NextLine finds the LF in a line's first word or past it, and LinesLeftBound counts LFs by
// 16-byte vectors: random files of short and long lines (LF, CRLF, blank, no LF at the end) read as
// the plain rule says, and the bound is the LFs left plus one after every line.
TEST(TableReader, RandomLinesSplitAsTheRuleSaysAndTheBoundCountsLfs) {
  std::mt19937_64 rng(11);
  const std::string alphabet = "0123456789\t \r\nx";
  for (int file = 0; file < 300; ++file) {
    std::string text;
    const size_t size = rng() % (file < 200 ? 64 : 9000);  // past 255-step batches too
    for (size_t i = 0; i < size; ++i) text += alphabet[rng() % alphabet.size()];
    // The rule, stated byte by byte.
    std::vector<std::string> expected;
    size_t start = 0;
    while (start < text.size()) {
      size_t lf = text.find('\n', start);
      const size_t stop = lf == std::string::npos ? text.size() : lf;
      std::string line = text.substr(start, stop - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      expected.push_back(line);
      start = lf == std::string::npos ? text.size() : lf + 1;
    }
    TableReader table("r.tsv", text, '\t');
    std::vector<std::string> lines;
    size_t consumed = 0;
    for (;;) {
      const size_t lfs_left =
          static_cast<size_t>(std::count(text.begin() + consumed, text.end(), '\n'));
      ASSERT_EQ(table.LinesLeftBound(), lfs_left + 1) << "file " << file;
      absl::string_view line;
      if (!table.NextLine(&line)) break;
      lines.emplace_back(line);
      const size_t lf = text.find('\n', consumed);
      consumed = lf == std::string::npos ? text.size() : lf + 1;
    }
    ASSERT_EQ(lines, expected) << "file " << file;
  }
  // Files of LFs only fill every byte lane of the count to 255 in a batch.
  for (const size_t size : {4079, 4080, 4081, 4096, 8160, 8161, 20000}) {
    TableReader table("lf.tsv", std::string(size, '\n'), '\t');
    EXPECT_EQ(table.LinesLeftBound(), size + 1) << size;
  }
}

// What a walk of TakeCountPairs and NextLine sees: "a,b" for a pair taken, "'text'@n" for line n
// returned by NextLine; then line() and line_number() at the end.
std::vector<std::string> FastWalk(TableReader& table) {
  std::vector<std::string> seen;
  for (;;) {
    table.TakeCountPairs(
        [&](int64_t a, int64_t b) { seen.push_back(std::to_string(a) + "," + std::to_string(b)); });
    absl::string_view line;
    if (!table.NextLine(&line)) break;
    seen.push_back("'" + std::string(line) + "'@" + std::to_string(table.line_number()));
  }
  seen.push_back("end '" + std::string(table.line()) + "'@" + std::to_string(table.line_number()));
  return seen;
}

// The same walk by NextLine alone, with the fast path's form stated plainly: exactly two fields,
// each 1 to 18 digits.
std::vector<std::string> PlainWalk(TableReader& table, char delimiter) {
  auto count = [](absl::string_view field) {
    return !field.empty() && field.size() <= 18 &&
           std::all_of(field.begin(), field.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  std::vector<std::string> seen;
  absl::string_view line;
  while (table.NextLine(&line)) {
    const size_t at = line.find(delimiter);
    const absl::string_view a = line.substr(0, at);
    const absl::string_view b = at == absl::string_view::npos ? "" : line.substr(at + 1);
    if (at != absl::string_view::npos && b.find(delimiter) == absl::string_view::npos && count(a) &&
        count(b)) {
      seen.push_back(std::to_string(std::stoll(std::string(a))) + "," +
                     std::to_string(std::stoll(std::string(b))));
    } else {
      seen.push_back("'" + std::string(line) + "'@" + std::to_string(table.line_number()));
    }
  }
  seen.push_back("end '" + std::string(table.line()) + "'@" + std::to_string(table.line_number()));
  return seen;
}

TEST(TableReader, TakeCountPairsTakesTwoCountsALineAndStopsBeforeAnyOtherLine) {
  TableReader table("t.tsv",
                    "12\t34\n0\t7\r\n123456789012345678\t1\n1234567890123456789\t1\n"
                    "12 \t34\n12\t\n\t34\n12\t-3\n12\t3\t4\n12,34\n\n5\t6\r7\n5\t6\r\r\n9\t10\r",
                    '\t');
  EXPECT_THAT(
      FastWalk(table),
      ElementsAre("12,34", "0,7", "123456789012345678,1", "'1234567890123456789\t1'@4",
                  "'12 \t34'@5", "'12\t'@6", "'\t34'@7", "'12\t-3'@8", "'12\t3\t4'@9", "'12,34'@10",
                  "''@11", "'5\t6\r7'@12", "'5\t6\r'@13", "9,10", "end '9\t10'@14"));
  // Errors after a run of pairs name the line that stopped it.
  TableReader stop("s.tsv", "1\t2\n3\t4\r\n5\tx\n", '\t');
  stop.TakeCountPairs([](int64_t, int64_t) {});
  EXPECT_EQ(stop.line_number(), 2);
  EXPECT_EQ(stop.line(), "3\t4");
  absl::string_view line;
  ASSERT_TRUE(stop.NextLine(&line));
  EXPECT_EQ(stop.Error("bad").message(), "s.tsv:3: bad");
  // A sign before either count is the general path's, as is a line without its second count at
  // the very end.
  TableReader signs("p.tsv", "+1\t2\n1\t+2\n3\t4\n5\t", '\t');
  EXPECT_THAT(FastWalk(signs),
              ElementsAre("'+1\t2'@1", "'1\t+2'@2", "3,4", "'5\t'@4", "end '5\t'@4"));
  // A delimiter that is a digit takes nothing: every line is the general path's.
  TableReader digit("d.tsv", "10203\n", '0');
  EXPECT_THAT(FastWalk(digit), ElementsAre("'10203'@1", "end '10203'@1"));
}

// Random files of count pairs and near misses (LF, CRLF, CR, blank lines, spaces, a NUL, long
// digit runs, a missing final LF), for a tab and a comma: the fast path and NextLine with the form
// stated plainly see the same pairs and lines, and end on the same line.
TEST(TableReader, TakeCountPairsAgreesWithNextLineOnRandomFiles) {
  std::mt19937_64 rng(17);
  for (const char delimiter : {'\t', ','}) {
    std::string alphabet = "0123456789012345678901234567890123456789\n\n\r x";
    alphabet += delimiter;
    alphabet += delimiter;
    alphabet += '\0';
    for (int file = 0; file < 2000; ++file) {
      std::string text;
      const size_t size = rng() % 120;
      for (size_t i = 0; i < size; ++i) text += alphabet[rng() % alphabet.size()];
      if (file % 3 == 0) text.insert(0, std::string(rng() % 25, '7'));  // long digit runs
      TableReader fast("r.tsv", text, delimiter);
      TableReader plain("r.tsv", text, delimiter);
      ASSERT_EQ(FastWalk(fast), PlainWalk(plain, delimiter)) << "file " << file;
    }
  }
}

TEST(TableReader, ErrorsNameTheFileAndTheLine) {
  TableReader table("data/trace.csv", "h\n\nok\nbad\n", ',');
  std::vector<absl::string_view> fields;
  EXPECT_EQ(table.Error("before any line").message(), "data/trace.csv:1: before any line");
  absl::string_view line;
  ASSERT_TRUE(table.NextLine(&line));
  ASSERT_TRUE(table.NextRow(&fields));
  ASSERT_TRUE(table.NextRow(&fields));
  const absl::Status error = table.Error("'bad' is not a number");
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error.message(), "data/trace.csv:4: 'bad' is not a number");
}

TEST(TableReader, OpenReadsTheFileAndAMissingOneIsNotFound) {
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "table_reader_test.csv").string();
  ASSERT_TRUE(WriteFile(path, "a,b\n1,2\n").ok());
  absl::StatusOr<TableReader> table = TableReader::Open(path, ',');
  ASSERT_TRUE(table.ok()) << table.status();
  std::vector<absl::string_view> fields;
  ASSERT_TRUE(table->NextRow(&fields));
  EXPECT_THAT(fields, ElementsAre("a", "b"));
  ASSERT_TRUE(table->NextRow(&fields));
  EXPECT_EQ(table->Error("x").message(), path + ":2: x");
  std::filesystem::remove(path);

  absl::StatusOr<TableReader> missing = TableReader::Open(path, ',');
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace neupims
