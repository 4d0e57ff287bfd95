// IterationModel: the simulated duration, utilisation and energy of one serving iteration.
//
// Role: executes one Orca iteration (every running request produces one token; newly admitted
// requests are prefilled when prefill is local) on the hardware models. The decoder layers are
// lowered to operations (models/lowering.h) for each sub-batch and list-scheduled on the
// device's units with their dependencies:
//
//   lane         sub-batch interleaving (Figure 11b)        serialized (Figure 11a)
//   NPU-S  | QKV1 | QKV2 | FFN1+QKV1 | FFN2+QKV2 | ...   | QKV |      | FFN+QKV |      | ...
//   NPU-V  |  ln  |      | softmax1  | softmax2  |       |     |  sm  |         |  sm  |
//   PIM    |      | MHA1 |   MHA2    |   MHA1    | ...   |     | MHA  |         | MHA  |
//
// Units: NPU systolic arrays (all 8 work on one GEMM), NPU vector units, the PIM channels (one
// attention stage occupies all channels; its length is the busiest channel's), the interconnect
// (tensor-parallel all-reduce). With a single row buffer the NPU cannot stream weights while the
// PIM computes (blocked mode), so systolic and PIM work exclude each other; with dual row buffers
// they overlap and a GEMM that starts while the PIM is busy gets the share of the HBM bandwidth
// the PIM leaves to MEM traffic (measured on the command-level controller). With the softmax
// overlap of sec. 6.1 the vector units run each head's softmax while the PIM works on the others.
//
// Decoder layers of one model are identical: the model schedules five layers, measures the
// steady-state period over the interior ones (1 -> 3, away from the pipeline's fill and drain)
// and extrapolates to the device's layer count; timelines schedule every layer. A GEMM that
// starts while the PIM computes runs at the reduced bandwidth share until the PIM is done, then
// at full bandwidth. Per-request attention
// latencies are cached by sequence length (they change only at tile boundaries).
//
// Replays: the list schedule depends only on the graph's shape and its nodes' durations
// (ScheduleKey); a decode stage whose key equals the previous stage's reuses the graph and
// schedule already built and only sums the (current) costs again. Prefill-only iterations are
// memoised by their prompts; a local prefill's attention ops are costed once per prompt length.
// Both are exact: the same bits as building and scheduling anew.
//
// Contract: not thread-safe; simulated time only (nanoseconds); one instance per engine.
#ifndef NEUPIMS_ENGINE_ITERATION_MODEL_H_
#define NEUPIMS_ENGINE_ITERATION_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/container/node_hash_map.h"
#include "absl/container/node_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/hw_cost.h"
#include "engine/stage_graph.h"
#include "engine/system_mode.h"
#include "hw/device.h"
#include "hw/npu/npu_model.h"
#include "hw/pim/pim_model.h"
#include "hw/registry.h"
#include "models/lowering.h"
#include "models/model_config.h"
#include "scheduler/request.h"

namespace neupims::engine {

// Links between devices (tensor-parallel all-reduce, pipeline activations, KV transfers).
struct LinkSpec {
  double gb_per_s = 64;      // per direction (PCIe 5.0 x16 ~ 63 GB/s)
  double latency_ns = 1000;  // per message

