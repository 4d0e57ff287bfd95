#include "tools/neupims/shard.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace neupims::cli {

absl::StatusOr<Shard> ParseShard(const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '/');
  Shard s;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &s.index) ||
      !absl::SimpleAtoi(parts[1], &s.count) || s.count < 1 || s.index < 0 || s.index >= s.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard '", text, "': expected i/N with 0 <= i < N (e.g. 0/4)"));
  }
  return s;
}

}  // namespace neupims::cli
