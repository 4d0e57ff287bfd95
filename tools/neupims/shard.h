// --shard i/N: which part of a sweep's points one process (one Kubernetes Indexed Job pod) runs.
#ifndef NEUPIMS_TOOLS_NEUPIMS_SHARD_H_
#define NEUPIMS_TOOLS_NEUPIMS_SHARD_H_

#include <string>

#include "absl/status/statusor.h"

namespace neupims::cli {

// Shard `index` of `count` owns the points whose position in the sweep's fixed order is
// index modulo count: round robin, so expensive neighbours (a model's points are adjacent)
// spread over the shards.
struct Shard {
  int index = 0;
  int count = 1;
  bool Owns(int point) const { return point % count == index; }
};

// "i/N" with 0 <= i < N; INVALID_ARGUMENT naming --shard otherwise.
absl::StatusOr<Shard> ParseShard(const std::string& text);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_SHARD_H_