  double TransferNs(double bytes) const { return latency_ns + bytes / gb_per_s; }
};

struct IterationModelOptions {
  hw::DeviceConfig device;
  models::ModelConfig model;
  models::Parallelism parallelism;
  SystemMode mode;
  hw::DetailLevel level = hw::DetailLevel::kAnalytic;  // hardware detail
  LinkSpec interconnect;
};

// A decoding request in this iteration, by value (inputs built by hand: tests, benchmarks,
// `neupims step`).
struct DecodeItem {
  int64_t seq_len = 1;  // tokens in its KV cache, including the newest
  int channel = 0;
};

// One sub-batch's decoding requests read in place, as the scheduler lists them: the model reads
// each request's context_tokens() (its KV cache, including the newest token) and channel, and
// nothing else. The engine's path: no copy of the batch per iteration.
using DecodeBatch = absl::Span<const scheduler::Request* const>;

struct IterationInput {
  // The decoding requests of each sub-batch ([1] empty without interleaving): either `decode`,
  // read in place (valid for the call of Run), or `sub_batches`, by value; not both.
  std::array<DecodeBatch, 2> decode;
  std::array<std::vector<DecodeItem>, 2> sub_batches;
  std::vector<int64_t> prefill_prompts;  // local prefills (joined to sub-batch 0)
  bool record_timeline = false;
  int layers = 0;  // decoder layers to run: 0 = all of the device's, else exactly this many
};

// The cost of one iteration (or one stage of it): the hardware cost plus its shape.
struct IterationCost : HwCost {
  double duration_ns = 0;
  double channel_imbalance = 1;  // busiest channel / mean channel MHA load
  std::array<int64_t, 2> sub_batch_sizes{};
  std::vector<TimelineEvent> timeline;
  std::vector<PhaseSpan> phases;  // with the timeline: each layer's pre-attention, attention and
                                  // post-attention spans per sub-batch
  std::vector<StageSpan> stages;  // with the timeline and stage barriers: each barrier stage
  // The steady-state time per decoder layer (interior layers of a schedule of four or more;
  // 0 when fewer were scheduled).
  double layer_period_ns = 0;
};

// Per-layer cost of one request's attention on its PIM channel.
struct AttentionCost {
  double logit_ns = 0, attend_ns = 0;
  double logit_instructions = 0, attend_instructions = 0;  // hw::PimInstructions
  double mac_ns = 0;                                       // column steps x tCCD_L
  double macs = 0;
  double dynamic_j = 0;  // PIM commands + refresh (one channel, one layer)
  // DRAM background above precharge standby while its rows are open, incl. the second row
  // buffer (one channel, one layer).
  double background_j = 0;
  hw::CommandCounts commands{};
};

class IterationModel {
 public:
  static absl::StatusOr<std::unique_ptr<IterationModel>> Create(
      const IterationModelOptions& options);

  absl::StatusOr<IterationCost> Run(const IterationInput& input);
  // Run of a prefill-only input (prompts, no decode items, no timeline: what the standalone
  // prefill NPUs run), answered from a memo of the prompt lists seen before, without copying
  // the cost out. The pointer is valid until the next call of Run or RunPrefill.
  absl::StatusOr<const IterationCost*> RunPrefill(const IterationInput& input);

  // Attention of one request at `seq_len` (cached).
  absl::StatusOr<AttentionCost> Attention(int64_t seq_len);

  const IterationModelOptions& options() const { return options_; }
  int layers_per_device() const { return layers_per_device_; }
  // Share of a channel's peak bandwidth MEM traffic gets while the PIM computes (dual RB).
  double bandwidth_share_during_pim() const { return bandwidth_share_during_pim_; }
  // Stage graphs built and list-scheduled so far; a stage whose schedule inputs repeat the
  // previous stage's replays that schedule instead (RunStage).
  int64_t schedules_built() const { return schedule_.built; }
  // Of those, the graphs that were patched (the previous graph's topology, new durations and
  // costs) rather than built.
  int64_t graphs_patched() const { return graph_patched_; }
  // Sub-batch chains a patch passed over, their layer's ops being in the graph already.
  int64_t chains_kept() const { return chains_kept_; }
  // List-scheduler calls of all the graphs kept so far, by how they were answered
  // (ListScheduler: lean replay, checked replay, event loop).
  struct ListScheduleCalls {
    int64_t lean = 0, checked = 0, event_loop = 0;
  };
  ListScheduleCalls list_schedule_calls() const;
  // The graph last built or patched and scheduled (a replayed schedule or a memoised prefill
  // leaves it as it was; tests compare patched and fresh graphs).
  const StageGraph& stage_graph() const { return *graph_; }
  // graph_ points into graphs_: not copyable or movable.
  IterationModel(const IterationModel&) = delete;
  IterationModel& operator=(const IterationModel&) = delete;

 private:
  explicit IterationModel(const IterationModelOptions& options);

  // Cache keys: struct keys hashed with absl::Hash (exact equality, no hand-made hash).
  struct GemmKey {
    int64_t m, k, n;
    bool weights_from_hbm;
    double bandwidth_fraction;
    bool operator==(const GemmKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const GemmKey& g) {
      return H::combine(std::move(h), g.m, g.k, g.n, g.weights_from_hbm, g.bandwidth_fraction);
    }
  };
  struct VectorKey {
    models::VectorKind kind;
    int64_t rows, cols;
    bool operator==(const VectorKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const VectorKey& v) {
      return H::combine(std::move(h), v.kind, v.rows, v.cols);
    }
  };
  // The ops of one decode layer (and the LM head) at a token count, costed.
  struct CostedLayer {
    std::vector<CostedOp> pre_attention, post_attention;
    CostedOp lm_head;
    HwCost ops_cost;  // the pre- and post-attention ops' costs, summed once (AccountStage)
  };

