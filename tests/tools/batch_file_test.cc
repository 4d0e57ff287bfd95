#include "tools/workload/batch_file.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/table_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::workload {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::vector<BatchRow>> Parse(const std::string& text) {
  TableReader table("b.csv", text, ',');
  return ParseBatchFile(table);
}

TEST(BatchFile, ChannelColumnIsOptionalAndEitherName) {
  const absl::StatusOr<std::vector<BatchRow>> pinned = Parse("seq_len,ch_idx\n512,0\n 1024 , 3\n");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_EQ(pinned->size(), 2u);
  EXPECT_EQ((*pinned)[1].seq_len, 1024);
  EXPECT_EQ((*pinned)[1].channel, 3);
  const absl::StatusOr<std::vector<BatchRow>> free = Parse("channel,seq_len\n1,64\n");
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_EQ((*free)[0].channel, 1);
  const absl::StatusOr<std::vector<BatchRow>> policy = Parse("seq_len\n128\n");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_FALSE((*policy)[0].channel.has_value());
}

TEST(BatchFile, BadFilesNameTheFileLineAndProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "b.csv:1: empty batch file"},
      {"seq_len\n", "no requests"},
      {"seq,channel\n1,0\n", "unknown column 'seq'"},
      {"seq_len,seq_len\n1,1\n", "column 'seq_len' given twice"},
      {"seq_len,channel,ch_idx\n1,0,0\n", "columns 'channel' and 'ch_idx' both name the channel"},
      {"seq_len,channel\n5,-1\n", "b.csv:2: channel -1 must be >= 0"},
      {"seq_len,channel\n5\n", "b.csv:2: expected 2 integer fields"},
      {"seq_len\nfive\n", "b.csv:2: expected 1 integer fields"},
      {"channel\n1\n", "must name a seq_len column"},
  };
  for (const auto& [text, message] : cases) {
    const absl::StatusOr<std::vector<BatchRow>> rows = Parse(text);
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(rows.status().message(), HasSubstr(message)) << text;
  }
}

}  // namespace
}  // namespace neupims::workload
