#include "engine/stage_graph.h"

#include <algorithm>

namespace neupims::engine {

const char* ToString(Phase p) {
  switch (p) {
    case Phase::kPreAttention:
      return "pre-attention";
    case Phase::kAttention:
      return "attention";
    case Phase::kPostAttention:
      return "post-attention";
    case Phase::kLmHead:
      break;
  }
  return "lm-head";
}

void StageGraph::Clear(bool interleaved) {
  ++builds_;
  interleaved_ = interleaved;
  sched_.clear();
  info_.clear();
  place_.clear();
  layer_last_.clear();
  last_ = {-1, -1};
  attention_start_ = {-1, -1};
  branches_[0].clear();
  branches_[1].clear();
}

// Sec. 6.1: with dual row buffers the logits and attends of every head run as one PIM node,
// while the vector units run each head's softmax.
StageGraph::NodeSpec StageGraph::MhaNode(const SubBatchAttention& a, int s, int layer) {
  const double mha_ns = a.logit_ns + a.attend_ns;
  return {
      {"mha", NodeKind::kPimAttention, s, layer, &a.cost, &a.mha_ch}, Lane::kPim, mha_ns, mha_ns};
}

StageGraph::NodeSpec StageGraph::LogitNode(const SubBatchAttention& a, int s, int layer) {
  return {{"logit", NodeKind::kPimLogit, s, layer, nullptr, &a.logit_ch},
          Lane::kPim,
          a.logit_ns,
          a.logit_ns};
}

StageGraph::NodeSpec StageGraph::AttendNode(const SubBatchAttention& a, int s, int layer) {
  return {{"attend", NodeKind::kPimAttend, s, layer, &a.cost, &a.attend_ch},
          Lane::kPim,
          a.attend_ns,
          a.attend_ns};
}

StageGraph::NodeSpec StageGraph::JoinNode(int s, int layer) {
  return {
      {"attention_done", NodeKind::kJoin, s, layer, nullptr, nullptr}, Lane::kInterconnect, 0, 0};
}

int StageGraph::Add(const NodeSpec& spec, DepList deps) {
  ScheduleNode& n = sched_.emplace_back();
  n.lane = spec.lane;
  n.priority = static_cast<int>(sched_.size()) - 1;  // insertion order: unique
  n.dur_ns = spec.dur_ns;
  n.dur_shared_ns = spec.dur_shared_ns;
  n.deps = std::move(deps);
  n.stage = StageOf(spec.info);
  info_.push_back(spec.info);
  place_.push_back(PlaceOf(spec.info));
  const size_t layer = static_cast<size_t>(spec.info.layer);
  if (layer >= layer_last_.size()) layer_last_.resize(layer + 1, {-1, -1});
  layer_last_[layer][spec.info.sub_batch] = n.priority;
  return n.priority;
}

int StageGraph::StageOf(const NodeInfo& info) const {
  // The LM head comes after the last layer's post-attention ops (its `layer` is one past it).
  const int p =
      info.phase == Phase::kLmHead ? (interleaved_ ? 1 : 0) : static_cast<int>(info.phase);
  if (interleaved_) return 2 * info.layer + info.sub_batch + p;
  return 3 * (2 * info.layer + info.sub_batch) + p;
}

DepList StageGraph::Chain(int s) const { return last_[s] >= 0 ? DepList{last_[s]} : DepList{}; }

void StageGraph::AddChain(absl::Span<const CostedOp> ops, int s, int layer, Phase phase) {
  for (const CostedOp& op : ops) last_[s] = AddOp(op, s, layer, Chain(s), phase);
}

void StageGraph::BeginAttention(int s) {
  attention_start_[s] = last_[s];
  branches_[s].clear();
}

void StageGraph::AddPimAttention(const SubBatchAttention& a, const CostedOp& softmax,
                                 bool dual_row_buffers, int s, int layer) {
  const int qkv = attention_start_[s];
  if (dual_row_buffers) {
    // Sec. 6.1: the vector units run each head's softmax while the PIM computes the other
    // heads; the stage ends when both are done.
    const int mha = Add(MhaNode(a, s, layer), {qkv});
    const int smx = AddOp(softmax, s, layer, {qkv});
    branches_[s] = {mha, smx};
    return;
  }
  // Blocked PIM: logits of every head, then softmax on the NPU, then attend.
  const int lg = Add(LogitNode(a, s, layer), {qkv});
  const int smx = AddOp(softmax, s, layer, {lg});
  const int at = Add(AttendNode(a, s, layer), {smx});
  branches_[s] = {at};
}

void StageGraph::AddNpuAttention(const CostedOp& logit, const CostedOp& softmax,
                                 const CostedOp& context, int s, int layer) {
  const int l = AddOp(logit, s, layer, {attention_start_[s]});
  const int smx = AddOp(softmax, s, layer, {l});
  branches_[s] = {AddOp(context, s, layer, {smx})};
}

void StageGraph::AddPrefillAttention(absl::Span<const CostedOp> ops, int s, int layer) {
  // Its own chain from qkv, in parallel with the decode attention.
  int prev = attention_start_[s];
  for (const CostedOp& op : ops) {
    prev = AddOp(op, s, layer, prev >= 0 ? DepList{prev} : DepList{});
  }
  branches_[s].push_back(prev);
}

void StageGraph::EndAttention(int s, int layer) {
  if (branches_[s].empty()) return;
  // Join point: the post-attention ops wait for every attention branch.
  last_[s] = Add(JoinNode(s, layer), branches_[s]);
}

// The nodes in the order StageGraph::AddPimAttention / AddNpuAttention append them.
void StageGraph::Patcher::AddPimAttention(const SubBatchAttention& a, const CostedOp& softmax,
                                          bool dual_row_buffers, int s, int layer) {
  if (dual_row_buffers) {
    Set(MhaNode(a, s, layer));
    Set(OpNode(softmax, s, layer, Phase::kAttention));
  } else {
    Set(LogitNode(a, s, layer));
    Set(OpNode(softmax, s, layer, Phase::kAttention));
    Set(AttendNode(a, s, layer));
  }
  branched_[s] = true;
}

void StageGraph::Patcher::AddNpuAttention(const CostedOp& logit, const CostedOp& softmax,
                                          const CostedOp& context, int s, int layer) {
  Set(OpNode(logit, s, layer, Phase::kAttention));
  Set(OpNode(softmax, s, layer, Phase::kAttention));
  Set(OpNode(context, s, layer, Phase::kAttention));
  branched_[s] = true;
}

double StageGraph::LayerEnd(int layer) const {
  double e = 0;
  if (layer < 0 || layer >= static_cast<int>(layer_last_.size())) return e;
  for (int i : layer_last_[layer]) {
    if (i >= 0) e = std::max(e, sched_[i].end_ns);
  }
  return e;
}

void StageGraph::AppendTimeline(int micro_batch, std::vector<TimelineEvent>* out) const {
  for (size_t i = 0; i < sched_.size(); ++i) {
    const ScheduleNode& n = sched_[i];
    const NodeInfo& info = info_[i];
    if (n.end_ns <= n.start_ns || info.kind == NodeKind::kJoin) continue;
    if (n.lane == Lane::kPim) {
      const int channels =
          info.channel_ns != nullptr ? static_cast<int>(info.channel_ns->size()) : 0;
      for (int ch = 0; ch < channels; ++ch) {
        const double busy = (*info.channel_ns)[ch];
        if (busy <= 0) continue;
        out->push_back({info.name, n.lane, ch, info.sub_batch, info.layer, micro_batch, n.start_ns,
                        n.start_ns + busy});
      }
      continue;
    }
    out->push_back(
        {info.name, n.lane, -1, info.sub_batch, info.layer, micro_batch, n.start_ns, n.end_ns});
  }
}

void StageGraph::AppendPhaseSpans(int micro_batch, std::vector<PhaseSpan>* out) const {
  const size_t first = out->size();
  for (size_t i = 0; i < sched_.size(); ++i) {
    const ScheduleNode& n = sched_[i];
    const NodeInfo& info = info_[i];
    if (n.end_ns <= n.start_ns) continue;
    auto same = [&](const PhaseSpan& p) {
      return p.layer == info.layer && p.sub_batch == info.sub_batch && p.phase == info.phase;
    };
    auto it = std::find_if(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(), same);
    if (it == out->end()) {
      out->push_back({info.phase, info.sub_batch, info.layer, micro_batch, n.start_ns, n.end_ns});
    } else {
      it->start_ns = std::min(it->start_ns, n.start_ns);
      it->end_ns = std::max(it->end_ns, n.end_ns);
    }
  }
}

void StageGraph::AppendStageSpans(int micro_batch, std::vector<StageSpan>* out) const {
  const size_t first = out->size();
  for (size_t i = 0; i < sched_.size(); ++i) {
    const ScheduleNode& n = sched_[i];
    if (n.end_ns <= n.start_ns) continue;
    auto it = std::find_if(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(),
                           [&](const StageSpan& s) { return s.index == n.stage; });
    if (it == out->end()) {
      out->push_back({n.stage, micro_batch, n.start_ns, n.end_ns});
    } else {
      it->start_ns = std::min(it->start_ns, n.start_ns);
      it->end_ns = std::max(it->end_ns, n.end_ns);
    }
  }
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(),
            [](const StageSpan& a, const StageSpan& b) { return a.index < b.index; });
}

}  // namespace neupims::engine
