#include "common/builtin_configs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::IsSupersetOf;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh, empty directory for one test, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(::testing::TempDir()) / (std::string("builtin_configs_test_") + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Changes the working directory for its lifetime.
class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() { fs::current_path(old_); }

 private:
  fs::path old_;
};

TEST(BuiltinConfigs, DeviceNamesIncludeNeuPimsNewtonAndNpuOnly) {
  EXPECT_THAT(BuiltinConfigNames("devices"), IsSupersetOf({"neupims", "newton", "npu-only"}));
}

TEST(BuiltinConfigs, NamesOfAnUnknownKindAreEmpty) {
  EXPECT_THAT(BuiltinConfigNames("no-such-kind"), IsEmpty());
}

TEST(BuiltinConfigs, TextOfAnUnknownPathIsAbsent) {
  EXPECT_FALSE(BuiltinConfigText("devices/no-such-device.json").has_value());
  EXPECT_FALSE(BuiltinConfigText("neupims").has_value());
}

TEST(BuiltinConfigs, OpenConfigFindsABuiltinFromAnyWorkingDirectory) {
  ScratchDir dir;
  ScopedCwd cwd(dir.path());
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc = OpenConfig("devices", "neupims");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)->source(), "configs/devices/neupims.json");
  EXPECT_EQ((*doc)->Root().String("name"), "neupims");
  EXPECT_TRUE((*doc)->status().ok()) << (*doc)->status();
}

TEST(BuiltinConfigs, OpenConfigReadsAnExistingFilePath) {
  ScratchDir dir;
  const fs::path path = dir.path() / "custom.json";
  std::ofstream(path) << R"({"name": "custom"})";
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc = OpenConfig("devices", path.string());
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)->source(), path.string());
  EXPECT_EQ((*doc)->Root().String("name"), "custom");
}

TEST(BuiltinConfigs, ABareNameIsABuiltinEvenIfAFileOfThatNameExists) {
  ScratchDir dir;
  ScopedCwd cwd(dir.path());
  std::ofstream("neupims") << "\x7f"
                              "ELF not json";  // e.g. the neupims binary itself
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc = OpenConfig("devices", "neupims");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)->source(), "configs/devices/neupims.json");
  std::ofstream("mine.json") << R"({"name": "from-file"})";
  doc = OpenConfig("devices", "mine.json");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_EQ((*doc)->Root().String("name"), "from-file");
  doc = OpenConfig("devices", "./neupims");  // a path: read (and rejected as JSON)
  EXPECT_FALSE(doc.ok());
}

TEST(BuiltinConfigs, OpenConfigOfAnInvalidFileReportsThePath) {
  ScratchDir dir;
  const fs::path path = dir.path() / "broken.json";
  std::ofstream(path) << "{ not json";
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc = OpenConfig("devices", path.string());
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(doc.status().message(), HasSubstr(path.string()));
}

TEST(BuiltinConfigs, OpenConfigOfAnUnknownNameIsNotFoundListingTheBuiltins) {
  absl::StatusOr<std::unique_ptr<ConfigDocument>> doc = OpenConfig("devices", "no-such-device");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), absl::StatusCode::kNotFound);
  const std::string message(doc.status().message());
  EXPECT_THAT(message, HasSubstr("no-such-device"));
  for (const std::string& name : BuiltinConfigNames("devices")) {
    EXPECT_THAT(message, HasSubstr(name));
  }
  EXPECT_THAT(message, HasSubstr("neupims"));
  EXPECT_THAT(message, HasSubstr("newton"));
  EXPECT_THAT(message, HasSubstr("npu-only"));
  EXPECT_THAT(message, HasSubstr("or a built-in: "));
  EXPECT_EQ(std::count(message.begin(), message.end(), '('),
            std::count(message.begin(), message.end(), ')'))
      << message;
}

// The embedded copies are generated at build time; a stale build would silently simulate old
// parameters, so every built-in device must equal its file on disk and vice versa.
TEST(BuiltinConfigs, EveryBuiltinDeviceTextEqualsItsFileOnDisk) {
  const fs::path dir = fs::path(NEUPIMS_SOURCE_DIR) / "configs" / "devices";
  const std::vector<std::string> names = BuiltinConfigNames("devices");
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const fs::path file = dir / (name + ".json");
    ASSERT_TRUE(fs::is_regular_file(file)) << file;
    std::optional<absl::string_view> text = BuiltinConfigText("devices/" + name + ".json");
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(std::string(*text), ReadFile(file));
  }
}

TEST(BuiltinConfigs, EveryDeviceFileOnDiskIsBuiltIn) {
  const fs::path dir = fs::path(NEUPIMS_SOURCE_DIR) / "configs" / "devices";
  const std::vector<std::string> names = BuiltinConfigNames("devices");
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    EXPECT_THAT(names, Contains(entry.path().stem().string()));
  }
}

}  // namespace
}  // namespace neupims
