// StageGraph: the operation DAG of one pipeline stage for one micro-batch, and its accounting.
//
// Role: the iteration model (iteration_model.h) costs operations on the hardware models and
// hands them here as CostedOps; StageGraph chains them per sub-batch and layer, adds the
// attention of each sub-batch (PIM, or NPU in npu-only mode) and the prefill attention of
// local prefills, lets the ListScheduler place them, and sums their HwCost. Per layer and
// sub-batch s (NeuPIMs Fig. 3 / Fig. 11):
//
//   pre-attention ops (ln1, qkv) -> attention branch(es) -> join -> post-attention ops
//   attention, dual row buffers:   mha (PIM, all heads) || softmax (vector, per head; sec. 6.1)
//   attention, single row buffer:  logit (PIM) -> softmax (vector) -> attend (PIM)
//   attention, npu-only:           logit GEMV -> softmax -> context GEMV (systolic arrays)
//   local prefill (s = 0):         || the prompts' score / softmax / context ops (NPU)
//
// Without sub-batch interleaving the second sub-batch's chain starts after the first's
// (serialised, Fig. 11a). Node kinds are an enum (NodeKind), never inferred from names.
//
// Every node also gets a barrier stage (used when the device has stage_barriers): with two
// interleaved sub-batches, stage = 2 layer + s + {pre 0, attention 1, post 2}, so each stage
// pairs one sub-batch's NPU block with the other's attention (the reference simulator's A-F
// over two layers):
//   A: SB0 pre(0)   B: SB0 attn(0) | SB1 pre(0)   C: SB0 post(0) pre(1) | SB1 attn(0)
//   D: SB0 attn(1) | SB1 post(0) pre(1)   E: SB0 post(1) | SB1 attn(1)   F: SB1 post(1)
// and the steady per-layer period is C + D. Otherwise (one sub-batch, or serialised) each
// layer of each sub-batch is A (pre), B (attention), E (post) in turn.
//
// Topology reuse: a graph's topology (node count, dependencies, priorities, stages, and each
// node's layer, phase and sub-batch) does not depend on the token counts, only on
// what the caller walks (op counts per chain, which attention branches exist, ...). A caller
// whose next stage has the topology of a graph it built walks that graph again through a
// StageGraph::Patcher, with the same calls in the same order as when building: each node's
// durations, lane, name, cost and channel pointers are overwritten in place (no dependencies,
// priorities or stages rebuilt). The result is the graph a fresh build would give, field by
// field (IterationModel.PatchedGraphEqualsAFreshBuild).
//
// Contract: nodes reference CostedOps, channel-load vectors and names owned by the caller,
// which must outlive Schedule / AppendTimeline. Reused between stages
// (allocation-free in steady state); not thread-safe.
#ifndef NEUPIMS_ENGINE_STAGE_GRAPH_H_
#define NEUPIMS_ENGINE_STAGE_GRAPH_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/check.h"
#include "engine/hw_cost.h"
#include "engine/list_scheduler.h"

