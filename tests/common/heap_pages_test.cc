#include "common/heap_pages.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/file_io.h"
#include "gtest/gtest.h"

namespace neupims {
namespace {

// The VmFlags line of the /proc/self/smaps mapping that holds `address` ("" if none does).
std::string VmFlagsAt(const void* address) {
  absl::StatusOr<std::string> smaps = ReadInputFile("/proc/self/smaps", 64 << 20);
  EXPECT_TRUE(smaps.ok()) << smaps.status();
  if (!smaps.ok()) return "";
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (absl::string_view line : absl::StrSplit(*smaps, '\n')) {
    // A mapping's first line: "start-end perms offset dev inode [path]", in hex.
    const std::vector<absl::string_view> range =
        absl::StrSplit(line.substr(0, line.find(' ')), '-');
    uint64_t start = 0, end = 0;
    if (range.size() == 2 && absl::SimpleHexAtoi(range[0], &start) &&
        absl::SimpleHexAtoi(range[1], &end)) {
      inside = start <= at && at < end;
      continue;
    }
    if (inside && absl::StartsWith(line, "VmFlags:")) return std::string(line);
  }
  return "";
}

// The test binary's heap is glibc's at the program break unless a sanitizer replaced malloc.
TEST(HeapPagesTest, AdvisesTheGrownHeapAsHugePages) {
  const absl::Status s = PrepareHugePageHeap(size_t{64} << 20);
  if (absl::IsFailedPrecondition(s)) GTEST_SKIP() << s;  // a sanitizer's allocator
  ASSERT_TRUE(s.ok()) << s;
  // An allocation after it comes from the advised range ("hg": VM_HUGEPAGE), and works.
  constexpr size_t kBytes = size_t{8} << 20;
  std::unique_ptr<char[]> block(new char[kBytes]);
  std::memset(block.get(), 0x5a, kBytes);
  EXPECT_EQ(block[kBytes - 1], 0x5a);
  EXPECT_NE(VmFlagsAt(block.get() + kBytes / 2).find(" hg"), std::string::npos)
      << VmFlagsAt(block.get() + kBytes / 2);
}

TEST(HeapPagesTest, ASecondCallIsHarmless) {
  const absl::Status first = PrepareHugePageHeap(size_t{4} << 20);
  if (absl::IsFailedPrecondition(first)) GTEST_SKIP() << first;
  ASSERT_TRUE(first.ok()) << first;
  EXPECT_TRUE(PrepareHugePageHeap(size_t{4} << 20).ok());
  std::unique_ptr<int[]> ints(new int[1000]);
  for (int i = 0; i < 1000; ++i) ints[i] = i;
  EXPECT_EQ(ints[999], 999);
}

}  // namespace
}  // namespace neupims