  // One op of the lowering, costed on the NPU / interconnect (count instances included).
  absl::StatusOr<CostedOp> Cost(const models::Op& op, NodeKind kind);
  absl::StatusOr<CostedOp> CostGemm(const char* name, NodeKind kind, int64_t m, int64_t k,
                                    int64_t n, bool weights_from_hbm, int64_t count);
  double SequentialDramJ(double hbm_bytes) const;
  absl::StatusOr<CostedOp> CostVector(const char* name, NodeKind kind, models::VectorKind vector,
                                      int64_t rows, int64_t cols, int64_t count);
  absl::StatusOr<const hw::NpuOpResult*> NpuGemm(const GemmKey& key);
  absl::StatusOr<const hw::NpuOpResult*> NpuVector(const VectorKey& key);
  absl::StatusOr<const CostedLayer*> Layer(int64_t tokens);
  absl::StatusOr<const AttentionCost*> AttentionRef(int64_t seq_len);

  // The attention work of sub-batch `items` (PIM modes) into `a`; adds its commands to `cost`.
  void AccumulateSerialGemvAttention(DecodeBatch items, SubBatchAttention* a) const;
  absl::Status AccumulateAttention(DecodeBatch items, SubBatchAttention* a, HwCost* cost);
  // AccumulateAttention's parts: `a` emptied for `requests` requests (the per-channel arrays
  // sized, and zeroed only if `zero_channels`: SumAttention writes every entry); the
  // per-request sums, with the channels' MHA loads and busy time (and, without instruction
  // counts, the logit and attend spans).
  void ResetAttention(int64_t requests, bool zero_channels, SubBatchAttention* a) const;
  template <bool kCountInstructions>
  absl::Status SumAttention(DecodeBatch items, SubBatchAttention* a, HwCost* cost);
  // The hot loop's view of one cached length's AttentionCost: the fields SumAttention adds,
  // paired in 16-byte lanes (a pair adds as its two doubles would, lane by lane), the command
  // counts as int32 (at most kMaxLaneCommands each, so that kLaneChunk requests' sums fit).
  using V2d = double __attribute__((vector_size(16)));
  using V4i = int32_t __attribute__((vector_size(16)));
  static_assert(hw::kNumCommandTypes % 4 == 0);
  static constexpr int kCommandVectors = hw::kNumCommandTypes / 4;
  static constexpr int64_t kMaxLaneCommands = int64_t{1} << 20;
  static constexpr int64_t kLaneChunk = int64_t{1} << 10;  // 2^30 < 2^31 per chunk
  struct alignas(64) AttentionLanes {
    V2d ns;      // logit_ns, attend_ns
    V2d work;    // mac_ns, macs
    V2d energy;  // dynamic_j, background_j
    V4i commands[kCommandVectors];
    V2d instructions;  // logit_instructions, attend_instructions (PIM issue limits only)
  };
  // SumAttention's running sums (kept in locals inside the loop, SumLaneRun).
  struct AttentionSums {
    V2d work{}, energy{};
    int64_t total_seq = 0;
    hw::CommandCounts commands{};
  };
  // Adds items[begin, end) (end - begin <= kLaneChunk) from the lane cache up to the first
  // request whose length is not in it or whose channel is out of range; returns where it
  // stopped. Makes no call: across a call GCC keeps the sums in memory (every vector register
  // is caller-saved).
  template <bool kCountInstructions>
  size_t SumLaneRun(DecodeBatch items, size_t begin, size_t end, AttentionSums* sums);
  // Fills `lanes` from `c`: kCostedInLanes, or kCostedWide (lanes untouched) when a command
  // count does not fit.
  static uint8_t ToLanes(const AttentionCost& c, AttentionLanes* lanes);
  // Adds one request SumLaneRun stopped at: a length not costed yet (costed now), beyond the
  // cache or with counts too large for the lanes, or a channel out of range (clamped).
  template <bool kCountInstructions>
  absl::Status AddUncached(const scheduler::Request& r, AttentionSums* sums);
  // What determines a stage's schedule: the graph's shape and every node's duration.
  struct ScheduleKey {
    std::array<const CostedLayer*, 2> layer{};  // each sub-batch's costed layer (by tokens)
    std::array<bool, 2> attention{};
    std::array<double, 2> logit_ns{}, attend_ns{}, softmax_ns{};
    std::array<std::array<double, 2>, 2> npu_attention_ns{};
    bool serialized = false;
    int sim_layers = 0;
    bool last_stage = false;
    bool operator==(const ScheduleKey&) const = default;
  };
  // Costs the ops of one micro-batch's stage: stage_layer_, softmax_, npu_attention_,
  // prefill_costed_ (attention_ already accumulated).
  absl::Status CostStage(const std::array<DecodeBatch, 2>& sb, absl::Span<const int64_t> prompts);
  // prefill_costed_: the attention ops of every prompt, in prompt order.
  absl::Status CostPrefillAttention(absl::Span<const int64_t> prompts);
  // The costed attention ops of one prompt (models::PrefillAttentionOps), names interned.
  absl::StatusOr<std::vector<CostedOp>> CostPromptAttention(int64_t prompt);
  ScheduleKey StageScheduleKey(bool serialized, int sim_layers, bool last_stage) const;
  // What shapes the stage graph's topology (StageGraph, "Topology reuse"): every other input
  // of the walk (PIM or NPU attention, dual row buffers, interleaving) is fixed by the options.
  // The token counts are not part of it: a decode layer's op lists have the same length at
  // every token count.
  struct TopologyKey {
    std::array<int, 2> pre_ops{-1, -1}, post_ops{-1, -1};  // -1: the sub-batch has no tokens
    std::array<bool, 2> attention{};
    int prefill_ops = 0;
    bool serialized = false;
    int sim_layers = 0;
    bool last_stage = false;
    bool operator==(const TopologyKey&) const = default;
  };
  TopologyKey StageTopologyKey(bool serialized, int sim_layers, bool last_stage) const;
  // The work of the costed stage over `layers` identical decoder layers (plus the LM head):
  // what the graph's nodes cost, summed per layer from the costed layer's sums rather than node
  // by node (the same terms in another order).
  HwCost AccountStage(int layers, bool last_stage) const;
  // Walks the stage graph of the costed stage (layers 0 .. sim_layers, plus the LM head) on `g`:
  // a StageGraph builds it, a StageGraph::Patcher overwrites a graph of the same topology.
  template <typename G>
  void WalkGraph(G& g, bool serialized, int sim_layers, bool last_stage) const;
  // A prefill-only iteration (standalone prefill NPUs) by its prompts and layer count.
  struct PrefillKey {
    // Inline up to four prompts (a 4,096-token batch of ShareGPT prompts has one to three): a
    // key is copied into the memo without an allocation.
    absl::InlinedVector<int64_t, 4> prompts;
    int layers = 0;
    bool operator==(const PrefillKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const PrefillKey& k) {
      return H::combine(std::move(h), k.prompts, k.layers);
    }
  };
  static bool IsPrefillOnly(const IterationInput& input);
  absl::StatusOr<IterationCost> RunUncached(const IterationInput& input);
  // One pipeline stage for one micro-batch.
  absl::StatusOr<IterationCost> RunStage(const std::array<DecodeBatch, 2>& sb,
                                         absl::Span<const int64_t> prompts, int micro_batch,
                                         bool full_timeline, int layers);
  // The input's DecodeItems as requests (items_as_requests_; valid until the next call), or
  // InvalidArgument when it also gives `decode` lists.
  absl::StatusOr<std::array<DecodeBatch, 2>> ItemsAsRequests(const IterationInput& input);