namespace neupims::engine {

enum class NodeKind : uint8_t {
  kLayerOp,           // a lowered linear op (GEMM, vector op, all-reduce)
  kPimAttention,      // logit + attend of every head on the PIM channels (dual row buffers)
  kPimLogit,          // blocked mode: the logits of every head
  kPimAttend,         // blocked mode: softmax(logits) x V
  kSoftmax,           // the decode softmax on the vector units
  kNpuAttention,      // npu-only: a GEMV-shaped GEMM over the KV cache
  kPrefillAttention,  // a local prefill's score / softmax / context op
  kJoin,              // zero-time join of the attention branches
  kLmHead,            // the LM head on the last pipeline stage
};

// An operation with its duration and cost (already multiplied by the op's count).
struct CostedOp {
  const char* name = "";
  NodeKind kind = NodeKind::kLayerOp;
  Lane lane = Lane::kSystolic;
  double dur_ns = 0;
  double dur_shared_ns = 0;  // systolic: if it ran entirely while the PIM computes
  HwCost cost;
};

// One sub-batch's attention (identical in every layer), per channel and at its busiest channel.
struct SubBatchAttention {
  int64_t requests = 0;
  int64_t total_seq = 0;
  std::vector<double> logit_ch, attend_ch, mha_ch;  // per channel, ns
  // PIM instructions per channel (only with a PIM issue limit, hw/pim/issue_limit.h).
  std::vector<double> logit_instr_ch, attend_instr_ch;
  // When the last channel ends its logit (attend) GEMVs: the busiest channel, or later under an
  // issue limit.
  double logit_ns = 0, attend_ns = 0;
  HwCost cost;  // pim_mac_ns, pim_macs, pim_j, pim_channel_busy_ns (all channels) of one layer
  // npu-only with npu.attention_mapping = serial_gemv: the heads' serialised GEMVs, summed.
  double serial_logit_ns = 0, serial_context_ns = 0;
};

// Where an operation sits in its decoder layer: the reference simulator's stages without
// interleaving are A = pre-attention (layernorm, QKV), B = attention, E = post-attention
// (projection, residual, layernorm, FFN, residual).
enum class Phase : uint8_t { kPreAttention, kAttention, kPostAttention, kLmHead };
const char* ToString(Phase p);

// When one phase of one sub-batch's layer ran (first start to last end of its operations, PIM
// nodes to the end of the whole node, issue limits included).
struct PhaseSpan {
  Phase phase = Phase::kPreAttention;
  int sub_batch = 0;
  int layer = 0;
  int micro_batch = 0;
  double start_ns = 0, end_ns = 0;
};

// When one barrier stage ran (first start to last end of its operations); `index` 0 is A.
struct StageSpan {
  int index = 0;
  int micro_batch = 0;
  double start_ns = 0, end_ns = 0;
};

// One scheduled operation of an iteration, for timelines (Chrome trace, `neupims step`).
struct TimelineEvent {
  std::string name;
  Lane lane = Lane::kSystolic;
  int channel = -1;  // PIM lane: the channel
  int sub_batch = 0;
  int layer = 0;
  int micro_batch = 0;
  double start_ns = 0, end_ns = 0;
};

// What a node is, besides its scheduling fields (ScheduleNode). A field added here must also be
// patched (StageGraph::Patcher::Write) or be part of the checked place (PlaceOf).
struct NodeInfo {
  const char* name = "";
  NodeKind kind = NodeKind::kLayerOp;
  int sub_batch = 0;
  int layer = 0;
  const HwCost* cost = nullptr;                     // null: no cost (joins)
  const std::vector<double>* channel_ns = nullptr;  // PIM nodes: per-channel busy time
  Phase phase = Phase::kAttention;
};

class StageGraph {
 public:
  class Patcher;
  // `interleaved`: two sub-batches whose stages pair up (the barrier stages above).
  void Clear(bool interleaved);
  // Appends `ops` to sub-batch s's chain in `layer`, as `phase`.
  void AddChain(absl::Span<const CostedOp> ops, int s, int layer, Phase phase);
  // PIM attention of sub-batch s after its pre-attention ops; `softmax` is the vector op.
  // dual_row_buffers: mha || softmax (sec. 6.1); else logit -> softmax -> attend.
  void AddPimAttention(const SubBatchAttention& a, const CostedOp& softmax, bool dual_row_buffers,
                       int s, int layer);
  // npu-only attention: logit -> softmax -> context, all on the NPU.
  void AddNpuAttention(const CostedOp& logit, const CostedOp& softmax, const CostedOp& context,
                       int s, int layer);
  // Local prefill attention (s = 0), in parallel with the decode attention.
  void AddPrefillAttention(absl::Span<const CostedOp> ops, int s, int layer);
  // Joins the attention branches of sub-batch s (if any) before its post-attention ops.
  void EndAttention(int s, int layer);
  // Marks the start of sub-batch s's attention (after its pre-attention ops).
  void BeginAttention(int s);
  // Serialises sub-batch 1 after sub-batch 0 (no interleaving, Fig. 11a).
  void SerializeAfter(int from, int to) { last_[to] = last_[from]; }

