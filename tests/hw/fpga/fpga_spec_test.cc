#include "hw/fpga/fpga_spec.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims::hw::fpga {
namespace {

using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::string Zu2WithReplaced(const std::string& from, const std::string& to) {
  std::ifstream in(std::string(NEUPIMS_SOURCE_DIR) + "/configs/fpga/zu2.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(FpgaSpecFileTest, EveryBuiltinLoads) {
  for (const std::string& name : BuiltinFpgaNames()) {
    absl::StatusOr<FpgaSpec> s = LoadFpgaSpec(name);
    ASSERT_TRUE(s.ok()) << name << ": " << s.status();
    EXPECT_EQ(s->name, name);
  }
  EXPECT_EQ(BuiltinFpgaNames().size(), 3u);
}

TEST(FpgaSpecFileTest, OddIcPIsRefusedNamingTheField) {
  const std::string path = WriteTemp("odd.json", Zu2WithReplaced("\"ic_p\": 24", "\"ic_p\": 23"));
  absl::StatusOr<FpgaSpec> s = LoadFpgaSpec(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("parallelism.ic_p"));
}

TEST(FpgaSpecFileTest, UnknownFieldIsRefusedNamingIt) {
  const std::string path =
      WriteTemp("unknown.json", Zu2WithReplaced("\"cores\": 1", "\"cores\": 1, \"core\": 2"));
  absl::StatusOr<FpgaSpec> s = LoadFpgaSpec(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("core"));
  EXPECT_THAT(s.status().message(), HasSubstr(path));
}

TEST(FpgaSpecFileTest, ZeroBandwidthIsRefused) {
  const std::string path =
      WriteTemp("bw.json", Zu2WithReplaced("\"peak_gb_per_s\": 9.6", "\"peak_gb_per_s\": 0"));
  absl::StatusOr<FpgaSpec> s = LoadFpgaSpec(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("ddr.peak_gb_per_s"));
}

// A power of 1e-308 W used to load and print "inf GOP/s/W"; power is bounded to [1e-3, 1e4] W.
TEST(FpgaSpecFileTest, PowerOutsideAMilliwattToTenKilowattsIsRefusedNamingFileAndField) {
  for (const char* power : {"1e-308", "0", "0.0009", "-1", "10001"}) {
    const std::string path = WriteTemp(
        "power.json", Zu2WithReplaced("\"power_w\": 7.5", absl::StrCat("\"power_w\": ", power)));
    absl::StatusOr<FpgaSpec> s = LoadFpgaSpec(path);
    ASSERT_FALSE(s.ok()) << power;
    EXPECT_THAT(s.status().message(), HasSubstr("power_w")) << power;
    EXPECT_THAT(s.status().message(), HasSubstr(path)) << power;
  }
  for (const char* power : {"0.001", "10000"}) {
    const std::string path = WriteTemp(
        "power.json", Zu2WithReplaced("\"power_w\": 7.5", absl::StrCat("\"power_w\": ", power)));
    EXPECT_TRUE(LoadFpgaSpec(path).ok()) << power;
  }
}

}  // namespace
}  // namespace neupims::hw::fpga