  IterationModelOptions options_;
  std::unique_ptr<hw::NpuModel> npu_;
  std::unique_ptr<hw::PimModel> pim_;  // null in npu-only mode
  hw::AttentionShape dims_;
  int layers_per_device_ = 1;
  double npu_ns_per_cycle_ = 1, hbm_ns_per_cycle_ = 1;
  double bandwidth_share_during_pim_ = 0;
  double dram_rd_pj_ = 0, dram_act_pj_ = 0, dram_background_w_ = 0;
  double precharge_standby_pj_ = 0;  // one die, one HBM cycle
  // Energy fields: npu_dynamic_j (MAC/SRAM/vector), dram_j (DRAM reads behind the NPU's HBM
  // traffic), pim_j (PIM commands + refresh), npu_static_j (powered time) and
  // dram_background_j (standby over powered time plus open PIM rows), all for the whole device
  // group.

  // Caches. node_hash_map: callers keep pointers to entries while they grow. The layer cache
  // holds one entry per token count an iteration has had (at most max_batch + max_prefill_tokens
  // entries, about 5 KB each for GPT3-7B); the GEMM and vector caches one per shape.
  absl::node_hash_map<int64_t, CostedLayer> layer_cache_;  // costed decode layer, by tokens
  absl::node_hash_set<std::string> op_names_;  // the layer ops' names (CostedOp::name points here)
  absl::node_hash_map<GemmKey, hw::NpuOpResult> gemm_cache_;
  absl::node_hash_map<VectorKey, hw::NpuOpResult> vector_cache_;
  std::vector<AttentionCost> attention_cache_;  // by seq_len (filled lazily)
  // By seq_len: 0 not costed, kCostedInLanes costed and in attention_lanes_, kCostedWide costed
  // but with a command count above kMaxLaneCommands (summed from attention_cache_). No shipped
  // device reaches kCostedWide (a request's commands in a layer are bounded by its channel's KV
  // capacity, ~126k at neupims' blocks per channel): a guard that keeps the int32 lanes exact on
  // a device with larger channels.
  static constexpr uint8_t kCostedInLanes = 1, kCostedWide = 2;
  std::vector<uint8_t> attention_cached_;
  std::vector<AttentionLanes> attention_lanes_;  // by seq_len, where kCostedInLanes
  AttentionCost attention_scratch_;              // a seq_len beyond the cache
  // SumAttention's per-channel sums: (logit, attend) ns and instructions, by channel.
  std::vector<V2d> channel_ns_, channel_instructions_;

