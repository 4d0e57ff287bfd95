#include "engine/iteration_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "hw/dram/energy.h"
#include "hw/registry.h"

namespace neupims::engine {
namespace {

constexpr double kPjToJ = 1e-12;

// One schedulable operation of the iteration DAG.
struct Node {
  const char* name = "";
  Lane lane = Lane::kSystolic;
  int sub_batch = 0;
  int layer = 0;
  int priority = 0;
  double dur_ns = 0;         // duration (systolic GEMMs: at full bandwidth)
  double dur_shared_ns = 0;  // systolic GEMMs that start while the PIM computes (dual RB)
  double busy_ns = 0;        // unit busy time it accounts (systolic: MACs / peak)
  absl::InlinedVector<int, 4> deps;
  // Scheduling state.
  int waiting = 0;
  double ready = 0;
  double start = -1, end = -1;
  // Accounting.
  double macs = 0, hbm_bytes = 0, energy_j = 0, dram_j = 0;
  const std::vector<double>* channel_ns = nullptr;  // PIM ops: per-channel busy time
  double pim_mac_ns = 0, pim_macs = 0, pim_j = 0;
};

// Greedy list scheduling on the four lanes. At each decision time every free lane starts its
// highest-priority ready node; PIM goes first so a GEMM starting at the same time sees it busy.
// With `blocked`, systolic and PIM nodes exclude each other (single row buffer).
double ListSchedule(std::vector<Node>& nodes, bool blocked) {
  std::vector<std::vector<int>> users(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].waiting = static_cast<int>(nodes[i].deps.size());
    nodes[i].ready = 0;
    nodes[i].start = nodes[i].end = -1;
    for (int d : nodes[i].deps) users[d].push_back(static_cast<int>(i));
  }
  double lane_free[4] = {0, 0, 0, 0};
  std::vector<int> ready;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].waiting == 0) ready.push_back(static_cast<int>(i));
  }
  size_t done = 0;
  double t = 0, makespan = 0;
  const int order[4] = {static_cast<int>(Lane::kPim), static_cast<int>(Lane::kSystolic),
                        static_cast<int>(Lane::kVector), static_cast<int>(Lane::kInterconnect)};
  // Completion events are processed lazily: a node's users become ready when t reaches its end.
  std::vector<std::pair<double, int>> running;
  while (done < nodes.size()) {
    // Retire finished nodes.
    for (size_t k = 0; k < running.size();) {
      if (running[k].first <= t) {
        const int i = running[k].second;
        for (int u : users[i]) {
          Node& n = nodes[u];
          n.ready = std::max(n.ready, nodes[i].end);
          if (--n.waiting == 0) ready.push_back(u);
        }
        ++done;
        running[k] = running.back();
        running.pop_back();
      } else {
        ++k;
      }
    }
    bool started = false;
    for (int lane : order) {
      if (lane_free[lane] > t) continue;
      if (blocked && lane == static_cast<int>(Lane::kSystolic) &&
          lane_free[static_cast<int>(Lane::kPim)] > t) {
        continue;
      }
      if (blocked && lane == static_cast<int>(Lane::kPim) &&
          lane_free[static_cast<int>(Lane::kSystolic)] > t) {
        continue;
      }
      int best = -1;
      for (int i : ready) {
        const Node& n = nodes[i];
        if (static_cast<int>(n.lane) != lane || n.ready > t) continue;
        if (best < 0 || n.priority < nodes[best].priority) best = i;
      }
      if (best < 0) continue;
      Node& n = nodes[best];
      // A GEMM that starts while the PIM computes progresses at the reduced bandwidth share
      // until the PIM frees the channels, then at full speed.
      const double pim_free = lane_free[static_cast<int>(Lane::kPim)];
      double dur = n.dur_ns;
      if (lane == static_cast<int>(Lane::kSystolic) && pim_free > t && !blocked &&
          n.dur_shared_ns > n.dur_ns) {
        const double rate = n.dur_ns / n.dur_shared_ns;  // fraction of full speed
        const double overlap = pim_free - t;
        dur = overlap * rate >= n.dur_ns ? n.dur_shared_ns : overlap + (n.dur_ns - overlap * rate);
      }
      n.start = t;
      n.end = t + dur;
      lane_free[lane] = n.end;
      makespan = std::max(makespan, n.end);
      running.emplace_back(n.end, best);
      ready.erase(std::find(ready.begin(), ready.end(), best));
      started = true;
    }
    if (started) continue;
    // Advance to the next event: a completion, a lane freeing up, or a node becoming ready.
    double next = std::numeric_limits<double>::infinity();
    for (const auto& [end, i] : running) next = std::min(next, end);
    for (double f : lane_free) {
      if (f > t) next = std::min(next, f);
    }
    for (int i : ready) {
      if (nodes[i].ready > t) next = std::min(next, nodes[i].ready);
    }
    if (!std::isfinite(next)) break;  // nothing can progress (cannot happen for a DAG)
    t = next;
  }
  return makespan;
}

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

}  // namespace