  // Schedules the nodes; returns the makespan (ns). `barriers`: stage by stage. The graph's
  // build count is the scheduler's shape: a patch keeps dependencies, priorities and stages.
  double Schedule(bool blocked, bool barriers) {
    return scheduler_.Run(absl::MakeSpan(sched_), blocked, barriers, builds_);
  }
  const ListScheduler& scheduler() const { return scheduler_; }
  // End of the last node of `layer` (after Schedule). Read from the last node added to each
  // sub-batch's part of the layer: the walk (pre-attention chain, attention branches joined by
  // EndAttention, post-attention chain) makes it depend on every other node of that part, and a
  // node never ends before its dependencies, so it ends last.
  double LayerEnd(int layer) const;
  // Appends the scheduled nodes as timeline events (PIM nodes: one per busy channel).
  void AppendTimeline(int micro_batch, std::vector<TimelineEvent>* out) const;
  // Appends the span of every (layer, sub-batch, phase) that has operations, by layer.
  void AppendPhaseSpans(int micro_batch, std::vector<PhaseSpan>* out) const;
  // Appends the span of every barrier stage that has operations, in stage order.
  void AppendStageSpans(int micro_batch, std::vector<StageSpan>* out) const;

  // The nodes in insertion order (their index is their id and priority), and what each is.
  absl::Span<const ScheduleNode> nodes() const { return sched_; }
  absl::Span<const NodeInfo> node_info() const { return info_; }

 private:
  // A node's content apart from its place in the topology (dependencies, priority, stage):
  // what a Patcher overwrites. One definition per node type, shared by building and patching.
  struct NodeSpec {
    NodeInfo info;
    Lane lane = Lane::kSystolic;
    double dur_ns = 0, dur_shared_ns = 0;
  };
  // Inline: a Patcher overwrites most of the ~140 nodes of a stage with two sub-batches.
  static NodeSpec OpNode(const CostedOp& op, int s, int layer, Phase phase) {
    return {{op.name, op.kind, s, layer, &op.cost, nullptr, phase},
            op.lane,
            op.dur_ns,
            op.dur_shared_ns};
  }
  static NodeSpec MhaNode(const SubBatchAttention& a, int s, int layer);
  static NodeSpec LogitNode(const SubBatchAttention& a, int s, int layer);
  static NodeSpec AttendNode(const SubBatchAttention& a, int s, int layer);
  static NodeSpec JoinNode(int s, int layer);

  int Add(const NodeSpec& spec, DepList deps);
  int AddOp(const CostedOp& op, int s, int layer, DepList deps, Phase phase = Phase::kAttention) {
    return Add(OpNode(op, s, layer, phase), std::move(deps));
  }
  DepList Chain(int s) const;
  int StageOf(const NodeInfo& info) const;
  // A node's layer, sub-batch (0 or 1) and phase in one integer, one to one: what a Patcher
  // checks per node.
  static uint64_t PlaceOf(const NodeInfo& info) {
    return static_cast<uint64_t>(static_cast<uint32_t>(info.layer)) << 32 |
           static_cast<uint64_t>(static_cast<uint32_t>(info.sub_batch)) << 8 |
           static_cast<uint64_t>(info.phase);
  }