  // Per-stage scratch, reused (allocation-free in steady state).
  // A few graphs of the topologies seen last (a batch that grows past the adaptive sub-batch
  // threshold and shrinks below it alternates two; least recently used replaced), each with
  // its list scheduler.
  struct GraphSlot {
    StageGraph graph;
    std::optional<TopologyKey> topology;  // the topology `graph` holds, once built
    // The costed layers whose ops the graph's chain nodes hold (the last walk's stage_layer_):
    // a patch with the same layer passes over that sub-batch's chains (Patcher's chains_kept).
    std::array<const CostedLayer*, 2> chain_layers{};
    int64_t last_used = 0;
  };
  std::array<GraphSlot, 4> graphs_;
  StageGraph* graph_ = &graphs_[0].graph;  // the graph last built or patched
  int64_t graph_uses_ = 0, graph_patched_ = 0, chains_kept_ = 0;
  // The slot holding `topology`, with `*found` true, or else the least recently used slot.
  GraphSlot& GraphFor(const TopologyKey& topology, bool* found);
  std::array<SubBatchAttention, 2> attention_;
  // Prefill-only iterations already computed: Run is a pure function of its input, and the
  // standalone prefill NPUs see the same prompt lists again and again. Bounded (cleared when
  // full). Nodes: a growing memo moves pointers, not costs (RunPrefill returns a pointer).
  absl::node_hash_map<PrefillKey, IterationCost> prefill_memo_;
  PrefillKey prefill_key_;                           // scratch (keeps its capacity)
  std::array<const CostedLayer*, 2> stage_layer_{};  // CostStage: each sub-batch's layer
  // The schedule of *graph_, replayed while its key repeats (RunStage).
  struct {
    ScheduleKey key;
    bool valid = false;  // *graph_ holds the graph of `key`, scheduled
    double makespan_ns = 0, period_ns = 0;
    int64_t built = 0;  // graphs built and scheduled (for tests and profiles)
  } schedule_;
  std::vector<CostedOp> prefill_costed_;  // the stage's local prefills' attention ops
  // Each prompt length's costed attention ops (names interned; at most max_seq_len entries).
  absl::flat_hash_map<int64_t, std::vector<CostedOp>> prompt_attention_;
  std::array<CostedOp, 2> softmax_;                       // per sub-batch
  std::array<std::array<CostedOp, 2>, 2> npu_attention_;  // npu-only: [s] logit, context
  // pp > 1: the micro-batches and the per-channel split they are dealt from (reused).
  std::vector<std::array<std::vector<const scheduler::Request*>, 2>> micro_;
  std::vector<std::vector<const scheduler::Request*>> micro_channels_;
  // An input's DecodeItems as requests (context_tokens() = seq_len) and their lists (reused).
  std::vector<scheduler::Request> items_as_requests_;
  std::array<std::vector<const scheduler::Request*>, 2> item_batches_;
};

}  // namespace neupims::engine

#endif  // NEUPIMS_ENGINE_ITERATION_MODEL_H_
