#include "common/mt19937_64.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace neupims {
namespace {

// The same words as std::mt19937_64 from the same seed, across many blocks of 312 (the refill's
// pairs, its wrap-around and the tempering), for edge and random seeds.
TEST(Mt19937x64, OutputsEqualStdMt19937_64) {
  std::vector<uint64_t> seeds = {0, 1, 5489, 42, ~uint64_t{0}, uint64_t{1} << 63};
  std::mt19937_64 pick(7);
  for (int i = 0; i < 10; ++i) seeds.push_back(pick());
  for (const uint64_t seed : seeds) {
    SCOPED_TRACE(seed);
    Mt19937x64 got(seed);
    std::mt19937_64 want(seed);
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(got(), want()) << i;
  }
  // The standard's check value: the 10,000th output from the default seed.
  Mt19937x64 standard(5489);
  for (int i = 1; i < 10000; ++i) standard();
  EXPECT_EQ(standard(), 9981545732273789042ULL);
}

// std::shuffle draws through uniform_int_distribution by the generator's range: the same
// permutation from either engine (odd and even lengths take its two paths).
TEST(Mt19937x64, StdShuffleGivesTheSamePermutation) {
  for (const int n : {1, 2, 7, 1000, 1001, 65537}) {
    SCOPED_TRACE(n);
    std::vector<uint32_t> a(n), b(n);
    std::iota(a.begin(), a.end(), 0u);
    std::iota(b.begin(), b.end(), 0u);
    Mt19937x64 fast(n);
    std::mt19937_64 standard(n);
    std::shuffle(a.begin(), a.end(), fast);
    std::shuffle(b.begin(), b.end(), standard);
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace neupims
