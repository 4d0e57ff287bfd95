// Byte-level tokenizer and the synthetic generator behind the API's token ids.
//
// The engine models timing, not model weights, so no real next token is ever computed:
//  - prompts given as text are tokenised byte by byte (UTF-8 bytes are token ids 0-255), which
//    fixes their length the way a real tokenizer would (roughly: ~4x more tokens than BPE);
//  - generated token ids are drawn from a seeded generator over printable ASCII (so streamed
//    text is readable filler), deterministic for (seed, index);
//  - without ignore_eos a synthetic end-of-sequence ends the completion at a length drawn from a
//    geometric distribution (mean `mean_output_tokens`) seeded by the request's seed.
#ifndef NEUPIMS_SERVER_TOKENIZER_H_
#define NEUPIMS_SERVER_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace neupims::server {

class ByteTokenizer {
 public:
  static constexpr int64_t kEosId = 256;
  static constexpr int64_t kVocab = 257;  // 256 bytes + end-of-sequence

  std::vector<int64_t> Encode(absl::string_view text) const;
  std::string Decode(int64_t id) const;  // a byte, or "" for EOS / out-of-range ids
  const char* name() const { return "byte-level (UTF-8 bytes 0-255, EOS 256)"; }
};

class SyntheticTokens {
 public:
  // The `index`-th generated token id of a request with `seed` (printable ASCII 32-126).
  static int64_t TokenId(uint64_t seed, int64_t index);
  // Where a synthetic end-of-sequence stops a completion: >= 1, geometric with the given mean.
  static int64_t StopLength(uint64_t seed, double mean_output_tokens);
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_TOKENIZER_H_
