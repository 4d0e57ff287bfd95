// Hostile input through the built `neupims` binary (issue 17): every flag and input file is
// checked by the shared rules (option range table, ReadInputFile, strict JSON) and refused with
// a message naming the flag or file, never a crash or a silently wrong run.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Output {
  int status;
  std::string out;
};

Output RunCli(const std::string& args) {
  const std::string command = absl::StrCat(NEUPIMS_CLI_PATH, " ", args, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

constexpr const char* kSimulate = "simulate --no-progress -n 2 --synthetic 8:2 ";

TEST(InputChecks, EngineFlagsRefuseNanAndAbsurdMagnitudes) {
  for (const char* flag : {"--interconnect-latency-ns nan", "--interconnect-gbps 1e-300",
                           "--interconnect-gbps inf", "--prefill-link-gbps 0"}) {
    const Output o = RunCli(absl::StrCat(kSimulate, flag));
    EXPECT_NE(o.status, 0) << flag;
    EXPECT_THAT(o.out, HasSubstr("must be in [")) << flag << "\n" << o.out;
    EXPECT_THAT(o.out, Not(HasSubstr("1797693"))) << flag;
  }
}

TEST(InputChecks, BurstinessZeroSaysItMustBePositive) {
  const Output o = RunCli(absl::StrCat(kSimulate, "--burstiness 0"));
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("--burstiness"));
  EXPECT_THAT(o.out, HasSubstr("must be in (0, 1000]"));
}

TEST(InputChecks, ServeFlagsUseTheServerConfigRanges) {
  for (const char* flag :
       {"--speed 1e-300", "--mean-output-tokens nan", "--drain-timeout nan", "--speed nan"}) {
    const Output o = RunCli(absl::StrCat("serve --port 0 --metrics-port -1 --http-port -1 ", flag));
    EXPECT_NE(o.status, 0) << flag;
    EXPECT_THAT(o.out, HasSubstr("must be in [")) << flag << "\n" << o.out;
  }
}

TEST(InputChecks, ADirectoryAsAConfigFileSaysSo) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / "cfg_dir.json").string();
  std::filesystem::create_directories(dir);
  const Output device = RunCli(absl::StrCat(kSimulate, "--device ", dir));
  EXPECT_NE(device.status, 0);
  EXPECT_THAT(device.out, HasSubstr(dir + ": is a directory"));
  const Output server = RunCli(absl::StrCat("serve --config ", dir));
  EXPECT_NE(server.status, 0);
  EXPECT_THAT(server.out, HasSubstr(dir + ": is a directory"));
}

TEST(InputChecks, AnEmptyDatasetNameSaysNoFileWasGiven) {
  const Output o = RunCli("simulate --no-progress -n 2 --dataset ''");
  EXPECT_NE(o.status, 0);
  EXPECT_THAT(o.out, HasSubstr("no file name given"));
}

TEST(InputChecks, DuplicateKeysAndHugeNumbersInADeviceFileAreRefusedNotThrown) {
  const std::string huge = WriteTemp("huge_device.json", R"({"frequency_mhz": 1e400})");
  const Output h = RunCli(absl::StrCat(kSimulate, "--device ", huge));
  EXPECT_EQ(h.status, 2) << h.out;  // an error, not SIGABRT
  EXPECT_THAT(h.out, HasSubstr(huge + ": number out of range at field 'frequency_mhz'"));
  const std::string dup = WriteTemp("dup_server.json", R"({"port": 0, "port": 1})");
  const Output d = RunCli(absl::StrCat("serve --config ", dup));
  EXPECT_NE(d.status, 0);
  EXPECT_THAT(d.out, HasSubstr(dup + ": duplicate key 'port'"));
}

}  // namespace
}  // namespace neupims::cli
