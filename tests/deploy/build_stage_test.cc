// The image's build stage (deploy/Dockerfile) installs its packages with
// `scripts/install_deps.sh --build-only`: what building the two binaries needs, and no more.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_test_util.h"
#include "tests/run_command.h"

namespace neupims::deploy_test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// The packages `install_deps.sh <options> --list` selects.
std::vector<std::string> Packages(const std::string& options) {
  const std::string command = SourcePath("scripts/install_deps.sh") + " " + options + " --list";
  const testing_util::CommandResult r = testing_util::RunCommand(command);
  EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.output;
  return absl::StrSplit(r.output, '\n', absl::SkipEmpty());
}

// The build stage configured with tests and benchmarks off still installed clang-format and the
// GoogleTest / Google Benchmark libraries.
TEST(ImageBuildStage, InstallsNoFormatterAndNoTestLibraries) {
  const std::string dockerfile = ReadFile(SourcePath("deploy/Dockerfile"));
  ASSERT_THAT(dockerfile, HasSubstr("./scripts/install_deps.sh --build-only"));
  ASSERT_THAT(dockerfile, HasSubstr("-DNEUPIMS_BUILD_TESTS=OFF -DNEUPIMS_BUILD_BENCH=OFF"));
  const std::vector<std::string> build = Packages("--build-only");
  for (const char* p : {"clang-format", "libgtest-dev", "libgmock-dev", "libbenchmark-dev"}) {
    EXPECT_THAT(build, Not(Contains(p)));
  }
  // What the top-level CMakeLists.txt finds for the binaries (find_package, pkg-config).
  for (const char* p : {"cmake", "ninja-build", "pkg-config", "libgrpc++-dev",
                        "protobuf-compiler-grpc", "libabsl-dev", "libtbb-dev", "prometheus-cpp-dev",
                        "nlohmann-json3-dev", "libcli11-dev", "libcpp-httplib-dev", "libssl-dev"}) {
    EXPECT_THAT(build, Contains(p));
  }
}

// The developer set-up (no option: scripts/test.sh, scripts/run.sh) keeps them all.
TEST(ImageBuildStage, TheDeveloperSetUpKeepsTheFormatterAndTestLibraries) {
  const std::vector<std::string> all = Packages("");
  for (const char* p : {"clang-format", "libgtest-dev", "libgmock-dev", "libbenchmark-dev"}) {
    EXPECT_THAT(all, Contains(p));
  }
}

}  // namespace
}  // namespace neupims::deploy_test
