#include "server/tokenizer.h"

#include <cmath>

#include "common/splitmix64.h"

namespace neupims::server {

std::vector<int64_t> ByteTokenizer::Encode(absl::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string ByteTokenizer::Decode(int64_t id) const {
  if (id < 0 || id > 255) return "";
  return std::string(1, static_cast<char>(id));
}

int64_t SyntheticTokens::TokenId(uint64_t seed, int64_t index) {
  return 32 + static_cast<int64_t>(
                  SplitMix64(seed * 0x100000001B3ull + static_cast<uint64_t>(index)) % 95);
}

int64_t SyntheticTokens::StopLength(uint64_t seed, double mean_output_tokens) {
  const double p = 1.0 / std::max(1.0, mean_output_tokens);
  const double u =
      (static_cast<double>(SplitMix64(~seed) >> 11) + 0.5) / 9007199254740992.0;  // (0,1)
  return 1 + static_cast<int64_t>(std::floor(std::log(u) / std::log1p(-p)));
}

}  // namespace neupims::server
