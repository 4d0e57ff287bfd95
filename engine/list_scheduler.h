// ListScheduler: greedy list scheduling of an operation DAG on the device's four lanes.
//
// Role: given nodes with a lane, a priority, dependencies and durations, computes when each
// node starts and ends (optionally with barriers between numbered stages). At each decision time
// every free lane starts its highest-priority ready node (lowest `priority` value); the PIM lane
// decides first, so a GEMM that starts at the same time sees the PIM busy. Two device effects are
// modelled here because they depend on what runs concurrently:
//   - blocked mode (single row buffer, Newton): systolic and PIM nodes exclude each other;
//   - bandwidth sharing (dual row buffers, NeuPIMs sec. 5): a systolic node that starts while
//     the PIM computes progresses at `dur_ns / dur_shared_ns` of full speed until the PIM frees
//     the channels, then at full speed.
//
// Replay: the start orders of the last few event-loop calls are remembered (a graph whose shape
// repeats with new durations usually starts its nodes in one of a few orders). Unless blocked,
// a call first replays the remembered orders of its node count, the most recent first, each in
// one pass:
// each node starts when both its dependencies and its lane are done, and the pass checks that
// the greedy would have made each decision (no better-priority node of the lane was ready by
// then, no node of the lane was ready while it idled, the order starts each node once after
// its dependencies). Any failed check falls back to the event loop, so the result is the event
// loop's bit for bit either way (ListScheduler.ReplayEqualsTheEventLoopOnRandomGraphs).
//
// Lean replay: a caller that passes a `shape` (its promise that the graph's structure is that of
// the previous calls with the same value) lets a successful checked replay also record, once,
// the comparisons its decisions rest on: which candidate each start was the max of, and the few
// comparisons of retire points that the checks above come down to (the lane's latest
// worse-priority decision before the node's ready point, the lane's latest start after idling
// not above it, the previous decision not after this one), each with the outcome the proof saw,
// ties included. A later call with the same shape replays without the per-node checks and then
// re-evaluates exactly those comparisons on the new times; any that fails runs the checked
// replay (Lean in list_scheduler.cc has the argument). There is no bound on how far durations
// may move: only the decisions must stay.
//
// Contract: deps index earlier nodes (a DAG in topological order). Reuses its scratch buffers
// between calls (allocation-free in steady state); not thread-safe.
#ifndef NEUPIMS_ENGINE_LIST_SCHEDULER_H_
#define NEUPIMS_ENGINE_LIST_SCHEDULER_H_

#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "common/check.h"

namespace neupims::engine {

enum class Lane : uint8_t { kSystolic, kVector, kPim, kInterconnect };
inline constexpr int kNumLanes = 4;
const char* ToString(Lane lane);

// The dependencies of a node: at most four (a join of the attention branches has three), kept
// inline so that building and copying nodes never allocates. The unused slots hold kNone, so a
// reader may take all four (padded()) without a loop over size() (ListScheduler's replay).
class DepList {
 public:
  static constexpr int kMax = 4;
  static constexpr int kNone = -1;
  DepList() = default;
  DepList(std::initializer_list<int> ids) {
    for (int id : ids) push_back(id);
  }
  void push_back(int id) {
    NEUPIMS_CHECK_MSG(size_ < kMax, "a schedule node has at most four dependencies");
    ids_[size_++] = id;
  }
  template <typename It>
  void assign(It first, It last) {
    clear();
    for (; first != last; ++first) push_back(*first);
  }
  void clear() {
    ids_.fill(kNone);
    size_ = 0;
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return static_cast<size_t>(size_); }
  const int* begin() const { return ids_.data(); }
  const int* end() const { return ids_.data() + size_; }
  // The ids, then kNone in the slots beyond size().
  const std::array<int, kMax>& padded() const { return ids_; }

 private:
  std::array<int, kMax> ids_{kNone, kNone, kNone, kNone};
  int size_ = 0;
};

struct ScheduleNode {
  Lane lane = Lane::kSystolic;
  int priority = 0;
  double dur_ns = 0;         // at full bandwidth
  double dur_shared_ns = 0;  // systolic: if it ran entirely while the PIM computes (>= dur_ns)
  DepList deps;
  // With barriers (Run): the node starts only after every node of a lower stage has ended.
  // Never lower than a dependency's stage.
  int stage = 0;
  // Output.
  double start_ns = -1, end_ns = -1;
};

class ListScheduler {
 public:
  // Fills start_ns / end_ns of every node; returns the makespan. `barriers`: a node also waits
  // for every node of a lower stage (ScheduleNode::stage). `shape`: 0, or the caller's promise
  // that every call with this value passes the same node count, priorities, stages and
  // dependencies (durations and lanes may differ: Lean refuses a changed lane, and Prove then
  // recomputes the ancestor sets, which hold the lanes' edges); it lets the
  // scheduler skip the replay's checks when it can prove them (the lean replay above). Results
  // are the same bits with or without it.
  double Run(absl::Span<ScheduleNode> nodes, bool blocked, bool barriers = false,
             uint64_t shape = 0);

