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
// words: random files of short and long lines (LF, CRLF, blank, no LF at the end) read as the
// plain rule says, and the bound is the LFs left plus one after every line.
TEST(TableReader, RandomLinesSplitAsTheRuleSaysAndTheBoundCountsLfs) {
  std::mt19937_64 rng(11);
  const std::string alphabet = "0123456789\t \r\nx";
  for (int file = 0; file < 300; ++file) {
    std::string text;
    const size_t size = rng() % (file < 200 ? 64 : 4000);  // past the 31-word batches too
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
