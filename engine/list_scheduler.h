// ListScheduler: greedy list scheduling of an operation DAG on the device's four lanes.
//
// Role: given nodes with a lane, a priority, dependencies and durations, computes when each
// node starts and ends. At each decision time every free lane starts its highest-priority
// ready node (lowest `priority` value); the PIM lane decides first, so a GEMM that starts at
// the same time sees the PIM busy. Two device effects are modelled here because they depend on
// what runs concurrently:
//   - blocked mode (single row buffer, Newton): systolic and PIM nodes exclude each other;
//   - bandwidth sharing (dual row buffers, NeuPIMs sec. 5): a systolic node that starts while
//     the PIM computes progresses at `dur_ns / dur_shared_ns` of full speed until the PIM frees
//     the channels, then at full speed.
//
// Contract: deps index earlier nodes (a DAG in topological order). Reuses its scratch buffers
// between calls (allocation-free in steady state); not thread-safe.
#ifndef NEUPIMS_ENGINE_LIST_SCHEDULER_H_
#define NEUPIMS_ENGINE_LIST_SCHEDULER_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace neupims::engine {

enum class Lane : uint8_t { kSystolic, kVector, kPim, kInterconnect };
inline constexpr int kNumLanes = 4;
const char* ToString(Lane lane);

struct ScheduleNode {
  Lane lane = Lane::kSystolic;
  int priority = 0;
  double dur_ns = 0;         // at full bandwidth
  double dur_shared_ns = 0;  // systolic: if it ran entirely while the PIM computes (>= dur_ns)
  absl::InlinedVector<int, 4> deps;
  // Output.
  double start_ns = -1, end_ns = -1;
};

class ListScheduler {
 public:
  // Fills start_ns / end_ns of every node; returns the makespan.
  double Run(absl::Span<ScheduleNode> nodes, bool blocked);

 private:
  // Scratch, reused between calls.
  std::vector<int> user_begin_, users_, waiting_;
  std::array<std::vector<int>, kNumLanes> ready_;  // per lane
  std::vector<std::pair<double, int>> running_;
};

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_LIST_SCHEDULER_H_