  // Calls answered by replaying the previous decisions (checked node by node, or lean), and by
  // the event loop.
  int64_t replays() const { return checked_replays_ + lean_replays_; }
  int64_t checked_replays() const { return checked_replays_; }
  int64_t lean_replays() const { return lean_replays_; }
  int64_t event_loop_runs() const { return event_loop_runs_; }

 private:
  // What a lean replay takes from the checked replay that proved it, per position in the order.
  struct LeanStep {
    int source = -1;  // the position whose retire point the node started at; -1: the origin
    Lane lane = Lane::kSystolic;
    bool zero = false;  // it ended where it started (its retire point is a second pass)
    // Lean's range check on end bits minus start bits (minus one unless zero): 0 for a zero
    // node, kNonZeroRoom for the others.
    uint64_t room = 0;
  };
  static constexpr uint64_t kNonZeroRoom = (uint64_t{1} << 63) - 2;
  // A comparison the proof rests on: position a's retire point below (Memory::below) or not
  // above (Memory::not_above) position b's; -1 is the origin.
  struct Comparison {
    int a = -1, b = -1;
  };
  // An event-loop call remembered for replay: the order its nodes started in.
  struct Memory {
    bool barriers = false;
    std::vector<int> order;
    int64_t last_used = 0;  // calls_ when last found or stored; 0: empty
    // Lean replay (shape != 0): the proof's steps and the comparisons it rests on.
    uint64_t shape = 0;
    std::vector<LeanStep> steps;
    std::vector<Comparison> not_above, below;
    // The order's ancestor sets (a bit per position for each position), valid for
    // `ancestors_shape` (0: not computed) and the lanes `ancestor_lanes`.
    uint64_t ancestors_shape = 0;
    std::vector<uint64_t> ancestors;
    std::vector<Lane> ancestor_lanes;
  };
  // A replayed decision of one lane: just after when it was taken (a point of Replay, plus 1),
  // and the node's priority.
  struct Decision {
    uint64_t after = 0;  // the point + 1 (0: a sentinel before the lane's first decision)
    int priority = 0;
  };

  double RunEventLoop(absl::Span<ScheduleNode> nodes, bool blocked, bool barriers);
  static constexpr int kMemories = 4;
  // The memories of calls with `n` nodes, the most recently used first; returns their count.
  int Find(size_t n, bool barriers, std::array<Memory*, kMemories>* found);
  // Replays `order` on `nodes`; false (nodes' times unspecified) if the greedy would decide
  // otherwise.
  bool Replay(absl::Span<ScheduleNode> nodes, absl::Span<const int> order, bool barriers,
              double* makespan);
  // After a successful checked replay of `memory` without barriers: records the proof a lean
  // replay needs (LeanStep per position, the comparisons its decisions rest on).
  void Prove(absl::Span<const ScheduleNode> nodes, Memory* memory, uint64_t shape);
  void ComputeAncestors(absl::Span<const ScheduleNode> nodes, Memory* memory);
  // Replays memory's order from its proof without the per-node checks, then re-evaluates the
  // proof's comparisons; false (nodes' times unspecified) if one fails.
  bool Lean(absl::Span<ScheduleNode> nodes, const Memory& memory, double* makespan);

  // Scratch, reused between calls.
  std::vector<int> user_begin_, users_, waiting_;
  std::vector<int> stage_left_;                    // barriers: nodes of each stage not yet retired
  std::array<std::vector<int>, kNumLanes> ready_;  // per lane
  // A few graph sizes alternate (decode and prefill stages on one model), and a graph's order
  // alternates between a few as its durations cross: the last few orders, of any sizes.
  std::array<Memory, kMemories> memories_;
  std::vector<int> order_;  // the event loop's start order
  // Replay scratch: each node's retire point (after one slot for DepList::kNone), each lane's
  // decisions (room for n per lane).
  std::vector<uint64_t> retire_;
  std::vector<Decision> decisions_;
  // Prove and Lean scratch: each position's retire point.
  std::vector<uint64_t> points_;
  std::vector<int> position_;  // node -> position in the order
  // Prove: per lane, (priority, position) of the decisions that can still be a later node's
  // latest worse-priority one.
  std::array<std::vector<std::pair<int, int>>, kNumLanes> worse_;
  int64_t calls_ = 0, checked_replays_ = 0, lean_replays_ = 0, event_loop_runs_ = 0;
};

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_LIST_SCHEDULER_H_
