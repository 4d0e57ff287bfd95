// `neupims experiments` run through the built binary: the parallel run writes what the serial
// run writes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/workload/workload.h"

namespace neupims::cli {
namespace {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct ExperimentsOutput {
  std::string markdown;
  std::string json;
  std::string stderr_text;
};

ExperimentsOutput RunQuickExperiments(int jobs) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("experiments_jobs_", jobs);
  std::filesystem::create_directories(dir);
  const std::string command =
      absl::StrCat(NEUPIMS_CLI_PATH, " experiments --quick --jobs ", jobs, " --out ",
                   (dir / "results.md").string(), " --json-out ", (dir / "results.json").string(),
                   " > /dev/null 2> ", (dir / "stderr.txt").string());
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  ExperimentsOutput out{ReadFile(dir / "results.md"), ReadFile(dir / "results.json"),
                        ReadFile(dir / "stderr.txt")};
  // The run's wall time is the one thing allowed to differ.
  out.markdown = std::regex_replace(out.markdown, std::regex(R"(, [0-9.]+ s\))"), ", T s)");
  return out;
}

TEST(ExperimentsTest, ParallelRunEqualsSerialRun) {
  // The experiments sample batches from the shipped datasets (as the LengthDataset tests do,
  // skip where they are not beside the source tree or in $NEUPIMS_DATASETS).
  for (const char* name : {"sharegpt", "alpaca"}) {
    const std::string path = workload::ResolveDataset(name);
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  }
  const ExperimentsOutput serial = RunQuickExperiments(1);
  const ExperimentsOutput parallel = RunQuickExperiments(2);
  ASSERT_NE(serial.json.find("figure14"), std::string::npos);
  EXPECT_EQ(serial.json, parallel.json);
  EXPECT_EQ(serial.markdown, parallel.markdown);
  // stderr is a file here, not a terminal: no '\r'-redrawn progress line.
  EXPECT_EQ(serial.stderr_text.find('\r'), std::string::npos) << serial.stderr_text;
  EXPECT_EQ(parallel.stderr_text.find('\r'), std::string::npos);
}

// `--reference-devices` runs every figure on the *-ref devices: the same tables, other numbers,
// no discussion (it lives in docs/results.md).
TEST(ExperimentsTest, ReferenceDevicesRunTheFiguresOnTheReferenceProfiles) {
  for (const char* name : {"sharegpt", "alpaca"}) {
    const std::string path = workload::ResolveDataset(name);
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  }
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "ref_devices";
  std::filesystem::create_directories(dir);
  const std::string command = absl::StrCat(
      NEUPIMS_CLI_PATH, " experiments --quick --reference-devices --out ",
      (dir / "ref.md").string(), " --json-out ", (dir / "ref.json").string(), " > /dev/null 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string md = ReadFile(dir / "ref.md");
  for (const char* part :
       {"# Results on the reference profiles", "--reference-devices", "## Figure 12",
        "## Figure 13", "## Figure 14", "## Table 4", "| +DRB+GMLBP+SBI |"}) {
    EXPECT_NE(md.find(part), std::string::npos) << part;
  }
  EXPECT_EQ(md.find("## Discussion"), std::string::npos);
  const ExperimentsOutput ours = RunQuickExperiments(1);
  EXPECT_NE(ReadFile(dir / "ref.json"), ours.json);  // the profiles change the numbers
}

// `--reference` regenerates only its marked section: the rest of the file is kept, and the
// section holds both device sets at the three batch sizes.
TEST(ExperimentsTest, ReferenceSectionIsSplicedIntoAnExistingFile) {
  for (int b : {64, 128, 256}) {
    const std::string path = absl::StrCat(workload::DatasetsDir(), "/batches/share-gpt2-bs", b,
                                          "-ms7B-tp4-pp1-clb-0.csv");
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  }
  const std::filesystem::path out =
      std::filesystem::path(::testing::TempDir()) / "reference_results.md";
  std::ofstream(out) << "# Kept\n\nbefore\n";
  const std::string command = absl::StrCat(NEUPIMS_CLI_PATH, " experiments --reference --out ",
                                           out.string(), " > /dev/null 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;  // twice: replaced, not appended
  const std::string md = ReadFile(out);
  EXPECT_EQ(md.rfind("# Kept\n\nbefore\n", 0), 0u) << md;
  EXPECT_EQ(md.find("<!-- reference-profiles:begin -->"),
            md.rfind("<!-- reference-profiles:begin -->"));
  for (const char* row :
       {"| 64 | default |", "| 256 | default |", "| 64 | reference |", "| 128 | reference |",
        "| 256 | reference |", "| 0 | none: the reference profiles |",
        " | all-reduce: off -> on (tp_all_reduce) |", " | PIM rows: per-bank PREs",
        "| | ours (the default devices", "### Table 5: power and energy",
        "| reference | NeuPIMs vs NPU-only |"}) {
    EXPECT_NE(md.find(row), std::string::npos) << row;
  }
}

}  // namespace
}  // namespace neupims::cli