const char* ToString(Lane lane) {
  switch (lane) {
    case Lane::kSystolic:
      return "NPU systolic arrays";
    case Lane::kVector:
      return "NPU vector units";
    case Lane::kPim:
      return "PIM";
    case Lane::kInterconnect:
      return "interconnect";
  }
  return "?";
}

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
  m->attention_cached_.assign(options.model.max_seq_len + 2, false);
  return m;
}

absl::StatusOr<AttentionCost> IterationModel::Attention(int64_t seq_len) {
  if (pim_ == nullptr) return absl::FailedPreconditionError("no PIM in this mode");
  if (seq_len < 1) return absl::InvalidArgumentError("seq_len must be >= 1");
  const bool cacheable = seq_len < static_cast<int64_t>(attention_cached_.size());
  if (cacheable && attention_cached_[seq_len]) return attention_cache_[seq_len];
  hw::AttentionShape s = dims_;
  s.seq_len = seq_len;
  const hw::PimGeometry g = pim_->geometry();
  ASSIGN_OR_RETURN(hw::GemvProgram logit, hw::PlanLogit(s, g));
  ASSIGN_OR_RETURN(hw::GemvProgram attend, hw::PlanAttend(s, g));
  ASSIGN_OR_RETURN(hw::PimOpResult lr, pim_->Run(logit));
  ASSIGN_OR_RETURN(hw::PimOpResult ar, pim_->Run(attend));
  AttentionCost c;
  c.logit_ns = static_cast<double>(lr.cycles) * hbm_ns_per_cycle_;
  c.attend_ns = static_cast<double>(ar.cycles) * hbm_ns_per_cycle_;
  c.mac_ns = static_cast<double>(lr.column_steps + ar.column_steps) *
             options_.device.hbm.timing.tCCD_L * hbm_ns_per_cycle_;
  c.macs = static_cast<double>(lr.macs + ar.macs);
  c.dynamic_j = lr.energy.pim_j + lr.energy.refresh_j + ar.energy.pim_j + ar.energy.refresh_j;
  for (int t = 0; t < hw::kNumCommandTypes; ++t) c.commands[t] = lr.commands[t] + ar.commands[t];
  if (cacheable) {
    attention_cache_[seq_len] = c;
    attention_cached_[seq_len] = true;
  }
  return c;
}

absl::StatusOr<const models::LayerOps*> IterationModel::Lowered(int64_t tokens) {
  auto it = lowering_cache_.find(tokens);
  if (it != lowering_cache_.end()) return &it->second;
  ASSIGN_OR_RETURN(models::LayerOps ops,
                   models::LowerDecodeLayer(options_.model, options_.parallelism, tokens));
  return &lowering_cache_.emplace(tokens, std::move(ops)).first->second;
}

absl::StatusOr<IterationModel::GemmCost> IterationModel::Gemm(int64_t m, int64_t k, int64_t n,
                                                              bool weights_from_hbm,
                                                              double bandwidth_fraction) {
  uint64_t bw_bits;
  std::memcpy(&bw_bits, &bandwidth_fraction, sizeof(bw_bits));
  const uint64_t key = (static_cast<uint64_t>(m) * 0x9E3779B97F4A7C15ull) ^
                       (static_cast<uint64_t>(k) * 0xC2B2AE3D27D4EB4Full) ^
                       (static_cast<uint64_t>(n) * 0x165667B19E3779F9ull) ^ (bw_bits >> 3) ^
                       (weights_from_hbm ? 1 : 0);
  auto it = gemm_cache_.find(key);
  if (it != gemm_cache_.end()) return it->second;
  ASSIGN_OR_RETURN(hw::NpuOpResult r,
                   npu_->Gemm({m, k, n, weights_from_hbm, false}, {bandwidth_fraction}));
  GemmCost c;
  c.ns = static_cast<double>(r.cycles) * npu_ns_per_cycle_;
  c.busy_ns = static_cast<double>(r.macs) /
              static_cast<double>(options_.device.npu.peak_macs_per_cycle()) * npu_ns_per_cycle_;
  c.macs = static_cast<double>(r.macs);
  c.hbm_bytes = static_cast<double>(r.hbm_bytes);
  // NPU dynamic energy plus the DRAM reads behind the weight stream (sequential: one ACT per
  // page of every bank).
  const hw::HbmOrganization& o = options_.device.hbm.org;
  c.energy_j = r.energy_j;
  c.dram_j =
      (c.hbm_bytes / o.burst_bytes * dram_rd_pj_ + c.hbm_bytes / o.page_bytes * dram_act_pj_) *
      kPjToJ;
  gemm_cache_.emplace(key, c);
  return c;
}

