#include "common/out_of_memory.h"

#include <new>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

using ::testing::HasSubstr;

TEST(ExitOnOutOfMemory, ReturnsTheRunsExitCode) {
  EXPECT_EQ(ExitOnOutOfMemory([] { return 0; }, "unused"), 0);
  EXPECT_EQ(ExitOnOutOfMemory([] { return 2; }, "unused"), 2);
}

TEST(ExitOnOutOfMemory, BadAllocIsAnErrorLineAndExitCodeOne) {
  ::testing::internal::CaptureStderr();
  const int code = ExitOnOutOfMemory([]() -> int { throw std::bad_alloc(); }, "lower -n");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_THAT(err, HasSubstr("error: out of memory ("));
  EXPECT_THAT(err, HasSubstr("; lower -n)\n"));
}

}  // namespace
}  // namespace neupims
