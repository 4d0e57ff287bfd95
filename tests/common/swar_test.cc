#include "common/swar.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace neupims::swar {
namespace {

// A word whose byte i is bytes[i].
uint64_t Word(const unsigned char (&bytes)[8]) {
  return Load8(reinterpret_cast<const char*>(bytes));
}

// Every byte value at every position, among random neighbours (a borrow or carry between bytes
// would show as a wrong mark next to a zero or a 0xFF byte).
TEST(Swar, ZeroBytesAndBytesEqualMarkExactlyTheMatchingBytes) {
  if (!kLittleEndian) GTEST_SKIP() << "the word helpers' callers use them on little-endian only";
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 20000; ++trial) {
    unsigned char bytes[8];
    for (unsigned char& b : bytes) {
      const int kind = static_cast<int>(rng() % 4);
      b = kind == 0 ? 0 : kind == 1 ? 0xFF : kind == 2 ? '\n' : static_cast<unsigned char>(rng());
    }
    const uint64_t w = Word(bytes);
    uint64_t zeros = 0, lfs = 0;
    int count = 0;
    for (int i = 0; i < 8; ++i) {
      if (bytes[i] == 0) zeros |= uint64_t{0x80} << (8 * i);
      if (bytes[i] == '\n') {
        lfs |= uint64_t{0x80} << (8 * i);
        ++count;
      }
    }
    ASSERT_EQ(ZeroBytes(w), zeros) << std::hex << w;
    ASSERT_EQ(BytesEqual(w, '\n'), lfs) << std::hex << w;
    ASSERT_EQ(CountMarked(lfs), count);
    if (lfs != 0) {
      const void* const first = std::memchr(bytes, '\n', sizeof bytes);
      ASSERT_EQ(FirstMarked(lfs), static_cast<const unsigned char*>(first) - bytes);
    }
  }
}

}  // namespace
}  // namespace neupims::swar