absl::StatusOr<IterationModel::GemmCost> IterationModel::Vector(models::VectorKind kind,
                                                                int64_t rows, int64_t cols) {
  const uint64_t key = (static_cast<uint64_t>(rows) * 0x9E3779B97F4A7C15ull) ^
                       (static_cast<uint64_t>(cols) * 0xC2B2AE3D27D4EB4Full) ^
                       (0xABCDull << (8 + static_cast<int>(kind))) ^ 0x5555;
  auto it = gemm_cache_.find(key);
  if (it != gemm_cache_.end()) return it->second;
  ASSIGN_OR_RETURN(hw::NpuOpResult r, npu_->Vector({ToHw(kind), rows, cols}));
  GemmCost c;
  c.ns = static_cast<double>(r.cycles) * npu_ns_per_cycle_;
  c.busy_ns = c.ns;
  c.energy_j = r.energy_j;
  gemm_cache_.emplace(key, c);
  return c;
}

absl::StatusOr<IterationCost> IterationModel::RunStage(
    const std::array<std::vector<DecodeItem>, 2>& sb, const std::vector<int64_t>& prompts,
    int micro_batch, bool full_timeline, int layers) {
  const models::ModelConfig& model = options_.model;
  const models::Parallelism& par = options_.parallelism;
  const SystemMode& mode = options_.mode;
  const int L = layers > 0 ? layers : layers_per_device_;
  const bool last_stage = layers == 0;  // a single-layer study leaves the LM head out  // every
                                        // stage of the symmetric pipeline is costed alike
  // Five layers: the interior ones run in the steady state (the first fills the sub-batch
  // pipeline, the last drains it).
  const int sim_layers = full_timeline ? L : std::min(L, 5);
  const int channels = options_.device.hbm.org.channels;
  const double share = mode.dual_row_buffers ? bandwidth_share_during_pim_ : 1.0;
  int64_t prompt_tokens = 0;
  for (int64_t p : prompts) prompt_tokens += p;

  IterationCost cost;
  std::vector<Node> nodes;
  nodes.reserve(static_cast<size_t>(sim_layers) * 40 + 8);
  std::array<int, 2> last{-1, -1};  // last node of each sub-batch's chain
  std::vector<int> layer_end_nodes;
  std::vector<std::vector<double>> channel_load(2, std::vector<double>(channels, 0.0));

  // Per sub-batch attention work (identical in every layer).
  struct SbAttention {
    std::vector<double> logit_ch, attend_ch, mha_ch;  // per channel, ns
    double logit = 0, attend = 0, mac_ns = 0, macs = 0, pim_j = 0;
    int64_t requests = 0;
    double mean_seq = 0;
    int64_t total_seq = 0;
  };
  std::array<SbAttention, 2> att;
  for (int s = 0; s < 2; ++s) {
    SbAttention& a = att[s];
    a.requests = static_cast<int64_t>(sb[s].size());
    a.logit_ch.assign(channels, 0.0);
    a.attend_ch.assign(channels, 0.0);
    for (const DecodeItem& d : sb[s]) a.total_seq += d.seq_len;
    a.mean_seq = a.requests > 0 ? static_cast<double>(a.total_seq) / a.requests : 0;
    if (!mode.pim_attention) continue;
    for (const DecodeItem& d : sb[s]) {
      ASSIGN_OR_RETURN(AttentionCost c, Attention(d.seq_len));
      const int ch = std::clamp(d.channel, 0, channels - 1);
      a.logit_ch[ch] += c.logit_ns;
      a.attend_ch[ch] += c.attend_ns;
      a.mac_ns += c.mac_ns;
      a.macs += c.macs;
      a.pim_j += c.dynamic_j;
      for (int t = 0; t < hw::kNumCommandTypes; ++t) cost.pim_commands[t] += c.commands[t] * L;
    }
    a.mha_ch.resize(channels);
    for (int ch = 0; ch < channels; ++ch) {
      a.logit = std::max(a.logit, a.logit_ch[ch]);
      a.attend = std::max(a.attend, a.attend_ch[ch]);
      a.mha_ch[ch] = a.logit_ch[ch] + a.attend_ch[ch];
      channel_load[s][ch] = a.mha_ch[ch];
    }
  }
  {
    // Channel imbalance over the whole batch: busiest channel over the mean.
    double max_load = 0, sum = 0;
    for (int ch = 0; ch < channels; ++ch) {
      const double l = channel_load[0][ch] + channel_load[1][ch];
      max_load = std::max(max_load, l);
      sum += l;
    }
    cost.channel_imbalance = sum > 0 ? max_load / (sum / channels) : 1.0;
  }

  int priority = 0;
  auto add = [&](const char* name, Lane lane, int s, int layer, double ns, double shared_ns,
                 absl::InlinedVector<int, 4> deps) -> int {
    Node n;
    n.name = name;
    n.lane = lane;
    n.sub_batch = s;
    n.layer = layer;
    n.priority = priority++;
    n.dur_ns = ns;
    n.dur_shared_ns = shared_ns;
    n.deps = std::move(deps);
    nodes.push_back(std::move(n));
    return static_cast<int>(nodes.size()) - 1;
  };
  auto chain = [&](int s) {
    return last[s] >= 0 ? absl::InlinedVector<int, 4>{last[s]} : absl::InlinedVector<int, 4>{};
  };

  // Adds the ops of `ops` for sub-batch s to its chain.
  auto add_ops = [&](const std::vector<models::Op>& ops, int s, int layer) -> absl::Status {
    for (const models::Op& op : ops) {
      int id = -1;
      switch (op.kind) {
        case models::OpKind::kGemm: {
          ASSIGN_OR_RETURN(GemmCost full, Gemm(op.m, op.k, op.n, op.weights_from_hbm, 1.0));
          ASSIGN_OR_RETURN(GemmCost shared, Gemm(op.m, op.k, op.n, op.weights_from_hbm, share));
          id = add(op.name.c_str(), Lane::kSystolic, s, layer, full.ns * op.count,
                   shared.ns * op.count, chain(s));
          Node& n = nodes[id];
          n.busy_ns = full.busy_ns * op.count;
          n.macs = full.macs * op.count;
          n.hbm_bytes = full.hbm_bytes * op.count;
          n.energy_j = full.energy_j * op.count;
          n.dram_j = full.dram_j * op.count;
          break;
        }
        case models::OpKind::kVector: {
          ASSIGN_OR_RETURN(GemmCost v, Vector(op.vector, op.rows, op.cols));
          id = add(op.name.c_str(), Lane::kVector, s, layer, v.ns * op.count, v.ns * op.count,
                   chain(s));
          nodes[id].busy_ns = v.busy_ns * op.count;
          nodes[id].energy_j = v.energy_j * op.count;
          break;
        }
        case models::OpKind::kAllReduce: {
          const double ns =
              AllReduceNs(options_.interconnect, par.tp, static_cast<double>(op.bytes));
          id = add(op.name.c_str(), Lane::kInterconnect, s, layer, ns, ns, chain(s));
          nodes[id].busy_ns = ns;
          break;
        }
        case models::OpKind::kAttention:
          continue;
      }
      last[s] = id;
    }
    return absl::OkStatus();
  };

  // Lowered layers (identical every layer): decode ops of each sub-batch, with the local
  // prefill tokens joining sub-batch 0's linear ops.
  std::array<const models::LayerOps*, 2> lowered{nullptr, nullptr};
  std::vector<models::Op> prefill_attention;
  for (int s = 0; s < 2; ++s) {
    const int64_t tokens = static_cast<int64_t>(sb[s].size()) + (s == 0 ? prompt_tokens : 0);
    if (tokens == 0) continue;
    ASSIGN_OR_RETURN(lowered[s], Lowered(tokens));
  }
  if (!prompts.empty()) {
    ASSIGN_OR_RETURN(models::LayerOps p, models::LowerPrefillLayer(model, par, prompts));
    for (const models::Op& op : p.pre_attention) {
      if (absl::StartsWith(op.name, "attn_")) prefill_attention.push_back(op);
    }
  }
  const bool serial_sbs = !mode.sub_batch_interleaving;
  for (int layer = 0; layer < sim_layers; ++layer) {
    for (int s = 0; s < 2; ++s) {
      const int64_t tokens = static_cast<int64_t>(sb[s].size()) + (s == 0 ? prompt_tokens : 0);
      if (tokens == 0) continue;
      RETURN_IF_ERROR(add_ops(lowered[s]->pre_attention, s, layer));
      const int qkv = last[s];
      absl::InlinedVector<int, 4> attention_ends;
      const SbAttention& a = att[s];
      if (a.requests > 0 && mode.pim_attention) {
        if (mode.softmax_overlap()) {
          // Sec. 6.1: the vector units run each head's softmax while the PIM computes the
          // other heads; the stage ends when both are done.
          const int mha =
              add("mha", Lane::kPim, s, layer, a.logit + a.attend, a.logit + a.attend, {qkv});
          nodes[mha].channel_ns = &a.mha_ch;
          ASSIGN_OR_RETURN(GemmCost sm,
                           Vector(models::VectorKind::kSoftmax, a.requests * dims_.num_heads,
                                  static_cast<int64_t>(std::ceil(a.mean_seq))));
          const int smx = add("softmax", Lane::kVector, s, layer, sm.ns, sm.ns, {qkv});
          nodes[smx].busy_ns = sm.busy_ns;
          nodes[smx].energy_j = sm.energy_j;
          nodes[mha].pim_mac_ns = a.mac_ns;
          nodes[mha].pim_macs = a.macs;
          nodes[mha].pim_j = a.pim_j;
          attention_ends = {mha, smx};
        } else {
          // Blocked PIM: logits of every head, then softmax on the NPU, then attend.
          const int lg = add("logit", Lane::kPim, s, layer, a.logit, a.logit, {qkv});
          nodes[lg].channel_ns = &a.logit_ch;
          ASSIGN_OR_RETURN(GemmCost sm,
                           Vector(models::VectorKind::kSoftmax, a.requests * dims_.num_heads,
                                  static_cast<int64_t>(std::ceil(a.mean_seq))));
          const int smx = add("softmax", Lane::kVector, s, layer, sm.ns, sm.ns, {lg});
          nodes[smx].busy_ns = sm.busy_ns;
          nodes[smx].energy_j = sm.energy_j;
          const int at = add("attend", Lane::kPim, s, layer, a.attend, a.attend, {smx});
          nodes[at].channel_ns = &a.attend_ch;
          nodes[at].pim_mac_ns = a.mac_ns;
          nodes[at].pim_macs = a.macs;
          nodes[at].pim_j = a.pim_j;
          attention_ends = {at};
        }
      } else if (a.requests > 0) {
        // npu-only: the keys and values stream through the systolic arrays (GEMV-shaped).
        const int heads = dims_.num_heads, hd = dims_.head_dim;
        ASSIGN_OR_RETURN(GemmCost lg, Gemm(1, hd, a.total_seq * heads, true, 1.0));
        const int l = add("attn_logit", Lane::kSystolic, s, layer, lg.ns, lg.ns, {qkv});
        nodes[l].busy_ns = lg.busy_ns;
        nodes[l].macs = lg.macs;
        nodes[l].hbm_bytes = lg.hbm_bytes;
        nodes[l].energy_j = lg.energy_j;
        nodes[l].dram_j = lg.dram_j;
        ASSIGN_OR_RETURN(GemmCost sm, Vector(models::VectorKind::kSoftmax, a.requests * heads,
                                             static_cast<int64_t>(std::ceil(a.mean_seq))));
        const int smx = add("softmax", Lane::kVector, s, layer, sm.ns, sm.ns, {l});
        nodes[smx].busy_ns = sm.busy_ns;
        nodes[smx].energy_j = sm.energy_j;
        ASSIGN_OR_RETURN(GemmCost at,
                         Gemm(1, static_cast<int64_t>(std::ceil(a.mean_seq)),
                              static_cast<int64_t>(hd) * heads * a.requests, true, 1.0));
        const int c = add("attn_context", Lane::kSystolic, s, layer, at.ns, at.ns, {smx});
        nodes[c].busy_ns = at.busy_ns;
        nodes[c].macs = at.macs;
        nodes[c].hbm_bytes = at.hbm_bytes;
        nodes[c].energy_j = at.energy_j;
        nodes[c].dram_j = at.dram_j;
        attention_ends = {c};
      }
      if (s == 0 && !prefill_attention.empty()) {
        // Prefill attention of the new prompts on the NPU, alongside the decode attention.
        const int saved = last[s];
        last[s] = qkv;
        RETURN_IF_ERROR(add_ops(prefill_attention, s, layer));
        attention_ends.push_back(last[s]);
        last[s] = saved;
      }
      if (!attention_ends.empty()) {
        // Join point: the post-attention ops wait for every attention branch.
        const int join = add("attention_done", Lane::kInterconnect, s, layer, 0, 0, attention_ends);
        last[s] = join;
      }
      RETURN_IF_ERROR(add_ops(lowered[s]->post_attention, s, layer));
      if (serial_sbs && s == 0 && !sb[1].empty()) last[1] = last[0];  // never overlap
    }
    layer_end_nodes.push_back(std::max(last[0], last[1]));
  }
  // LM head of each sub-batch on the last pipeline stage (the ops outlive the DAG: nodes keep
  // pointers to their names).
  std::vector<models::Op> heads[2];
  if (last_stage) {
    for (int s = 0; s < 2; ++s) {
      const int64_t tokens = static_cast<int64_t>(sb[s].size()) + (s == 0 ? prompt_tokens : 0);
      if (tokens == 0) continue;
      heads[s].push_back(models::LmHead(model, par, tokens));
      RETURN_IF_ERROR(add_ops(heads[s], s, sim_layers));
    }
  }
  const bool blocked = mode.pim_attention && !mode.dual_row_buffers;
  const double makespan = ListSchedule(nodes, blocked);

  // Extrapolate the identical layers: steady-state period between the last two simulated ones.
  double duration = makespan;
  double layer_scale_extra = 0;  // additional copies of the last simulated layer's work
  if (sim_layers < L) {
    // sim_layers == 5 here (L > 5): the period over the interior layers 1 -> 3.
    auto layer_end = [&](int layer) {
      double e = 0;
      for (const Node& n : nodes) {
        if (n.layer == layer) e = std::max(e, n.end);
      }
      return e;
    };
    const double period = (layer_end(3) - layer_end(1)) / 2;
    duration += period * (L - sim_layers);
    layer_scale_extra = L - sim_layers;
  }
  cost.duration_ns = duration;

  // Accounting: every simulated node once, plus the last simulated layer's nodes for each
  // extrapolated layer.
  for (const Node& n : nodes) {
    double copies = 1;
    if (layer_scale_extra > 0 && n.layer == 2) copies += layer_scale_extra;  // an interior layer
    switch (n.lane) {
      case Lane::kSystolic:
        cost.systolic_busy_ns += copies * n.busy_ns;
        break;
      case Lane::kVector:
        cost.vector_busy_ns += copies * n.busy_ns;
        break;
      case Lane::kInterconnect:
        cost.interconnect_busy_ns += copies * n.busy_ns;
        break;
      case Lane::kPim:
        if (n.channel_ns != nullptr) {
          for (double c : *n.channel_ns) cost.pim_channel_busy_ns += copies * c;
        }
        break;
    }
    cost.pim_mac_ns += copies * n.pim_mac_ns;
    cost.pim_macs += copies * n.pim_macs;
    cost.npu_macs += copies * n.macs;
    cost.npu_hbm_bytes += copies * n.hbm_bytes;
    cost.npu_dynamic_j += copies * n.energy_j;
    cost.dram_j += copies * n.dram_j;
    cost.pim_j += copies * n.pim_j;
  }
  if (full_timeline) {
    for (const Node& n : nodes) {
      if (n.end <= n.start || (n.lane == Lane::kInterconnect && n.busy_ns == 0)) continue;
      if (n.lane == Lane::kPim) {
        for (int ch = 0; n.channel_ns != nullptr && ch < static_cast<int>(n.channel_ns->size());
             ++ch) {
          const double busy = (*n.channel_ns)[ch];
          if (busy <= 0) continue;
          cost.timeline.push_back(
              {n.name, n.lane, ch, n.sub_batch, n.layer, micro_batch, n.start, n.start + busy});
        }
        continue;
      }
      cost.timeline.push_back(
          {n.name, n.lane, -1, n.sub_batch, n.layer, micro_batch, n.start, n.end});
    }
  }
  return cost;
}

