// SplitMix64 (Steele, Lea and Flood 2014; Vigna's reference splitmix64.c): a stateless,
// well-mixed 64-bit hash, used to derive independent seeds and synthetic token ids from a
// user's seed without sharing a random stream.
#ifndef NEUPIMS_COMMON_SPLITMIX64_H_
#define NEUPIMS_COMMON_SPLITMIX64_H_

#include <cstdint>

namespace neupims {

// The first output of a SplitMix64 generator whose state is `x`: SplitMix64(0) is
// 0xE220A8397B1DCDAF, and SplitMix64(x + 0x9E3779B97F4A7C15) is the generator's next output.
constexpr uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace neupims

#endif  // NEUPIMS_COMMON_SPLITMIX64_H_
