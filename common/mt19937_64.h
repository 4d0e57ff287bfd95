// MT19937-64, the 64-bit Mersenne Twister of the C++ standard ([rand.predef]: std::mt19937_64),
// with the same output sequence from the same seed, generated a block of 312 at a time two words
// at once (GCC vector extensions; SSE2 on x86-64) and tempered in the same pass. The sampler's
// std::shuffle of the 391k ShareGPT rows takes 194k draws: std::mt19937_64 twists and tempers one
// word per call (~43 instructions a draw under callgrind).
//
// Only the generator changes: a std::shuffle or a distribution given this engine draws exactly
// what it draws from std::mt19937_64 (same result_type, min and max, same values), which
// tests/common/mt19937_64_test.cc checks against std::mt19937_64 itself.
#ifndef NEUPIMS_COMMON_MT19937_64_H_
#define NEUPIMS_COMMON_MT19937_64_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace neupims {

class Mt19937x64 {
 public:
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<uint64_t>::max(); }

  // The standard's seeding: x[0] = seed, x[i] = f (x[i-1] ^ (x[i-1] >> 62)) + i.
  explicit Mt19937x64(uint64_t seed) {
    state_[0] = seed;
    for (size_t i = 1; i < kN; ++i) {
      state_[i] = kF * (state_[i - 1] ^ (state_[i - 1] >> 62)) + i;
    }
  }

  result_type operator()() {
    if (next_ == kN) Refill();
    return out_[next_++];
  }

 private:
  static constexpr size_t kN = 312, kM = 156;
  static constexpr uint64_t kA = 0xB5026F5AA96619E9ULL, kF = 6364136223846793005ULL;
  static constexpr uint64_t kUpper = ~uint64_t{0} << 31, kLower = ~kUpper;
  using V2 = uint64_t __attribute__((vector_size(16)));

  static V2 Load2(const uint64_t* p) { return V2{p[0], p[1]}; }
  // x[k] ^ twist of (x[k], x[k + 1]), two words at once; `far` is x[k + m] (mod n).
  static V2 Twist(V2 here, V2 next, V2 far) {
    const V2 y = (here & kUpper) | (next & kLower);
    const V2 odd = V2{0, 0} - (y & 1);  // all ones where y is odd
    return far ^ (y >> 1) ^ (odd & kA);
  }
  static V2 Temper(V2 z) {
    z ^= (z >> 29) & 0x5555555555555555ULL;
    z ^= (z << 17) & 0x71D67FFFEDA60000ULL;
    z ^= (z << 37) & 0xFFF7EEE000000000ULL;
    return z ^ (z >> 43);
  }
  void Store2(size_t k, V2 x) {
    state_[k] = x[0];
    state_[k + 1] = x[1];
    const V2 t = Temper(x);
    out_[k] = t[0];
    out_[k + 1] = t[1];
  }

  // The standard's transition of all n words in order (n, m and n - m are even, so the pairs
  // never straddle the wrap of x[k + m]); x[k + m] is still the old word for k < n - m and
  // already the new one after, as in the one-word loop.
  void Refill() {
    size_t k = 0;
    for (; k < kN - kM; k += 2) {
      Store2(k, Twist(Load2(&state_[k]), Load2(&state_[k + 1]), Load2(&state_[k + kM])));
    }
    for (; k < kN - 2; k += 2) {
      Store2(k, Twist(Load2(&state_[k]), Load2(&state_[k + 1]), Load2(&state_[k + kM - kN])));
    }
    // The last pair: x[n - 1] pairs with the new x[0].
    const V2 next{state_[kN - 1], state_[0]};
    Store2(k, Twist(Load2(&state_[k]), next, Load2(&state_[k + kM - kN])));
    next_ = 0;
  }

  std::array<uint64_t, kN> state_;
  std::array<uint64_t, kN> out_;  // the tempered block
  size_t next_ = kN;              // forces the first Refill
};

}  // namespace neupims

#endif  // NEUPIMS_COMMON_MT19937_64_H_