  bool interleaved_ = false;
  uint64_t builds_ = 0;  // Clear calls: the topology changes only there
  std::vector<ScheduleNode> sched_;
  std::vector<NodeInfo> info_;
  std::vector<uint64_t> place_;                 // PlaceOf(info_[i])
  std::vector<std::array<int, 2>> layer_last_;  // per layer and sub-batch: the last node, or -1
  std::array<int, 2> last_{-1, -1};             // last node of each sub-batch's chain
  std::array<int, 2> attention_start_{-1, -1};  // the node attention branches depend on
  std::array<DepList, 2> branches_;
  ListScheduler scheduler_;
};

// Overwrites the node contents of a built graph by walking it again: the caller makes the
// calls it made to build the graph (Clear, AddChain, BeginAttention, ..., EndAttention), in
// the same order, with the current ops; each call overwrites the nodes it appended then. Valid
// only for a walk of the same topology (the same calls with the same op counts and attention
// branches); done() tells whether the walk covered every node.
class StageGraph::Patcher {
 public:
  // `chains_kept[s]`: the caller's promise that sub-batch s's AddChain calls pass the same
  // CostedOp objects, unchanged, as the walk that last built or patched the graph (a decode
  // batch whose token count repeats: its layer's ops are one cached object). Those chains'
  // nodes hold these ops already and are passed over; only the attention nodes are rewritten.
  explicit Patcher(StageGraph* graph, std::array<bool, 2> chains_kept = {false, false})
      : g_(graph), chains_kept_(chains_kept) {}
  void Clear(bool /*interleaved: part of the topology*/) { next_ = 0; }
  void AddChain(absl::Span<const CostedOp> ops, int s, int layer, Phase phase) {
    // next_ <= the node count always: one bound for the chain, and one place for all its nodes
    // (the compiler keeps it out of the loop).
    NEUPIMS_CHECK_MSG(ops.size() <= g_->sched_.size() - next_, "a patch walk of the same topology");
    if (chains_kept_[s]) {
      next_ += ops.size();
      return;
    }
    for (const CostedOp& op : ops) Write(OpNode(op, s, layer, phase));
  }
  void BeginAttention(int s) { branched_[s] = false; }
  void AddPimAttention(const SubBatchAttention& a, const CostedOp& softmax, bool dual_row_buffers,
                       int s, int layer);
  void AddNpuAttention(const CostedOp& logit, const CostedOp& softmax, const CostedOp& context,
                       int s, int layer);
  void AddPrefillAttention(absl::Span<const CostedOp> ops, int s, int layer) {
    for (const CostedOp& op : ops) Set(OpNode(op, s, layer, Phase::kAttention));
    branched_[s] = true;
  }
  // The join has no duration or cost of its own: nothing to overwrite.
  void EndAttention(int s, int /*layer*/) { next_ += branched_[s] ? 1 : 0; }
  void SerializeAfter(int /*from*/, int /*to*/) {}
  bool done() const { return next_ == g_->sched_.size(); }

 private:
  void Set(const NodeSpec& spec) {
    NEUPIMS_CHECK_MSG(next_ < g_->sched_.size(), "a patch walk of the same topology");
    Write(spec);
  }
  // Set after the bound check (next_ < the node count).
  void Write(const NodeSpec& spec) {
    // The node's place in the topology must be the one it was built with: a walk of another
    // topology with the same node count (an incomplete topology key) would otherwise keep the
    // old dependencies and stages silently. Its layer, sub-batch and phase are compared as one
    // packed integer, and, being equal, are not written again.
    NEUPIMS_CHECK_MSG(g_->place_[next_] == PlaceOf(spec.info), "a patch walk of the same topology");
    ScheduleNode& n = g_->sched_[next_];
    n.lane = spec.lane;
    n.dur_ns = spec.dur_ns;
    n.dur_shared_ns = spec.dur_shared_ns;
    NodeInfo& info = g_->info_[next_];
    info.name = spec.info.name;
    info.kind = spec.info.kind;
    info.cost = spec.info.cost;
    info.channel_ns = spec.info.channel_ns;
    // Every NodeInfo field is written above or checked by place (layer, sub-batch, phase): a
    // field added to NodeInfo changes its size against this list of them.
    struct Fields {
      const char* name;
      NodeKind kind;
      int sub_batch, layer;
      const HwCost* cost;
      const std::vector<double>* channel_ns;
      Phase phase;
    };
    static_assert(sizeof(NodeInfo) == sizeof(Fields),
                  "a NodeInfo field is neither patched nor checked");
    ++next_;
  }

  StageGraph* g_;
  std::array<bool, 2> chains_kept_;
  size_t next_ = 0;
  std::array<bool, 2> branched_{};
};

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_STAGE_GRAPH_H_
