#include "engine/iteration_model.h"

#include <algorithm>
#include <cmath>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/status_macros.h"
#include "hw/dram/energy.h"
#include "hw/pim/issue_limit.h"
#include "hw/registry.h"

namespace neupims::engine {
namespace {

constexpr double kPjToJ = 1e-12;

hw::VectorOp ToHw(models::VectorKind k) {
  switch (k) {
    case models::VectorKind::kLayerNorm:
      return hw::VectorOp::kLayerNorm;
    case models::VectorKind::kGelu:
      return hw::VectorOp::kGelu;
    case models::VectorKind::kSiluMul:
      return hw::VectorOp::kGelu;  // same element-wise cost
    case models::VectorKind::kAdd:
      return hw::VectorOp::kAdd;
    case models::VectorKind::kSoftmax:
      return hw::VectorOp::kSoftmax;
  }
  return hw::VectorOp::kAdd;
}

// Ring all-reduce over `tp` devices: 2 (tp - 1) steps, each moving bytes / tp per link.
double AllReduceNs(const LinkSpec& link, int tp, double bytes) {
  if (tp <= 1) return 0;
  const double steps = 2.0 * (tp - 1);
  return steps * (link.latency_ns + bytes / tp / link.gb_per_s);
}

// Busiest channel's MHA load over the mean, over both sub-batches (1 without PIM work). An
// empty sub-batch's loads are not read (AccumulateAttention leaves them as they were): it adds
// +0.0 to every channel, which changes no load (each is a sum from +0.0 of nonnegative times).
double ChannelImbalance(const std::array<SubBatchAttention, 2>& a, int channels) {
  const bool both = a[0].requests > 0 && a[1].requests > 0;
  if (!both && a[0].requests == 0 && a[1].requests == 0) return 1.0;
  const std::vector<double>& first = a[0].requests > 0 ? a[0].mha_ch : a[1].mha_ch;
  double max_load = 0, sum = 0;
  for (int ch = 0; ch < channels; ++ch) {
    const double l = both ? first[ch] + a[1].mha_ch[ch] : first[ch];
    max_load = std::max(max_load, l);
    sum += l;
  }
  return sum > 0 ? max_load / (sum / static_cast<double>(channels)) : 1.0;
}

// Splits each sub-batch into `pp` micro-batches, every channel's requests spread round-robin
// (the remainder rotating across micro-batches). The lists are reused: sized once, cleared.
void SplitMicroBatches(const std::array<DecodeBatch, 2>& sub_batches, int pp, int channels,
                       std::vector<std::vector<const scheduler::Request*>>* per_channel_scratch,
                       std::vector<std::array<std::vector<const scheduler::Request*>, 2>>* out) {
  out->resize(pp);
  for (auto& mb : *out) {
    mb[0].clear();
    mb[1].clear();
  }
  std::vector<std::vector<const scheduler::Request*>>& per_channel = *per_channel_scratch;
  per_channel.resize(channels);
  for (int s = 0; s < 2; ++s) {
    if (sub_batches[s].empty()) continue;
    for (auto& c : per_channel) c.clear();
    for (const scheduler::Request* r : sub_batches[s]) {
      per_channel[std::clamp(r->channel, 0, channels - 1)].push_back(r);
    }
    int turn = 0;
    for (const std::vector<const scheduler::Request*>& reqs : per_channel) {
      for (const scheduler::Request* r : reqs) {
        (*out)[turn][s].push_back(r);
        turn = (turn + 1) % pp;
      }
    }
  }
}

// Appends a micro-batch's spans or events to the iteration's, `offset_ns` later.
template <typename T>
void AppendShifted(std::vector<T> from, double offset_ns, std::vector<T>* to) {
  for (T& x : from) {
    x.start_ns += offset_ns;
    x.end_ns += offset_ns;
    to->push_back(std::move(x));
  }
}

}  // namespace

IterationModel::IterationModel(const IterationModelOptions& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<IterationModel>> IterationModel::Create(
    const IterationModelOptions& options) {
  RETURN_IF_ERROR(models::ValidateParallelism(options.model, options.parallelism));
  std::unique_ptr<IterationModel> m(new IterationModel(options));
  const hw::DetailModels level = hw::DetailModelsFor(options.level);
  ASSIGN_OR_RETURN(m->npu_, hw::CreateNpuModel(level.npu, options.device));
  const bool pim = options.mode.pim_attention;
  if (pim && !options.device.hbm.pim.enabled) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode ", options.mode.name, " needs a PIM device; '", options.device.name, "' has none"));
  }
  if (pim) {
    hw::DeviceConfig dev = options.device;
    ASSIGN_OR_RETURN(m->pim_, hw::CreatePimModel(level.pim, dev));
  }
  const models::AttentionDims d = models::DeviceAttentionDims(options.model, options.parallelism);
  m->dims_ = {1, d.heads, d.kv_heads, d.head_dim};
  m->layers_per_device_ = options.model.layers / options.parallelism.pp;
  m->npu_ns_per_cycle_ = 1e3 / options.device.npu.frequency_mhz;
  m->hbm_ns_per_cycle_ = 1e3 / options.device.hbm.frequency_mhz;
  const hw::DramEventEnergy e = hw::ComputeEventEnergy(options.device.hbm);
  m->dram_rd_pj_ = e.rd_pj;
  m->dram_act_pj_ = e.act_pj;
  const hw::HbmSpec& h = options.device.hbm;
  // Idle DRAM: every die of every channel in precharge standby.
  m->precharge_standby_pj_ = e.precharge_standby_pj_per_cycle;
  m->dram_background_w_ = h.org.channels * h.org.ranks * e.precharge_standby_pj_per_cycle *
                          h.frequency_mhz * 1e6 * kPjToJ;
  if (pim && options.mode.dual_row_buffers) {
    // The MEM share of a channel's bandwidth while the PIM runs attention, measured once on
    // the command-level controller (the analytic model's calibration) with the NPU asking for
    // all of it, at the model's attention shape.
    hw::AttentionShape probe = m->dims_;
    probe.seq_len = 512;
    hw::MemTraffic full;
    full.demand = 1.0;
    auto analytic = hw::CreateAnalyticPimModel(h, {});
    ASSIGN_OR_RETURN(hw::PimOpResult r, analytic->Attention(probe, full));
    m->bandwidth_share_during_pim_ =
        std::clamp(r.mem_bytes_per_cycle / h.peak_bytes_per_cycle(), 0.01, 1.0);
  }
  m->attention_cache_.resize(options.model.max_seq_len + 2);
  m->attention_cached_.assign(options.model.max_seq_len + 2, 0);
  m->attention_lanes_.resize(options.model.max_seq_len + 2);
  m->channel_ns_.resize(options.device.hbm.org.channels);
  m->channel_instructions_.resize(options.device.hbm.org.channels);
  return m;
}

absl::StatusOr<AttentionCost> IterationModel::Attention(int64_t seq_len) {
  ASSIGN_OR_RETURN(const AttentionCost* c, AttentionRef(seq_len));
  return *c;
}

absl::StatusOr<const AttentionCost*> IterationModel::AttentionRef(int64_t seq_len) {
  const bool cacheable = seq_len >= 1 && seq_len < static_cast<int64_t>(attention_cached_.size());
  if (cacheable && attention_cached_[seq_len]) return &attention_cache_[seq_len];
  if (pim_ == nullptr) return absl::FailedPreconditionError("no PIM in this mode");
  if (seq_len < 1) return absl::InvalidArgumentError("seq_len must be >= 1");
  hw::AttentionShape s = dims_;
  s.seq_len = seq_len;
  const hw::PimGeometry g = pim_->geometry();
  ASSIGN_OR_RETURN(hw::GemvProgram logit, hw::PlanLogit(s, g));
  ASSIGN_OR_RETURN(hw::GemvProgram attend, hw::PlanAttend(s, g));
  ASSIGN_OR_RETURN(hw::PimOpResult lr, pim_->Run(logit));
  ASSIGN_OR_RETURN(hw::PimOpResult ar, pim_->Run(attend));
  AttentionCost& c = cacheable ? attention_cache_[seq_len] : attention_scratch_;
  c = AttentionCost{};
  c.logit_ns = static_cast<double>(lr.cycles) * hbm_ns_per_cycle_;
  c.attend_ns = static_cast<double>(ar.cycles) * hbm_ns_per_cycle_;
  const hw::PimCommandSet command_set = options_.device.hbm.pim.command_set;
  c.logit_instructions = static_cast<double>(hw::PimInstructions(logit, command_set));
  c.attend_instructions = static_cast<double>(hw::PimInstructions(attend, command_set));
  c.mac_ns = static_cast<double>(lr.column_steps + ar.column_steps) *
             options_.device.hbm.timing.tCCD_L * hbm_ns_per_cycle_;
  c.macs = static_cast<double>(lr.macs + ar.macs);
  c.dynamic_j = lr.energy.pim_j + lr.energy.refresh_j + ar.energy.pim_j + ar.energy.refresh_j;
  // Background above the idle (precharge standby) level the device is charged anyway: rows held
  // open, and the second row buffer (NeuPIMs sec. 8.2, Table 5).
  const double idle_j = static_cast<double>(options_.device.hbm.org.ranks) *
                        static_cast<double>(lr.cycles + ar.cycles) * precharge_standby_pj_ * kPjToJ;
  c.background_j = std::max(0.0, lr.energy.background_j + ar.energy.background_j - idle_j);
  for (int t = 0; t < hw::kNumCommandTypes; ++t) c.commands[t] = lr.commands[t] + ar.commands[t];
  if (cacheable) attention_cached_[seq_len] = ToLanes(c, &attention_lanes_[seq_len]);
  return &c;
}

// The lanes hold the same doubles; the counts fit in int32 lanes when at most kMaxLaneCommands
// (a request's commands on its channel in one layer: thousands at GPT3-7B's 2,048 tokens).
uint8_t IterationModel::ToLanes(const AttentionCost& c, AttentionLanes* lanes) {
  for (const int64_t n : c.commands) {
    if (n < 0 || n > kMaxLaneCommands) return kCostedWide;
  }
  lanes->ns = V2d{c.logit_ns, c.attend_ns};
  lanes->work = V2d{c.mac_ns, c.macs};
  lanes->energy = V2d{c.dynamic_j, c.background_j};
  lanes->instructions = V2d{c.logit_instructions, c.attend_instructions};
  for (int v = 0; v < kCommandVectors; ++v) {
    for (int k = 0; k < 4; ++k) lanes->commands[v][k] = static_cast<int32_t>(c.commands[4 * v + k]);
  }
  return kCostedInLanes;
}

// ---------------------------------------------------------------------------------------------
// Costing operations (cached by shape).

absl::StatusOr<const hw::NpuOpResult*> IterationModel::NpuGemm(const GemmKey& key) {
  auto it = gemm_cache_.find(key);
  if (it != gemm_cache_.end()) return &it->second;
  const bool activations_from_hbm =
      options_.device.npu.activation_traffic == hw::ActivationTraffic::kDramRoundTrip;
  ASSIGN_OR_RETURN(hw::NpuOpResult r,
                   npu_->Gemm({key.m, key.k, key.n, key.weights_from_hbm, activations_from_hbm},
                              {key.bandwidth_fraction}));
  return &gemm_cache_.emplace(key, r).first->second;
}

absl::StatusOr<const hw::NpuOpResult*> IterationModel::NpuVector(const VectorKey& key) {
  auto it = vector_cache_.find(key);
  if (it != vector_cache_.end()) return &it->second;
  ASSIGN_OR_RETURN(hw::NpuOpResult r, npu_->Vector({ToHw(key.kind), key.rows, key.cols}));
  return &vector_cache_.emplace(key, r).first->second;
}

absl::StatusOr<CostedOp> IterationModel::CostGemm(const char* name, NodeKind kind, int64_t m,
                                                  int64_t k, int64_t n, bool weights_from_hbm,
                                                  int64_t count) {
  // A GEMM that starts while the PIM computes gets the MEM share of the bandwidth (dual row
  // buffers); with a single row buffer it never overlaps the PIM.
  const double share = options_.mode.dual_row_buffers ? bandwidth_share_during_pim_ : 1.0;
  ASSIGN_OR_RETURN(const hw::NpuOpResult* full, NpuGemm({m, k, n, weights_from_hbm, 1.0}));
  ASSIGN_OR_RETURN(const hw::NpuOpResult* shared, NpuGemm({m, k, n, weights_from_hbm, share}));
  const double c = static_cast<double>(count);
  CostedOp op{name, kind, Lane::kSystolic};
  op.dur_ns = static_cast<double>(full->cycles) * npu_ns_per_cycle_ * c;
  op.dur_shared_ns = static_cast<double>(shared->cycles) * npu_ns_per_cycle_ * c;
  const double macs = static_cast<double>(full->macs);
  const double hbm_bytes = static_cast<double>(full->hbm_bytes);
  op.cost.systolic_busy_ns =
      macs / static_cast<double>(options_.device.npu.peak_macs_per_cycle()) * npu_ns_per_cycle_ * c;
  op.cost.npu_macs = macs * c;
  op.cost.npu_hbm_bytes = hbm_bytes * c;
  op.cost.npu_dynamic_j = full->energy_j * c;
  op.cost.dram_j = SequentialDramJ(hbm_bytes) * c;
  return op;
}

// The DRAM energy of an NPU stream (sequential: one ACT per page of every bank).
double IterationModel::SequentialDramJ(double hbm_bytes) const {
  const hw::HbmOrganization& o = options_.device.hbm.org;
  return (hbm_bytes / o.burst_bytes * dram_rd_pj_ + hbm_bytes / o.page_bytes * dram_act_pj_) *
         kPjToJ;
}

absl::StatusOr<CostedOp> IterationModel::CostVector(const char* name, NodeKind kind,
                                                    models::VectorKind vector, int64_t rows,
                                                    int64_t cols, int64_t count) {
  ASSIGN_OR_RETURN(const hw::NpuOpResult* r, NpuVector({vector, rows, cols}));
  const double c = static_cast<double>(count);
  // With a serial NPU (npu.op_overlap) the vector units share the arrays' lane.
  const bool serial = options_.device.npu.op_overlap == hw::OpOverlap::kSerial;
  CostedOp op{name, kind, serial ? Lane::kSystolic : Lane::kVector};
  op.dur_ns = op.dur_shared_ns = static_cast<double>(r->cycles) * npu_ns_per_cycle_ * c;
  op.cost.vector_busy_ns = static_cast<double>(r->cycles) * npu_ns_per_cycle_ * c;
  op.cost.npu_dynamic_j = r->energy_j * c;
  // Nonzero only when activations round-trip through HBM (npu.activation_traffic).
  op.cost.npu_hbm_bytes = static_cast<double>(r->hbm_bytes) * c;
  op.cost.dram_j = SequentialDramJ(static_cast<double>(r->hbm_bytes)) * c;
  return op;
}

absl::StatusOr<CostedOp> IterationModel::Cost(const models::Op& op, NodeKind kind) {
  switch (op.kind) {
    case models::OpKind::kGemm:
      return CostGemm(op.name.c_str(), kind, op.m, op.k, op.n, op.weights_from_hbm, op.count);
    case models::OpKind::kVector:
      return CostVector(op.name.c_str(), kind, op.vector, op.rows, op.cols, op.count);
    case models::OpKind::kAllReduce: {
      CostedOp c{op.name.c_str(), kind, Lane::kInterconnect};
      // Without the all-reduce (device tp_all_reduce: false) the node stays, taking no time.
      c.dur_ns = c.dur_shared_ns = options_.device.tp_all_reduce
                                       ? AllReduceNs(options_.interconnect, options_.parallelism.tp,
                                                     static_cast<double>(op.bytes))
                                       : 0.0;
      c.cost.interconnect_busy_ns = c.dur_ns;
      return c;
    }
    case models::OpKind::kAttention:
      break;
  }
  return absl::InternalError(absl::StrCat("op '", op.name, "' is not a linear op"));
}

absl::StatusOr<const IterationModel::CostedLayer*> IterationModel::Layer(int64_t tokens) {
  auto it = layer_cache_.find(tokens);
  if (it != layer_cache_.end()) return &it->second;
  // The lowering is not kept: only the costed ops are, their names interned (a costed op's name
  // points at the lowered op's, and a lowering kept per token count was a quarter of this cache).
  ASSIGN_OR_RETURN(const models::LayerOps lowered,
                   models::LowerDecodeLayer(options_.model, options_.parallelism, tokens));
  CostedLayer layer;
  layer.pre_attention.reserve(lowered.pre_attention.size());
  layer.post_attention.reserve(lowered.post_attention.size());
  for (const models::Op& op : lowered.pre_attention) {
    ASSIGN_OR_RETURN(layer.pre_attention.emplace_back(), Cost(op, NodeKind::kLayerOp));
    layer.pre_attention.back().name = op_names_.insert(op.name).first->c_str();
  }
  for (const models::Op& op : lowered.post_attention) {
    ASSIGN_OR_RETURN(layer.post_attention.emplace_back(), Cost(op, NodeKind::kLayerOp));
    layer.post_attention.back().name = op_names_.insert(op.name).first->c_str();
  }
  for (const auto* ops : {&layer.pre_attention, &layer.post_attention}) {
    for (const CostedOp& op : *ops) layer.ops_cost.AddScaledFields(op.cost, 1);
  }
  // The LM head's name outlives the layer: a static string, as the lowering names it.
  const models::Op head = models::LmHead(options_.model, options_.parallelism, tokens);
  ASSIGN_OR_RETURN(layer.lm_head, CostGemm("lm_head", NodeKind::kLmHead, head.m, head.k, head.n,
                                           head.weights_from_hbm, head.count));
  return &layer_cache_.emplace(tokens, std::move(layer)).first->second;
}

// ---------------------------------------------------------------------------------------------
// One stage: attention accumulation, graph building, scheduling, accounting.

void IterationModel::ResetAttention(int64_t requests, bool zero_channels,
                                    SubBatchAttention* a) const {
  const int channels = options_.device.hbm.org.channels;
  a->requests = requests;
  a->total_seq = 0;
  a->logit_ns = a->attend_ns = 0;
  a->cost = HwCost{};
  const bool count_instructions =
      options_.device.hbm.pim.issue.scope != hw::PimIssueScope::kUnlimited;
  const auto size = [zero_channels](std::vector<double>* v, size_t n) {
    if (zero_channels) {
      v->assign(n, 0.0);
    } else {
      v->resize(n);
    }
  };
  for (std::vector<double>* v : {&a->logit_ch, &a->attend_ch, &a->mha_ch}) size(v, channels);
  const size_t instruction_channels = count_instructions ? channels : 0;
  for (std::vector<double>* v : {&a->logit_instr_ch, &a->attend_instr_ch}) {
    size(v, instruction_channels);
  }
  a->serial_logit_ns = a->serial_context_ns = 0;
}

// Hot loop (once per decoding request per iteration): every add of a request's cost is one
// 16-byte lane add (the channel's logit and attend times, the MAC time and count, the two
// energies: each double summed in request order, as one add per field would), the commands in
// three int32x4 adds, widened once per chunk. No call and no second pass over the requests: the
// loop stops at the first request whose length is not in the lane cache (a predictable branch),
// and SumAttention adds that request with AddUncached and resumes.
template <bool kCountInstructions>
size_t IterationModel::SumLaneRun(DecodeBatch items, size_t begin, size_t end,
                                  AttentionSums* sums) {
  const uint32_t channels = static_cast<uint32_t>(channel_ns_.size());
  const uint64_t cached_below = attention_cached_.size();
  const uint8_t* cached = attention_cached_.data();
  const AttentionLanes* lanes = attention_lanes_.data();
  V2d* channel_ns = channel_ns_.data();
  V2d* channel_instructions = channel_instructions_.data();
  V2d work = sums->work, energy = sums->energy;
  int64_t total_seq = sums->total_seq;
  // Three named vectors, not an array: GCC kept the array in registers but tracked in a flag,
  // set by every request, whether to spill it at the loop's exit.
  static_assert(kCommandVectors == 3);
  V4i commands0{}, commands1{}, commands2{};
  // Raw pointers: a Span's operator[] checks its bound on every request. The requests are the
  // scheduler's, read in place (no copy of the batch per iteration).
  const scheduler::Request* const* const first = items.data();
  const scheduler::Request* const* r = first + begin;
  for (const scheduler::Request* const* const last = first + end; r < last; ++r) {
    const int64_t seq_len = (*r)->context_tokens();
    const uint64_t len = static_cast<uint64_t>(seq_len);
    const uint32_t ch = static_cast<uint32_t>((*r)->channel);
    // A channel out of range also leaves (AddUncached clamps it): cheaper than clamping here.
    if (len >= cached_below || cached[len] != kCostedInLanes || ch >= channels) [[unlikely]] {
      break;
    }
    const AttentionLanes& c = lanes[len];
    total_seq += seq_len;
    channel_ns[ch] += c.ns;
    if constexpr (kCountInstructions) channel_instructions[ch] += c.instructions;
    work += c.work;
    energy += c.energy;
    commands0 += c.commands[0];
    commands1 += c.commands[1];
    commands2 += c.commands[2];
  }
  sums->work = work;
  sums->energy = energy;
  sums->total_seq = total_seq;
  const V4i commands[kCommandVectors] = {commands0, commands1, commands2};
  for (int v = 0; v < kCommandVectors; ++v) {
    for (int k = 0; k < 4; ++k) sums->commands[4 * v + k] += commands[v][k];
  }
  return static_cast<size_t>(r - first);
}

template <bool kCountInstructions>
absl::Status IterationModel::AddUncached(const scheduler::Request& r, AttentionSums* sums) {
  const int64_t seq_len = r.context_tokens();
  ASSIGN_OR_RETURN(const AttentionCost* c, AttentionRef(seq_len));
  const int ch = std::clamp(r.channel, 0, options_.device.hbm.org.channels - 1);
  sums->total_seq += seq_len;
  channel_ns_[ch] += V2d{c->logit_ns, c->attend_ns};
  if constexpr (kCountInstructions) {
    channel_instructions_[ch] += V2d{c->logit_instructions, c->attend_instructions};
  }
  sums->work += V2d{c->mac_ns, c->macs};
  sums->energy += V2d{c->dynamic_j, c->background_j};
  for (int t = 0; t < hw::kNumCommandTypes; ++t) sums->commands[t] += c->commands[t];
  return absl::OkStatus();
}

template <bool kCountInstructions>
absl::Status IterationModel::SumAttention(DecodeBatch items, SubBatchAttention* a, HwCost* cost) {
  const size_t channels = channel_ns_.size();
  std::fill(channel_ns_.begin(), channel_ns_.end(), V2d{});
  if constexpr (kCountInstructions) {
    std::fill(channel_instructions_.begin(), channel_instructions_.end(), V2d{});
  }
  AttentionSums sums;
  for (size_t i = 0; i < items.size();) {
    const size_t stop = std::min(items.size(), i + static_cast<size_t>(kLaneChunk));
    i = SumLaneRun<kCountInstructions>(items, i, stop, &sums);
    if (i < stop) RETURN_IF_ERROR(AddUncached<kCountInstructions>(*items[i++], &sums));
  }
  // Every channel's entry written (ResetAttention left them unzeroed); the busy time summed in
  // channel order as before. Without instruction counts (the issue scope is unlimited) each span
  // is hw::IssueLimitedSpanNs's for that scope, max(0, the busiest channel), kept here as the
  // channels are written instead of in a second pass over them: a running maximum from +0 that
  // takes a value only when strictly larger gives the same double in any order.
  double busy = 0;
  double logit_span = 0, attend_span = 0;
  for (size_t ch = 0; ch < channels; ++ch) {
    const double logit = channel_ns_[ch][0], attend = channel_ns_[ch][1];
    a->logit_ch[ch] = logit;
    a->attend_ch[ch] = attend;
    a->mha_ch[ch] = logit + attend;
    busy += a->mha_ch[ch];
    if constexpr (kCountInstructions) {
      a->logit_instr_ch[ch] = channel_instructions_[ch][0];
      a->attend_instr_ch[ch] = channel_instructions_[ch][1];
    } else {
      logit_span = logit_span < logit ? logit : logit_span;
      attend_span = attend_span < attend ? attend : attend_span;
    }
  }
  if constexpr (!kCountInstructions) {
    a->logit_ns = logit_span;
    a->attend_ns = attend_span;
  }
  a->cost.pim_channel_busy_ns = busy;
  a->total_seq = sums.total_seq;
  a->cost.pim_mac_ns = sums.work[0];
  a->cost.pim_macs = sums.work[1];
  a->cost.pim_j = sums.energy[0];
  a->cost.dram_background_j = sums.energy[1];
  for (int t = 0; t < hw::kNumCommandTypes; ++t) cost->pim_commands[t] += sums.commands[t];
  return absl::OkStatus();
}

absl::Status IterationModel::AccumulateAttention(DecodeBatch items, SubBatchAttention* a,
                                                 HwCost* cost) {
  if (items.empty()) {
    // Nothing to sum: no graph node reads an empty sub-batch's channels, and ChannelImbalance
    // passes over them, so they are neither sized nor written.
    a->requests = a->total_seq = 0;
    a->logit_ns = a->attend_ns = 0;
    a->cost = HwCost{};
    a->serial_logit_ns = a->serial_context_ns = 0;
    return absl::OkStatus();
  }
  const bool pim = options_.mode.pim_attention;
  ResetAttention(static_cast<int64_t>(items.size()), /*zero_channels=*/!pim, a);
  if (!pim) {
    for (const scheduler::Request* r : items) a->total_seq += r->context_tokens();
    if (options_.device.npu.attention_mapping == hw::AttentionMapping::kSerialGemv) {
      AccumulateSerialGemvAttention(items, a);
    }
    return absl::OkStatus();
  }
  const hw::PimIssue& issue = options_.device.hbm.pim.issue;
  const bool count_instructions = issue.scope != hw::PimIssueScope::kUnlimited;
  if (!count_instructions) return SumAttention<false>(items, a, cost);  // and the spans
  RETURN_IF_ERROR(SumAttention<true>(items, a, cost));
  a->logit_ns = hw::IssueLimitedSpanNs(a->logit_ch, a->logit_instr_ch, issue);
  a->attend_ns = hw::IssueLimitedSpanNs(a->attend_ch, a->attend_instr_ch, issue);
  return absl::OkStatus();
}

// One request and one head at a time (hw::SerialGemvHeadCycles).
void IterationModel::AccumulateSerialGemvAttention(DecodeBatch items, SubBatchAttention* a) const {
  const double heads_ns = static_cast<double>(dims_.num_heads) * npu_ns_per_cycle_;
  for (const scheduler::Request* r : items) {
    const hw::SerialGemvHead h =
        hw::SerialGemvHeadCycles(options_.device.npu, r->context_tokens(), dims_.head_dim);
    a->serial_logit_ns += static_cast<double>(h.logit) * heads_ns;
    a->serial_context_ns += static_cast<double>(h.context) * heads_ns;
  }
}

absl::Status IterationModel::CostStage(const std::array<DecodeBatch, 2>& sb,
                                       absl::Span<const int64_t> prompts) {
  const SystemMode& mode = options_.mode;
  int64_t prompt_tokens = 0;
  for (int64_t p : prompts) prompt_tokens += p;
  // Costed ops of each sub-batch (the local prefill tokens join sub-batch 0's linear ops),
  // identical in every layer.
  for (int s = 0; s < 2; ++s) {
    stage_layer_[s] = nullptr;
    const int64_t tokens = static_cast<int64_t>(sb[s].size()) + (s == 0 ? prompt_tokens : 0);
    if (tokens > 0) {
      ASSIGN_OR_RETURN(stage_layer_[s], Layer(tokens));
    }
    const SubBatchAttention& a = attention_[s];
    if (a.requests == 0) continue;
    const int64_t mean_seq = static_cast<int64_t>(
        std::ceil(static_cast<double>(a.total_seq) / static_cast<double>(a.requests)));
    ASSIGN_OR_RETURN(softmax_[s],
                     CostVector("softmax", NodeKind::kSoftmax, models::VectorKind::kSoftmax,
                                a.requests * dims_.num_heads, mean_seq, 1));
    if (!mode.pim_attention) {
      // npu-only: the keys and values stream through the systolic arrays (GEMV-shaped).
      const int64_t heads = dims_.num_heads, hd = dims_.head_dim;
      ASSIGN_OR_RETURN(npu_attention_[s][0], CostGemm("attn_logit", NodeKind::kNpuAttention, 1, hd,
                                                      a.total_seq * heads, true, 1));
      ASSIGN_OR_RETURN(npu_attention_[s][1], CostGemm("attn_context", NodeKind::kNpuAttention, 1,
                                                      mean_seq, hd * heads * a.requests, true, 1));
      if (options_.device.npu.attention_mapping == hw::AttentionMapping::kSerialGemv) {
        npu_attention_[s][0].dur_ns = a.serial_logit_ns;
        npu_attention_[s][1].dur_ns = a.serial_context_ns;
      }
      // Never slowed by a PIM (there is none): full bandwidth.
      for (CostedOp& op : npu_attention_[s]) op.dur_shared_ns = op.dur_ns;
    }
  }
  return CostPrefillAttention(prompts);
}

// Each prompt's attention ops depend on its length alone (models::PrefillAttentionOps, which
// models::LowerPrefillLayer places prompt by prompt); their costs are kept per length, so a
// prompt already seen is neither lowered nor costed again.
absl::Status IterationModel::CostPrefillAttention(absl::Span<const int64_t> prompts) {
  prefill_costed_.clear();
  bool validated = false;
  for (const int64_t p : prompts) {
    auto it = prompt_attention_.find(p);
    if (it == prompt_attention_.end()) {
      // The whole list is checked once, before the first prompt not costed yet is lowered.
      if (!validated) RETURN_IF_ERROR(models::ValidatePrefillPrompts(prompts));
      validated = true;
      ASSIGN_OR_RETURN(std::vector<CostedOp> costed, CostPromptAttention(p));
      it = prompt_attention_.emplace(p, std::move(costed)).first;
    }
    prefill_costed_.insert(prefill_costed_.end(), it->second.begin(), it->second.end());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CostedOp>> IterationModel::CostPromptAttention(int64_t prompt) {
  const std::vector<models::Op> ops = models::PrefillAttentionOps(
      models::DeviceAttentionDims(options_.model, options_.parallelism), prompt);
  std::vector<CostedOp> costed;
  costed.reserve(ops.size());
  for (const models::Op& op : ops) {
    ASSIGN_OR_RETURN(costed.emplace_back(), Cost(op, NodeKind::kPrefillAttention));
    costed.back().name = op_names_.insert(op.name).first->c_str();  // outlives the op
  }
  return costed;
}

IterationModel::ScheduleKey IterationModel::StageScheduleKey(bool serialized, int sim_layers,
                                                             bool last_stage) const {
  ScheduleKey k;
  for (int s = 0; s < 2; ++s) {
    k.layer[s] = stage_layer_[s];
    const SubBatchAttention& a = attention_[s];
    if (a.requests == 0) continue;
    k.attention[s] = true;
    k.logit_ns[s] = a.logit_ns;
    k.attend_ns[s] = a.attend_ns;
    k.softmax_ns[s] = softmax_[s].dur_ns;
    if (!options_.mode.pim_attention) {
      k.npu_attention_ns[s] = {npu_attention_[s][0].dur_ns, npu_attention_[s][1].dur_ns};
    }
  }
  k.serialized = serialized;
  k.sim_layers = sim_layers;
  k.last_stage = last_stage;
  return k;
}

IterationModel::TopologyKey IterationModel::StageTopologyKey(bool serialized, int sim_layers,
                                                             bool last_stage) const {
  TopologyKey k;
  for (int s = 0; s < 2; ++s) {
    if (stage_layer_[s] != nullptr) {
      k.pre_ops[s] = static_cast<int>(stage_layer_[s]->pre_attention.size());
      k.post_ops[s] = static_cast<int>(stage_layer_[s]->post_attention.size());
    }
    k.attention[s] = attention_[s].requests > 0;
  }
  k.prefill_ops = static_cast<int>(prefill_costed_.size());
  k.serialized = serialized;
  k.sim_layers = sim_layers;
  k.last_stage = last_stage;
  return k;
}

HwCost IterationModel::AccountStage(int layers, bool last_stage) const {
  // One layer of every sub-batch: the nodes WalkGraph adds per layer.
  HwCost layer;
  for (int s = 0; s < 2; ++s) {
    if (stage_layer_[s] == nullptr) continue;
    layer.AddScaledFields(stage_layer_[s]->ops_cost, 1);
    const SubBatchAttention& a = attention_[s];
    if (a.requests > 0) {
      layer.AddScaledFields(softmax_[s].cost, 1);
      if (options_.mode.pim_attention) {
        layer.AddScaledFields(a.cost, 1);
      } else {
        for (const CostedOp& op : npu_attention_[s]) layer.AddScaledFields(op.cost, 1);
      }
    }
    if (s == 0) {
      for (const CostedOp& op : prefill_costed_) layer.AddScaledFields(op.cost, 1);
    }
  }
  HwCost total;
  total.AddScaledFields(layer, static_cast<double>(layers));
  for (int s = 0; last_stage && s < 2; ++s) {
    if (stage_layer_[s] != nullptr) total.AddScaledFields(stage_layer_[s]->lm_head.cost, 1);
  }
  return total;
}

IterationModel::ListScheduleCalls IterationModel::list_schedule_calls() const {
  ListScheduleCalls calls;
  for (const GraphSlot& slot : graphs_) {
    const ListScheduler& s = slot.graph.scheduler();
    calls.lean += s.lean_replays();
    calls.checked += s.checked_replays();
    calls.event_loop += s.event_loop_runs();
  }
  return calls;
}

IterationModel::GraphSlot& IterationModel::GraphFor(const TopologyKey& topology, bool* found) {
  ++graph_uses_;
  for (GraphSlot& slot : graphs_) {
    if (slot.topology == topology) {
      slot.last_used = graph_uses_;
      *found = true;
      return slot;
    }
  }
  GraphSlot& lru = *std::min_element(
      graphs_.begin(), graphs_.end(),
      [](const GraphSlot& a, const GraphSlot& b) { return a.last_used < b.last_used; });
  lru.last_used = graph_uses_;
  *found = false;
  return lru;
}

template <typename G>
void IterationModel::WalkGraph(G& g, bool serialized, int sim_layers, bool last_stage) const {
  const SystemMode& mode = options_.mode;
  const std::array<const CostedLayer*, 2>& layer = stage_layer_;
  g.Clear(/*interleaved=*/!serialized && mode.sub_batch_interleaving);
  for (int l = 0; l < sim_layers; ++l) {
    for (int s = 0; s < 2; ++s) {
      if (layer[s] == nullptr) continue;
      g.AddChain(layer[s]->pre_attention, s, l, Phase::kPreAttention);
      g.BeginAttention(s);
      const SubBatchAttention& a = attention_[s];
      if (a.requests > 0 && mode.pim_attention) {
        g.AddPimAttention(a, softmax_[s], mode.softmax_overlap(), s, l);
      } else if (a.requests > 0) {
        g.AddNpuAttention(npu_attention_[s][0], softmax_[s], npu_attention_[s][1], s, l);
      }
      if (s == 0 && !prefill_costed_.empty()) g.AddPrefillAttention(prefill_costed_, s, l);
      g.EndAttention(s, l);
      g.AddChain(layer[s]->post_attention, s, l, Phase::kPostAttention);
      if (s == 0 && serialized) g.SerializeAfter(0, 1);
    }
  }
  // The LM head of each sub-batch on the last pipeline stage.
  for (int s = 0; last_stage && s < 2; ++s) {
    if (layer[s] != nullptr) {
      g.AddChain({&layer[s]->lm_head, 1}, s, sim_layers, Phase::kLmHead);
    }
  }
}

absl::StatusOr<IterationCost> IterationModel::RunStage(const std::array<DecodeBatch, 2>& sb,
                                                       absl::Span<const int64_t> prompts,
                                                       int micro_batch, bool full_timeline,
                                                       int layers) {
  const int L = layers > 0 ? layers : layers_per_device_;
  // A single-layer study leaves the LM head out; every stage of the symmetric pipeline is
  // costed alike.
  const bool last_stage = layers == 0;
  // Five layers: the interior ones run in the steady state (the first fills the sub-batch
  // pipeline, the last drains it).
  const int sim_layers = full_timeline ? L : std::min(L, 5);
  IterationCost cost;
  for (int s = 0; s < 2; ++s) RETURN_IF_ERROR(AccumulateAttention(sb[s], &attention_[s], &cost));
  for (int64_t& c : cost.pim_commands) c *= L;
  cost.channel_imbalance = ChannelImbalance(attention_, options_.device.hbm.org.channels);

  RETURN_IF_ERROR(CostStage(sb, prompts));
  const bool serialized = !options_.mode.sub_batch_interleaving && !sb[1].empty();
  // The schedule is a function of the graph's shape and its nodes' durations, which the key
  // holds: when it repeats (a decode batch whose busiest channel and softmax width did not
  // cross a step), the graph of the previous stage is scheduled already and only its costs are
  // summed again. Prefills and timelines always build and schedule their own graph.
  const ScheduleKey key = StageScheduleKey(serialized, sim_layers, last_stage);
  const bool replayable = prompts.empty() && !full_timeline;
  if (!(replayable && schedule_.valid && key == schedule_.key)) {
    // The durations changed; when the topology did not, overwrite them (and the costs) in the
    // graph already built instead of building it again.
    const TopologyKey topology = StageTopologyKey(serialized, sim_layers, last_stage);
    bool found = false;
    GraphSlot& slot = GraphFor(topology, &found);
    graph_ = &slot.graph;
    if (found) {
      // Cached layers are never changed or freed (layer_cache_ holds them in nodes), so the
      // same pointer means the same chain ops as the last walk wrote.
      const std::array<bool, 2> kept = {stage_layer_[0] == slot.chain_layers[0],
                                        stage_layer_[1] == slot.chain_layers[1]};
      StageGraph::Patcher patch(graph_, kept);
      WalkGraph(patch, serialized, sim_layers, last_stage);
      NEUPIMS_CHECK_MSG(patch.done(), "a patch walk of the same topology covers every node");
      ++graph_patched_;
      for (int s = 0; s < 2; ++s) chains_kept_ += kept[s] && stage_layer_[s] != nullptr ? 1 : 0;
    } else {
      WalkGraph(*graph_, serialized, sim_layers, last_stage);
      slot.topology = topology;
    }
    slot.chain_layers = stage_layer_;
    const bool blocked = options_.mode.pim_attention && !options_.mode.dual_row_buffers;
    schedule_.makespan_ns = graph_->Schedule(blocked, options_.device.stage_barriers);
    // Measured whenever the interior layers exist, not only when this stage extrapolates: the
    // key holds sim_layers but not L, so a replay for a longer stack may use it.
    schedule_.period_ns = sim_layers >= 4 ? (graph_->LayerEnd(3) - graph_->LayerEnd(1)) / 2 : 0.0;
    schedule_.key = key;
    schedule_.valid = replayable;
    ++schedule_.built;
  }
  cost.duration_ns = schedule_.makespan_ns;
  // Extrapolate the identical layers: the steady-state period over the interior layers 1 -> 3;
  // the work is L layers' whatever was scheduled.
  if (sim_layers < L) cost.duration_ns += schedule_.period_ns * (L - sim_layers);
  cost += AccountStage(L, last_stage);
  cost.layer_period_ns = schedule_.period_ns;
  if (full_timeline) {
    graph_->AppendTimeline(micro_batch, &cost.timeline);
    graph_->AppendPhaseSpans(micro_batch, &cost.phases);
    if (options_.device.stage_barriers) graph_->AppendStageSpans(micro_batch, &cost.stages);
  }
  return cost;
}

absl::StatusOr<IterationCost> IterationModel::Run(const IterationInput& input) {
  if (!IsPrefillOnly(input)) return RunUncached(input);
  ASSIGN_OR_RETURN(const IterationCost* cost, RunPrefill(input));
  return *cost;
}

bool IterationModel::IsPrefillOnly(const IterationInput& input) {
  return input.sub_batches[0].empty() && input.sub_batches[1].empty() && input.decode[0].empty() &&
         input.decode[1].empty() && !input.prefill_prompts.empty() && !input.record_timeline;
}

absl::StatusOr<std::array<DecodeBatch, 2>> IterationModel::ItemsAsRequests(
    const IterationInput& input) {
  if (!input.decode[0].empty() || !input.decode[1].empty()) {
    return absl::InvalidArgumentError(
        "an iteration's decoding requests are either read in place or given by value, not both");
  }
  // Sized before any pointer into it is taken.
  items_as_requests_.resize(input.sub_batches[0].size() + input.sub_batches[1].size());
  size_t next = 0;
  for (int s = 0; s < 2; ++s) {
    item_batches_[s].clear();
    for (const DecodeItem& d : input.sub_batches[s]) {
      scheduler::Request& r = items_as_requests_[next++];
      r.prompt_tokens = d.seq_len;
      r.generated = 0;
      r.channel = d.channel;
      item_batches_[s].push_back(&r);
    }
  }
  return std::array<DecodeBatch, 2>{item_batches_[0], item_batches_[1]};
}

absl::StatusOr<const IterationCost*> IterationModel::RunPrefill(const IterationInput& input) {
  if (!IsPrefillOnly(input)) {
    return absl::InvalidArgumentError(
        "RunPrefill takes prompts only: no decode items and no timeline");
  }
  prefill_key_.prompts.assign(input.prefill_prompts.begin(), input.prefill_prompts.end());
  prefill_key_.layers = input.layers;
  // Bounded: cleared when full (entries are recomputed alike; only the time differs).
  constexpr size_t kMaxPrefillMemo = 1 << 16;
  if (prefill_memo_.size() >= kMaxPrefillMemo) prefill_memo_.clear();
  // One hash and one probe for both the hit and the miss; a miss's entry is filled in place.
  const auto [it, inserted] = prefill_memo_.try_emplace(prefill_key_);
  if (!inserted) return &it->second;
  absl::StatusOr<IterationCost> cost = RunUncached(input);
  if (!cost.ok()) {
    prefill_memo_.erase(it);  // RunUncached does not touch the memo: `it` is still valid
    return cost.status();
  }
  it->second = *std::move(cost);
  return &it->second;
}

absl::StatusOr<IterationCost> IterationModel::RunUncached(const IterationInput& input) {
  const models::Parallelism& par = options_.parallelism;
  const int pp = par.pp;
  // Pipeline parallelism: the batch is split into pp micro-batches (round-robin within each
  // sub-batch); each device runs its stage for every micro-batch, so one iteration costs the
  // sum of the stage times plus the pipeline's activation hand-offs (NeuPIMs sec. 7.1).
  // Micro-batches split every channel's requests evenly (Algorithm 3 generalised to pp parts,
  // rotating which part gets the remainder), so each micro-batch keeps every PIM channel busy.
  std::array<DecodeBatch, 2> decode = input.decode;  // the engine's path: read in place
  if (!input.sub_batches[0].empty() || !input.sub_batches[1].empty()) {
    ASSIGN_OR_RETURN(decode, ItemsAsRequests(input));
  }
  absl::InlinedVector<std::array<DecodeBatch, 2>, 4> micro(pp);
  if (pp == 1) {
    micro[0] = decode;
  } else {
    SplitMicroBatches(decode, pp, options_.device.hbm.org.channels, &micro_channels_, &micro_);
    for (int mb = 0; mb < pp; ++mb) micro[mb] = {micro_[mb][0], micro_[mb][1]};
  }
  IterationCost total;
  int64_t max_tokens = 0;
  for (int mb = 0; mb < pp; ++mb) {
    const absl::Span<const int64_t> prompts =
        mb == 0 ? absl::MakeConstSpan(input.prefill_prompts) : absl::Span<const int64_t>();
    if (micro[mb][0].empty() && micro[mb][1].empty() && prompts.empty()) continue;
    ASSIGN_OR_RETURN(IterationCost c,
                     RunStage(micro[mb], prompts, mb, input.record_timeline, input.layers));
    AppendShifted(std::move(c.timeline), total.duration_ns, &total.timeline);
    AppendShifted(std::move(c.phases), total.duration_ns, &total.phases);
    AppendShifted(std::move(c.stages), total.duration_ns, &total.stages);
    total.layer_period_ns = std::max(total.layer_period_ns, c.layer_period_ns);
    total.duration_ns += c.duration_ns;
    total += c;
    total.channel_imbalance = std::max(total.channel_imbalance, c.channel_imbalance);
    max_tokens =
        std::max(max_tokens, static_cast<int64_t>(micro[mb][0].size() + micro[mb][1].size()));
  }
  if (pp > 1 && total.duration_ns > 0) {
    const double bytes =
        static_cast<double>(max_tokens) * options_.model.hidden * options_.model.element_bytes;
    total.duration_ns += (pp - 1) * options_.interconnect.TransferNs(bytes);
  }
  for (int s = 0; s < 2; ++s) {
    total.sub_batch_sizes[s] = static_cast<int64_t>(decode[s].size());
  }
  // Group energy: the per-device dynamic energy of every device, static NPU power and DRAM
  // background of every device for the whole iteration.
  const int devices = par.devices();
  const double seconds = total.duration_ns * 1e-9;
  total.ScaleEnergy(devices);
  total.npu_static_j = options_.device.npu.energy.static_power_w * seconds * devices;
  // Idle standby of every die for the whole iteration, on top of the PIM rows' excess.
  total.dram_background_j += dram_background_w_ * seconds * devices;
  return total;
}

}  // namespace neupims::engine