absl::StatusOr<IterationCost> IterationModel::Run(const IterationInput& input) {
  const models::Parallelism& par = options_.parallelism;
  const int pp = par.pp;
  // Pipeline parallelism: the batch is split into pp micro-batches (round-robin within each
  // sub-batch); each device runs its stage for every micro-batch, so one iteration costs the
  // sum of the stage times plus the pipeline's activation hand-offs (NeuPIMs sec. 7.1).
  // Micro-batches split every channel's requests evenly (Algorithm 3 generalised to pp parts,
  // rotating which part gets the remainder), so each micro-batch keeps every PIM channel busy.
  std::vector<std::array<std::vector<DecodeItem>, 2>> micro(pp);
  for (int s = 0; s < 2; ++s) {
    if (pp == 1) {
      micro[0][s] = input.sub_batches[s];
      continue;
    }
    std::vector<std::vector<DecodeItem>> per_channel(options_.device.hbm.org.channels);
    for (const DecodeItem& d : input.sub_batches[s]) {
      per_channel[std::clamp(d.channel, 0, static_cast<int>(per_channel.size()) - 1)].push_back(d);
    }
    int turn = 0;
    for (const std::vector<DecodeItem>& reqs : per_channel) {
      for (const DecodeItem& d : reqs) {
        micro[turn][s].push_back(d);
        turn = (turn + 1) % pp;
      }
    }
  }
  IterationCost total;
  int64_t max_tokens = 0;
  for (int mb = 0; mb < pp; ++mb) {
    const std::vector<int64_t> prompts = mb == 0 ? input.prefill_prompts : std::vector<int64_t>{};
    if (micro[mb][0].empty() && micro[mb][1].empty() && prompts.empty()) continue;
    ASSIGN_OR_RETURN(IterationCost c,
                     RunStage(micro[mb], prompts, mb, input.record_timeline, input.layers));
    for (TimelineEvent& e : c.timeline) {
      e.start_ns += total.duration_ns;
      e.end_ns += total.duration_ns;
    }
    total.timeline.insert(total.timeline.end(), c.timeline.begin(), c.timeline.end());
    total.duration_ns += c.duration_ns;
    total.systolic_busy_ns += c.systolic_busy_ns;
    total.vector_busy_ns += c.vector_busy_ns;
    total.pim_channel_busy_ns += c.pim_channel_busy_ns;
    total.pim_mac_ns += c.pim_mac_ns;
    total.interconnect_busy_ns += c.interconnect_busy_ns;
    total.npu_macs += c.npu_macs;
    total.npu_hbm_bytes += c.npu_hbm_bytes;
    total.pim_macs += c.pim_macs;
    total.npu_dynamic_j += c.npu_dynamic_j;
    total.dram_j += c.dram_j;
    total.pim_j += c.pim_j;
    for (int t = 0; t < hw::kNumCommandTypes; ++t) total.pim_commands[t] += c.pim_commands[t];
    total.channel_imbalance = std::max(total.channel_imbalance, c.channel_imbalance);
    int64_t tokens = 0;
    for (int s = 0; s < 2; ++s) tokens += static_cast<int64_t>(micro[mb][s].size());
    max_tokens = std::max(max_tokens, tokens);
  }
  if (pp > 1 && total.duration_ns > 0) {
    const double bytes =
        static_cast<double>(max_tokens) * options_.model.hidden * options_.model.element_bytes;
    total.duration_ns += (pp - 1) * options_.interconnect.TransferNs(bytes);
  }
  for (int s = 0; s < 2; ++s) {
    total.sub_batch_sizes[s] = static_cast<int64_t>(input.sub_batches[s].size());
  }
  // Group energy: the per-device dynamic energy of every device, static NPU power and DRAM
  // background of every device for the whole iteration.
  const int devices = par.devices();
  const double seconds = total.duration_ns * 1e-9;
  total.npu_dynamic_j *= devices;
  total.dram_j *= devices;
  total.pim_j *= devices;
  total.npu_static_j = options_.device.npu.energy.static_power_w * seconds * devices;
  total.dram_background_j = dram_background_w_ * seconds * devices;
  return total;
}

}  // namespace neupims::engine
