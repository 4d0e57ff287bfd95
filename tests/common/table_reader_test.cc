#include "common/table_reader.h"

#include <filesystem>
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

// TakeLine (a caller's fast path) takes a line exactly as NextLine returns it, or nothing.
TEST(TableReader, TakeLineTakesOnlyWholeLinesAsNextLineWould) {
  TableReader table("t.tsv", "1\t2\n3\t4\r\n5\t6x\n7\t8\r", '\t');
  EXPECT_EQ(table.rest().substr(0, 3), "1\t2");
  EXPECT_FALSE(table.TakeLine(2));  // "1\t" is not a whole line
  ASSERT_TRUE(table.TakeLine(3));
  EXPECT_EQ(table.line(), "1\t2");
  EXPECT_EQ(table.line_number(), 1);
  ASSERT_TRUE(table.TakeLine(3));  // CRLF
  EXPECT_EQ(table.line(), "3\t4");
  EXPECT_FALSE(table.TakeLine(3));  // "5\t6" goes on with "x"
  EXPECT_EQ(table.line_number(), 2);
  absl::string_view line;
  ASSERT_TRUE(table.NextLine(&line));
  EXPECT_EQ(line, "5\t6x");
  EXPECT_FALSE(table.TakeLine(4));  // "7\t8\r": NextLine would strip the CR
  EXPECT_FALSE(table.TakeLine(5));  // beyond the contents
  ASSERT_TRUE(table.TakeLine(3));   // a CR before the end of the file, as NextLine strips it
  EXPECT_EQ(table.line(), "7\t8");
  EXPECT_EQ(table.line_number(), 4);
  EXPECT_FALSE(table.TakeLine(0));
  EXPECT_FALSE(table.NextLine(&line));
  EXPECT_EQ(table.Error("x").message(), "t.tsv:4: x");
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
