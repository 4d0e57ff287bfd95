// Bytes of a 64-bit word ("SWAR": SIMD within a register) for the delimited-file reader's
// line scans. The length datasets have 391k lines of ~7 bytes, so one 8-byte word usually
// holds a whole line: finding its LF in the word costs a few instructions where a call to
// memchr costs tens, and counting LFs a word at a time about one instruction a byte.
//
// Byte i of a word is the byte at address p + i (Load8 on a little-endian machine); callers
// check kLittleEndian and keep their byte-wise path otherwise. Marks are 0x80 in a marked byte
// and 0 in every other byte.
#ifndef NEUPIMS_COMMON_SWAR_H_
#define NEUPIMS_COMMON_SWAR_H_

#include <bit>
#include <cstdint>
#include <cstring>

namespace neupims::swar {

inline constexpr bool kLittleEndian = std::endian::native == std::endian::little;

inline constexpr uint64_t kOnes = 0x0101010101010101;
inline constexpr uint64_t kHigh = 0x8080808080808080;

// `c` in every byte.
constexpr uint64_t Broadcast(char c) { return kOnes * static_cast<unsigned char>(c); }

// The 8 bytes at p (any alignment).
inline uint64_t Load8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

// Marks the zero bytes of w. Exact in every byte: the addition cannot carry out of a byte (each
// byte's low 7 bits plus 0x7F is at most 0xFE), so no byte's result depends on another's.
constexpr uint64_t ZeroBytes(uint64_t w) {
  constexpr uint64_t kLow7 = ~kHigh;
  return ~(((w & kLow7) + kLow7) | w | kLow7);
}

// Marks the bytes of w equal to c.
constexpr uint64_t BytesEqual(uint64_t w, char c) { return ZeroBytes(w ^ Broadcast(c)); }

// The index of the first (lowest) marked byte; `marks` must be nonzero.
constexpr int FirstMarked(uint64_t marks) { return std::countr_zero(marks) / 8; }

// The sum of w's eight bytes, which must be at most 255 (the multiply adds every byte into the
// top one, and a larger sum would carry out of it).
constexpr int SumByteLanes(uint64_t w) { return static_cast<int>((w * kOnes) >> 56); }

// The number of marked bytes (a sum of byte lanes of 0 or 1: no popcount instruction needed).
constexpr int CountMarked(uint64_t marks) { return SumByteLanes(marks >> 7); }

}  // namespace neupims::swar

#endif  // NEUPIMS_COMMON_SWAR_H_
