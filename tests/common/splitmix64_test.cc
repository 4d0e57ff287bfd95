#include "common/splitmix64.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace neupims {
namespace {

TEST(SplitMix64, MatchesTheReferenceGenerator) {
  // Vigna's splitmix64.c: the first output from state 0, and the first two from 1234567.
  EXPECT_EQ(SplitMix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(SplitMix64(1234567), 6457827717110365317ull);
  EXPECT_EQ(SplitMix64(1234567 + 0x9E3779B97F4A7C15ull), 3203168211198807973ull);
}

TEST(SplitMix64, IsAConstantExpression) {
  static_assert(SplitMix64(0) == 0xE220A8397B1DCDAFull);
  SUCCEED();
}

}  // namespace
}  // namespace neupims
