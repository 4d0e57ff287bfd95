// `neupims sweep` and `neupims experiments` scaled out: the tables merged from shard files equal
// the single run's, byte for byte, whatever the shard count and --jobs; a missing shard and a
// bad --shard are errors.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tools/workload/workload.h"

namespace neupims::cli {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `neupims ARGS` (output to files in `dir`); returns the exit status.
int Neupims(const fs::path& dir, const std::string& args) {
  const std::string command = absl::StrCat("cd ", dir.string(), " && ", NEUPIMS_CLI_PATH, " ", args,
                                           " > stdout.txt 2> stderr.txt");
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class ShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"sharegpt", "alpaca"}) {
      const std::string path = workload::ResolveDataset(name);
      if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
    }
    dir_ = fs::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  fs::path dir_;
};

constexpr char kSpec[] = R"({
  "models": ["gpt3-7b", "llama2-7b"],
  "modes": ["npu-only", "npu+pim", "neupims"],
  "datasets": ["alpaca", "sharegpt"],
  "batches": [32, 128],
  "samples": 2,
  "seed": 7
})";

TEST_F(ShardTest, SweepShardsMergedEqualTheUnshardedRun) {
  std::ofstream(dir_ / "spec.json") << kSpec;
  ASSERT_EQ(Neupims(dir_, "sweep --spec spec.json --jobs 2 --out all.json"), 0)
      << Slurp(dir_ / "stderr.txt");
  ASSERT_EQ(Neupims(dir_, "sweep merge all.json --out single.md --json-out single.json"), 0)
      << Slurp(dir_ / "stderr.txt");
  std::vector<std::string> shards;
  for (int i = 0; i < 3; ++i) {
    const std::string out = absl::StrCat("shard-", i, ".json");
    ASSERT_EQ(Neupims(dir_, absl::StrCat("sweep --spec spec.json --jobs 1 --shard ", i, "/3 --out ",
                                         out)),
              0)
        << Slurp(dir_ / "stderr.txt");
    shards.push_back(out);
  }
  // Merge order does not matter either.
  ASSERT_EQ(Neupims(dir_, absl::StrCat("sweep merge ", shards[2], " ", shards[0], " ", shards[1],
                                       " --out merged.md --json-out merged.json")),
            0)
      << Slurp(dir_ / "stderr.txt");
  const std::string single = Slurp(dir_ / "single.md");
  ASSERT_NE(single.find("| llama2-7b |"), std::string::npos) << single;
  ASSERT_NE(single.find("## sharegpt: utilisation"), std::string::npos) << single;
  EXPECT_EQ(Slurp(dir_ / "merged.md"), single);
  EXPECT_EQ(Slurp(dir_ / "merged.json"), Slurp(dir_ / "single.json"));

  // Without one shard the merge refuses rather than printing holes.
  EXPECT_NE(Neupims(dir_, absl::StrCat("sweep merge ", shards[0], " ", shards[1])), 0);
  EXPECT_NE(Slurp(dir_ / "stderr.txt").find("missing"), std::string::npos);
  // The same shard twice is refused too.
  EXPECT_NE(Neupims(dir_, absl::StrCat("sweep merge all.json ", shards[0])), 0);
}

TEST_F(ShardTest, SweepRefusesBadShardsAndSpecs) {
  std::ofstream(dir_ / "spec.json") << kSpec;
  for (const char* shard : {"3/3", "1", "-1/2", "a/b", "0/0"}) {
    EXPECT_NE(
        Neupims(dir_, absl::StrCat("sweep --spec spec.json --shard ", shard, " --out x.json")), 0)
        << shard;
    EXPECT_NE(Slurp(dir_ / "stderr.txt").find("--shard"), std::string::npos) << shard;
  }
  std::ofstream(dir_ / "bad.json") << R"({"models": ["gpt3-7b"], "modes": ["neupims"],
      "datasets": ["alpaca"], "batches": [8], "samplez": 2})";
  EXPECT_NE(Neupims(dir_, "sweep --spec bad.json --out x.json"), 0);
  EXPECT_NE(Slurp(dir_ / "stderr.txt").find("samplez"), std::string::npos);
}

TEST_F(ShardTest, ExperimentsShardsMergedEqualTheUnshardedRun) {
  ASSERT_EQ(Neupims(dir_,
                    "experiments --quick --no-progress --out single.md --json-out "
                    "single.json"),
            0)
      << Slurp(dir_ / "stderr.txt");
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(Neupims(dir_, absl::StrCat("experiments --quick --jobs 1 --shard ", i,
                                         "/2 --shard-out shard-", i, ".json")),
              0)
        << Slurp(dir_ / "stderr.txt");
  }
  ASSERT_EQ(Neupims(dir_,
                    "experiments --quick --merge shard-1.json shard-0.json --out merged.md "
                    "--json-out merged.json"),
            0)
      << Slurp(dir_ / "stderr.txt");
  // The run's wall time is the one thing allowed to differ.
  auto tables = [](std::string md) {
    return std::regex_replace(md, std::regex(R"(, [0-9.]+ s\))"), ", T s)");
  };
  const std::string single = tables(Slurp(dir_ / "single.md"));
  ASSERT_NE(single.find("Figure 14"), std::string::npos);
  EXPECT_EQ(tables(Slurp(dir_ / "merged.md")), single);
  EXPECT_EQ(Slurp(dir_ / "merged.json"), Slurp(dir_ / "single.json"));
  // A shard without --shard-out could not fill the tables.
  EXPECT_NE(Neupims(dir_, "experiments --quick --shard 0/2 --out x.md"), 0);
  // Shards of other settings do not merge.
  EXPECT_NE(Neupims(dir_,
                    "experiments --quick --seed 2 --merge shard-0.json shard-1.json "
                    "--out x.md"),
            0);
}

}  // namespace
}  // namespace neupims::cli
