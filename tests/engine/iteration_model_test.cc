#include "engine/iteration_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/system_mode.h"
#include "gtest/gtest.h"
#include "hw/device.h"
#include "models/model_config.h"
#include "scheduler/batching.h"
#include "scheduler/request.h"

namespace neupims::engine {
namespace {

// GPT3-7B on TP 4 (and `pp` pipeline stages) on the mode's built-in device, edited by `edit`
// when given.
std::unique_ptr<IterationModel> MakeModel(const std::string& mode_name,
                                          void (*edit)(hw::DeviceConfig*) = nullptr, int pp = 1) {
  absl::StatusOr<SystemMode> mode = ParseSystemMode(mode_name);
  EXPECT_TRUE(mode.ok()) << mode.status();
  if (!mode.ok()) return nullptr;
  IterationModelOptions o;
  absl::StatusOr<models::ModelConfig> model = models::LoadModelConfig("gpt3-7b");
  absl::StatusOr<hw::DeviceConfig> device = hw::LoadDeviceConfig(mode->default_device());
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(device.ok()) << device.status();
  if (!model.ok() || !device.ok()) return nullptr;
  o.model = *model;
  o.device = *device;
  if (edit != nullptr) edit(&o.device);
  o.parallelism = {4, pp};
  o.mode = *mode;
  absl::StatusOr<std::unique_ptr<IterationModel>> m = IterationModel::Create(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// A model for the attention sums' two hot-loop forms: NeuPIMs without a PIM issue limit, or
// npu+pim with a chip-wide one (the per-channel instruction counts compiled in).
std::unique_ptr<IterationModel> MakeAttentionModel(bool issue_limit) {
  if (!issue_limit) return MakeModel("neupims");
  return MakeModel("npu+pim", [](hw::DeviceConfig* d) {
    d->hbm.pim.issue = {hw::PimIssueScope::kChip, 1.0};
  });
}

// 128 decoding requests, sequence lengths 64 .. 963, channel i % 32; split by Algorithm 3 when
// the mode interleaves sub-batches.
IterationInput Batch128(const SystemMode& mode) {
  std::vector<std::vector<DecodeItem>> per_channel(32);
  std::vector<DecodeItem> all;
  for (int i = 0; i < 128; ++i) {
    const DecodeItem d{64 + (i * 97) % 900, i % 32};
    per_channel[d.channel].push_back(d);
    all.push_back(d);
  }
  IterationInput in;
  if (mode.sub_batch_interleaving) {
    auto [a, b] = scheduler::PartitionSubBatches(per_channel);
    in.sub_batches[0] = std::move(a);
    in.sub_batches[1] = std::move(b);
  } else {
    in.sub_batches[0] = std::move(all);
  }
  return in;
}

// Batch128 on `mode`'s device as shipped (first) and edited by `edit` (second); nullopt after
// a failed expectation.
struct CostPair {
  IterationCost ours, edited;
};
std::optional<CostPair> RunOursAndEdited(const std::string& mode, void (*edit)(hw::DeviceConfig*)) {
  std::unique_ptr<IterationModel> ours = MakeModel(mode);
  std::unique_ptr<IterationModel> edited = MakeModel(mode, edit);
  if (ours == nullptr || edited == nullptr) return std::nullopt;
  const IterationInput in = Batch128(ours->options().mode);
  absl::StatusOr<IterationCost> a = ours->Run(in);
  absl::StatusOr<IterationCost> b = edited->Run(in);
  EXPECT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(b.ok()) << b.status();
  if (!a.ok() || !b.ok()) return std::nullopt;
  return CostPair{*std::move(a), *std::move(b)};
}

// Batch128 through `layers` decoder layers, with the timeline, phases and stages.
absl::StatusOr<IterationCost> RunLayersWithTimeline(IterationModel& m, int layers) {
  IterationInput in = Batch128(m.options().mode);
  in.layers = layers;
  in.record_timeline = true;
  return m.Run(in);
}

bool Overlap(const TimelineEvent& a, const TimelineEvent& b) {
  constexpr double kEps = 1e-6;  // ns; events that only touch do not overlap
  return a.start_ns < b.end_ns - kEps && b.start_ns < a.end_ns - kEps;
}

int CountSystolicPimOverlaps(const std::vector<TimelineEvent>& timeline) {
  int overlaps = 0;
  for (const TimelineEvent& s : timeline) {
    if (s.lane != Lane::kSystolic) continue;
    for (const TimelineEvent& p : timeline) {
      if (p.lane == Lane::kPim && Overlap(s, p)) ++overlaps;
    }
  }
  return overlaps;
}

// Runs `in` over all 32 layers extrapolated (no timeline: 3 layers scheduled, the rest
// extrapolated) and fully scheduled (record_timeline: every layer) and compares them. `layers`
// is 32 or 0 (0 adds the LM head; see FullTimelineWithTheLmHeadKeepsItsOpNames for
// why the enabled tests give 32).
void ExpectExtrapolationMatchesFullSchedule(IterationModel& m, IterationInput in, int layers) {
  EXPECT_EQ(m.layers_per_device(), 32);
  in.layers = layers;
  in.record_timeline = false;
  absl::StatusOr<IterationCost> fast = m.Run(in);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_TRUE(fast->timeline.empty());
  in.record_timeline = true;
  absl::StatusOr<IterationCost> full = m.Run(in);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_FALSE(full->timeline.empty());
  int max_layer = 0;
  for (const TimelineEvent& e : full->timeline) max_layer = std::max(max_layer, e.layer);
  EXPECT_GE(max_layer, 31);
  EXPECT_NEAR(fast->duration_ns, full->duration_ns, 0.005 * full->duration_ns);
  // The busy-time accounting extrapolates the same way.
  EXPECT_NEAR(fast->systolic_busy_ns, full->systolic_busy_ns, 0.005 * full->systolic_busy_ns);
  EXPECT_NEAR(fast->pim_mac_ns, full->pim_mac_ns, 0.005 * full->pim_mac_ns);
  for (const TimelineEvent& e : full->timeline) {
    EXPECT_LE(e.end_ns, full->duration_ns + 1e-6) << e.name;
    EXPECT_GE(e.start_ns, 0) << e.name;
  }
}

TEST(IterationModel, ExtrapolatedDurationMatchesTheFullScheduleInBlockedMode) {
  std::unique_ptr<IterationModel> m = MakeModel("npu+pim");
  ASSERT_NE(m, nullptr);
  ExpectExtrapolationMatchesFullSchedule(*m, Batch128(m->options().mode), 32);
}

// NeuPIMs mode with the whole batch in one sub-batch (what the engine runs below the adaptive
// interleaving threshold).
TEST(IterationModel, ExtrapolatedDurationMatchesTheFullScheduleWithoutInterleaving) {
  std::unique_ptr<IterationModel> m = MakeModel("neupims");
  ASSERT_NE(m, nullptr);
  IterationInput in = Batch128(m->options().mode);
  for (const DecodeItem& d : in.sub_batches[1]) in.sub_batches[0].push_back(d);
  in.sub_batches[1].clear();
  ExpectExtrapolationMatchesFullSchedule(*m, in, 32);
}

// The extrapolated duration (five layers scheduled, the interior period extrapolated, GEMMs at
// the reduced bandwidth share only while the PIM computes) matches scheduling every layer.
TEST(IterationModel, ExtrapolatedDurationMatchesTheFullScheduleWithSubBatchInterleaving) {
  std::unique_ptr<IterationModel> m = MakeModel("neupims");
  ASSERT_NE(m, nullptr);
  ExpectExtrapolationMatchesFullSchedule(*m, Batch128(m->options().mode), 0);
  ExpectExtrapolationMatchesFullSchedule(*m, Batch128(m->options().mode), 32);
}

// Regression: the LM-head ops outlive the schedule, so timelines name them from live memory.
TEST(IterationModel, FullTimelineWithTheLmHeadKeepsItsOpNames) {
  std::unique_ptr<IterationModel> m = MakeModel("npu+pim");
  ASSERT_NE(m, nullptr);
  IterationInput in = Batch128(m->options().mode);
  in.layers = 0;
  in.record_timeline = true;
  absl::StatusOr<IterationCost> c = m->Run(in);
  ASSERT_TRUE(c.ok()) << c.status();
  int lm_head = 0;
  for (const TimelineEvent& e : c->timeline) lm_head += e.name == "lm_head" ? 1 : 0;
  EXPECT_EQ(lm_head, 1);
}

TEST(IterationModel, BlockedModeNeverOverlapsSystolicAndPimWork) {
  std::unique_ptr<IterationModel> m = MakeModel("npu+pim");
  ASSERT_NE(m, nullptr);
  IterationInput in = Batch128(m->options().mode);
  in.layers = 32;  // every layer, without the LM head (see FullTimelineWithTheLmHead...)
  in.record_timeline = true;
  absl::StatusOr<IterationCost> c = m->Run(in);
  ASSERT_TRUE(c.ok()) << c.status();
  int systolic = 0, pim = 0;
  for (const TimelineEvent& e : c->timeline) {
    systolic += e.lane == Lane::kSystolic;
    pim += e.lane == Lane::kPim;
  }
  ASSERT_GT(systolic, 0);
  ASSERT_GT(pim, 0);
  EXPECT_EQ(CountSystolicPimOverlaps(c->timeline), 0);
  EXPECT_EQ(c->sub_batch_sizes[0], 128);
  EXPECT_EQ(c->sub_batch_sizes[1], 0);
}

TEST(IterationModel, NeuPimsInterleavesSubBatchesSoSystolicAndPimWorkOverlap) {
  std::unique_ptr<IterationModel> m = MakeModel("neupims");
  ASSERT_NE(m, nullptr);
  IterationInput in = Batch128(m->options().mode);
  in.layers = 32;
  in.record_timeline = true;
  absl::StatusOr<IterationCost> c = m->Run(in);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(CountSystolicPimOverlaps(c->timeline), 0);
  // 4 requests per channel split 2 + 2.
  EXPECT_EQ(c->sub_batch_sizes[0], 64);
  EXPECT_EQ(c->sub_batch_sizes[1], 64);
  // Both sub-batches appear on both lanes.
  bool seen[2][2] = {{false, false}, {false, false}};
  for (const TimelineEvent& e : c->timeline) {
    if (e.lane == Lane::kSystolic) seen[0][e.sub_batch] = true;
    if (e.lane == Lane::kPim) seen[1][e.sub_batch] = true;
  }
  EXPECT_TRUE(seen[0][0] && seen[0][1] && seen[1][0] && seen[1][1]);
}

TEST(IterationModel, AttentionCostIsCachedAndGrowsWithTheSequence) {
  std::unique_ptr<IterationModel> m = MakeModel("neupims");
  ASSERT_NE(m, nullptr);
  absl::StatusOr<AttentionCost> short_seq = m->Attention(32);
  absl::StatusOr<AttentionCost> long_seq = m->Attention(1024);
  ASSERT_TRUE(short_seq.ok()) << short_seq.status();
  ASSERT_TRUE(long_seq.ok()) << long_seq.status();
  EXPECT_GT(short_seq->logit_ns, 0);
  EXPECT_GT(short_seq->attend_ns, 0);
  EXPECT_GT(long_seq->logit_ns, short_seq->logit_ns);
  EXPECT_GT(long_seq->macs, short_seq->macs);
  absl::StatusOr<AttentionCost> again = m->Attention(1024);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->logit_ns, long_seq->logit_ns);
  EXPECT_EQ(again->attend_ns, long_seq->attend_ns);
  EXPECT_FALSE(m->Attention(0).ok());
  std::unique_ptr<IterationModel> npu_only = MakeModel("npu-only");
  ASSERT_NE(npu_only, nullptr);
  EXPECT_FALSE(npu_only->Attention(32).ok());  // no PIM in this mode
}

// Two requests, one of them at `second` tokens: the iteration's PIM MACs and commands are the
// two requests' over 32 layers.
void ExpectBothRequestsCounted(IterationModel& m, int64_t second) {
  IterationInput in;
  in.sub_batches[0] = {{300, 1}, {second, 2}};
  in.layers = 32;
  absl::StatusOr<IterationCost> c = m.Run(in);
  absl::StatusOr<AttentionCost> a = m.Attention(300);
  absl::StatusOr<AttentionCost> b = m.Attention(second);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(c->pim_macs, 32 * (a->macs + b->macs), 1e-12 * c->pim_macs);
  EXPECT_GT(c->pim_macs, 0);
  for (int t = 0; t < hw::kNumCommandTypes; ++t) {
    EXPECT_EQ(c->pim_commands[t], 32 * (a->commands[t] + b->commands[t])) << t;
  }
}

// The attention sums take cached costs in their hot loop and cost a length beyond the cache
// (longer than the model's max_seq_len) on the way: both must count every request, and a
// request of length 0 must fail the iteration.
TEST(IterationModel, AttentionSumsCountRequestsBeyondTheCacheAndRejectLengthZero) {
  // Both forms of the hot loop: without and with the per-channel instruction counts of a PIM
  // issue limit.
  for (const bool issue_limit : {false, true}) {
    SCOPED_TRACE(issue_limit ? "chip-wide issue limit" : "unlimited issue");
    std::unique_ptr<IterationModel> m = MakeAttentionModel(issue_limit);
    ASSERT_NE(m, nullptr);
    const int64_t beyond = m->options().model.max_seq_len + 10;
    for (int64_t second : {int64_t{700}, beyond}) {
      SCOPED_TRACE(second);
      ExpectBothRequestsCounted(*m, second);
    }
    IterationInput zero;
    zero.sub_batches[0] = {{300, 1}, {0, 2}};
    EXPECT_FALSE(m->Run(zero).ok());
  }
}

// Issue 14: the reference simulator's one-instruction-per-cycle chip queue. Newton spends an
// instruction per dot-product step, about 10x NeuPIMs' count, so the limit slows NPU+PIM far more
// than NeuPIMs; an unlimited issue changes nothing.
TEST(IterationModel, ChipWideIssueLimitSlowsNewtonFarMoreThanNeuPims) {
  auto chip = [](hw::DeviceConfig* d) { d->hbm.pim.issue = {hw::PimIssueScope::kChip, 1.0}; };
  double slowdown[2] = {0, 0};
  const char* modes[2] = {"npu+pim", "neupims"};
  for (int i = 0; i < 2; ++i) {
    std::optional<CostPair> c = RunOursAndEdited(modes[i], chip);
    ASSERT_TRUE(c.has_value());
    EXPECT_GE(c->edited.duration_ns, c->ours.duration_ns) << modes[i];
    slowdown[i] = c->edited.duration_ns / c->ours.duration_ns;
  }
  EXPECT_GT(slowdown[0], 1.2);
  EXPECT_GT(slowdown[0], slowdown[1] * 1.1);
}

// npu.op_overlap = serial (the reference's): vector ops share the systolic lane, so no two NPU
// events overlap and the iteration is no shorter; the PIM still overlaps the NPU under
// interleaving.
TEST(IterationModel, SerialNpuRunsOneNpuOperationAtATime) {
  std::unique_ptr<IterationModel> concurrent = MakeModel("neupims");
  std::unique_ptr<IterationModel> serial =
      MakeModel("neupims", [](hw::DeviceConfig* d) { d->npu.op_overlap = hw::OpOverlap::kSerial; });
  ASSERT_NE(concurrent, nullptr);
  ASSERT_NE(serial, nullptr);
  IterationInput in = Batch128(concurrent->options().mode);
  in.layers = 4;
  in.record_timeline = true;
  absl::StatusOr<IterationCost> a = concurrent->Run(in);
  absl::StatusOr<IterationCost> b = serial->Run(in);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GE(b->duration_ns, a->duration_ns);
  std::vector<const TimelineEvent*> npu;
  for (const TimelineEvent& e : b->timeline) {
    EXPECT_NE(e.lane, Lane::kVector) << e.name;
    if (e.lane == Lane::kSystolic) npu.push_back(&e);
  }
  for (size_t i = 0; i < npu.size(); ++i) {
    for (size_t j = i + 1; j < npu.size(); ++j) {
      EXPECT_FALSE(Overlap(*npu[i], *npu[j])) << npu[i]->name << " / " << npu[j]->name;
    }
  }
  EXPECT_GT(CountSystolicPimOverlaps(b->timeline), 0);
}

// npu.attention_mapping = serial_gemv (the reference's npu-only attention): one request and one
// head at a time on the systolic array, ~1,400 cycles per head at s = 310 against a
// bandwidth-bound stream of its 160 KB of K and V in ~166.
TEST(IterationModel, SerialGemvAttentionMakesNpuOnlyAttentionComputeBound) {
  std::optional<CostPair> c = RunOursAndEdited("npu-only", [](hw::DeviceConfig* d) {
    d->npu.attention_mapping = hw::AttentionMapping::kSerialGemv;
  });
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(c->edited.duration_ns, 1.5 * c->ours.duration_ns);
  EXPECT_EQ(c->edited.npu_macs, c->ours.npu_macs);  // the same work, mapped differently
}

// tp_all_reduce: false (the reference simulates one sharded device): the all-reduce nodes take
// no time, so the TP-4 iteration is shorter and the compute is the same.
TEST(IterationModel, WithoutTheAllReduceTheInterconnectIsIdle) {
  std::optional<CostPair> c =
      RunOursAndEdited("neupims", [](hw::DeviceConfig* d) { d->tp_all_reduce = false; });
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(c->ours.interconnect_busy_ns, 0);
  EXPECT_EQ(c->edited.interconnect_busy_ns, 0);
  EXPECT_LT(c->edited.duration_ns, c->ours.duration_ns);
  EXPECT_EQ(c->edited.npu_macs, c->ours.npu_macs);
}

// The reference's stage view without interleaving: one layer is pre-attention (A), then
// attention (B), then post-attention (E), back to back, ending with the iteration.
TEST(IterationModel, PhasesOfOneLayerWithoutInterleavingAreBackToBack) {
  std::unique_ptr<IterationModel> m = MakeModel("npu+pim");
  ASSERT_NE(m, nullptr);
  absl::StatusOr<IterationCost> c = RunLayersWithTimeline(*m, 1);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->phases.size(), 3u);
  const PhaseSpan& a = c->phases[0];
  const PhaseSpan& b = c->phases[1];
  const PhaseSpan& e = c->phases[2];
  EXPECT_EQ(a.phase, Phase::kPreAttention);
  EXPECT_EQ(b.phase, Phase::kAttention);
  EXPECT_EQ(e.phase, Phase::kPostAttention);
  EXPECT_EQ(a.start_ns, 0);
  EXPECT_NEAR(b.start_ns, a.end_ns, 1e-6);
  EXPECT_NEAR(e.start_ns, b.end_ns, 1e-6);
  EXPECT_NEAR(e.end_ns, c->duration_ns, 1e-6);
  EXPECT_EQ(c->layer_period_ns, 0);  // one layer: no steady state
}

// Stage barriers (device stage_barriers, the reference's execution): with two interleaved
// sub-batches over two layers the stages are A-F, back to back, each holding exactly the
// operations stage_graph.h assigns it; and barriers never make an iteration faster.
TEST(IterationModel, StageBarriersRunTheInterleavedStagesAToFBackToBack) {
  std::unique_ptr<IterationModel> free_running = MakeModel("neupims");
  std::unique_ptr<IterationModel> m =
      MakeModel("neupims", [](hw::DeviceConfig* d) { d->stage_barriers = true; });
  ASSERT_NE(m, nullptr);
  ASSERT_NE(free_running, nullptr);
  ASSERT_FALSE(Batch128(m->options().mode).sub_batches[1].empty());
  absl::StatusOr<IterationCost> c = RunLayersWithTimeline(*m, 2);
  absl::StatusOr<IterationCost> f = RunLayersWithTimeline(*free_running, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->stages.empty());  // only reported with barriers
  ASSERT_EQ(c->stages.size(), 6u);
  for (size_t k = 0; k < c->stages.size(); ++k) {
    EXPECT_EQ(c->stages[k].index, static_cast<int>(k));
    if (k > 0) {
      EXPECT_GE(c->stages[k].start_ns, c->stages[k - 1].end_ns - 1e-6) << k;
    }
  }
  EXPECT_EQ(c->stages[0].start_ns, 0);
  EXPECT_NEAR(c->stages[5].end_ns, c->duration_ns, 1e-6);
  // B holds SB0's attention and SB1's pre-attention; D SB0's layer-2 attention and SB1's
  // layer-1 post-attention.
  auto phase_in = [&](Phase p, int sb, int layer, int stage) {
    for (const PhaseSpan& s : c->phases) {
      if (s.phase == p && s.sub_batch == sb && s.layer == layer) {
        return s.start_ns >= c->stages[stage].start_ns - 1e-6 &&
               s.end_ns <= c->stages[stage].end_ns + 1e-6;
      }
    }
    return false;
  };
  EXPECT_TRUE(phase_in(Phase::kAttention, 0, 0, 1));
  EXPECT_TRUE(phase_in(Phase::kPreAttention, 1, 0, 1));
  EXPECT_TRUE(phase_in(Phase::kAttention, 0, 1, 3));
  EXPECT_TRUE(phase_in(Phase::kPostAttention, 1, 0, 3));
  EXPECT_TRUE(phase_in(Phase::kAttention, 1, 1, 4));
  EXPECT_GE(c->duration_ns, f->duration_ns - 1e-6);
}

TEST(IterationModel, StageBarriersWithoutInterleavingAreABEPerLayer) {
  std::unique_ptr<IterationModel> m =
      MakeModel("npu+pim", [](hw::DeviceConfig* d) { d->stage_barriers = true; });
  ASSERT_NE(m, nullptr);
  absl::StatusOr<IterationCost> c = RunLayersWithTimeline(*m, 1);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->stages.size(), 3u);
  ASSERT_EQ(c->phases.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(c->stages[k].start_ns, c->phases[k].start_ns, 1e-6);
    EXPECT_NEAR(c->stages[k].end_ns, c->phases[k].end_ns, 1e-6);
  }
}

TEST(IterationModel, LayerPeriodIsReportedForAStackOfLayers) {
  std::unique_ptr<IterationModel> m = MakeModel("neupims");
  ASSERT_NE(m, nullptr);
  IterationInput in = Batch128(m->options().mode);
  in.layers = 8;
  absl::StatusOr<IterationCost> c = m->Run(in);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(c->layer_period_ns, 0);
  EXPECT_LT(c->layer_period_ns * 8, c->duration_ns * 1.01);
}

// Table 5's cost of the second row buffer: a PIM op holds rows open above precharge standby,
// and with dual row buffers the PIM row's buffer adds its own background.
TEST(IterationModel, OpenPimRowsAddDramBackgroundMoreWithTheSecondRowBuffer) {
  std::unique_ptr<IterationModel> dual = MakeModel("neupims");
  std::unique_ptr<IterationModel> single = MakeModel("npu+pim");
  ASSERT_NE(dual, nullptr);
  ASSERT_NE(single, nullptr);
  absl::StatusOr<AttentionCost> d = dual->Attention(512);
  absl::StatusOr<AttentionCost> s = single->Attention(512);
  ASSERT_TRUE(d.ok() && s.ok());
  EXPECT_GT(s->background_j, 0);
  const double d_per_ns = d->background_j / (d->logit_ns + d->attend_ns);
  const double s_per_ns = s->background_j / (s->logit_ns + s->attend_ns);
  EXPECT_GT(d_per_ns, s_per_ns);
}

// npu.activation_traffic = dram_round_trip (the reference's): every GEMM streams its X and Y and
// every vector op its rows through HBM, so the NPU's HBM bytes and the iteration grow.
TEST(IterationModel, DramRoundTripActivationsAddHbmTrafficAndTime) {
  std::optional<CostPair> c = RunOursAndEdited("neupims", [](hw::DeviceConfig* d) {
    d->npu.activation_traffic = hw::ActivationTraffic::kDramRoundTrip;
  });
  ASSERT_TRUE(c.has_value());
  EXPECT_GT(c->edited.npu_hbm_bytes, c->ours.npu_hbm_bytes);
  EXPECT_GT(c->edited.dram_j, c->ours.dram_j);
  EXPECT_GT(c->edited.duration_ns, c->ours.duration_ns);
}

}  // namespace
}  // namespace neupims::engine

namespace neupims::engine {
namespace {

// Every field of two costs, exactly (a replayed schedule must give the same bits).
void ExpectSameCost(const IterationCost& a, const IterationCost& b) {
  EXPECT_EQ(a.duration_ns, b.duration_ns);
  EXPECT_EQ(a.channel_imbalance, b.channel_imbalance);
#define NEUPIMS_EXPECT_FIELD(name, kind) EXPECT_EQ(a.name, b.name) << #name;
  NEUPIMS_HW_COST_FIELDS(NEUPIMS_EXPECT_FIELD)
#undef NEUPIMS_EXPECT_FIELD
  EXPECT_EQ(a.pim_commands, b.pim_commands);
}

// The hot loop adds cached lengths from 16-byte lanes with int32 command counts, widened once per
// chunk of 1,024 requests, and leaves it for a length not costed yet, beyond the cache, or a
// channel out of range. A batch of 2,500 requests (three chunks) with all three, run on a fresh
// model (most requests leave the loop) and again (all cached lengths from the lanes), must give
// the same bits both times and the sums of the requests' own costs, channels clamped.
TEST(IterationModel, AttentionSumsFromTheLaneCacheEqualTheRequestsOwnCosts) {
  for (const bool issue_limit : {false, true}) {
    SCOPED_TRACE(issue_limit ? "chip-wide issue limit" : "unlimited issue");
    std::unique_ptr<IterationModel> m = MakeAttentionModel(issue_limit);
    ASSERT_NE(m, nullptr);
    const int channels = m->options().device.hbm.org.channels;
    const int64_t max_seq = m->options().model.max_seq_len;
    std::mt19937_64 rng(7);
    IterationInput in;
    in.layers = 32;
    for (int i = 0; i < 2500; ++i) {
      const bool beyond = std::uniform_int_distribution<int>(0, 99)(rng) == 0;
      const int64_t len = beyond ? max_seq + std::uniform_int_distribution<int64_t>(1, 20)(rng)
                                 : std::uniform_int_distribution<int64_t>(1, 600)(rng);
      in.sub_batches[0].push_back({len, std::uniform_int_distribution<int>(-2, channels + 2)(rng)});
    }
    absl::StatusOr<IterationCost> first = m->Run(in);
    absl::StatusOr<IterationCost> again = m->Run(in);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE(again.ok()) << again.status();
    ExpectSameCost(*first, *again);
    // The requests' own costs, summed in request order per channel as the model sums them.
    hw::CommandCounts commands{};
    double macs = 0;
    std::vector<double> logit(channels, 0.0), attend(channels, 0.0);
    for (const DecodeItem& d : in.sub_batches[0]) {
      absl::StatusOr<AttentionCost> a = m->Attention(d.seq_len);
      ASSERT_TRUE(a.ok()) << a.status();
      for (int t = 0; t < hw::kNumCommandTypes; ++t) commands[t] += a->commands[t];
      macs += a->macs;
      const int ch = std::clamp(d.channel, 0, channels - 1);
      logit[ch] += a->logit_ns;
      attend[ch] += a->attend_ns;
    }
    for (int t = 0; t < hw::kNumCommandTypes; ++t) {
      EXPECT_EQ(first->pim_commands[t], 32 * commands[t]) << t;
    }
    EXPECT_EQ(first->pim_macs, 32 * macs);
    double busiest = 0, sum = 0;
    for (int ch = 0; ch < channels; ++ch) {
      busiest = std::max(busiest, logit[ch] + attend[ch]);
      sum += logit[ch] + attend[ch];
    }
    EXPECT_EQ(first->channel_imbalance, busiest / (sum / channels));
  }
}

void ExpectSameGraph(const StageGraph& got, const StageGraph& want);
// `m` (which may replay or patch what it kept) runs `in` with the same cost as a fresh model of
// `mode_name` (which builds and schedules anew), and, if asked, with the same graph.
void ExpectRunEqualsAFreshModel(IterationModel* m, const char* mode_name, const IterationInput& in,
                                bool compare_graphs = false) {
  std::unique_ptr<IterationModel> fresh = MakeModel(mode_name);
  ASSERT_NE(fresh, nullptr);
  absl::StatusOr<IterationCost> got = m->Run(in);
  absl::StatusOr<IterationCost> want = fresh->Run(in);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectSameCost(*got, *want);
  if (compare_graphs) ExpectSameGraph(m->stage_graph(), fresh->stage_graph());
}

// A decode batch whose requests all grow by `grow` tokens: most steps keep every node's
// duration (nothing crosses a tile or vector-lane step), so the schedule is replayed; each
// result must equal what a fresh model (which always schedules) computes.
TEST(IterationModel, ReplayedScheduleEqualsAFreshSchedule) {
  for (const char* mode_name : {"neupims", "npu+pim", "npu-only"}) {
    SCOPED_TRACE(mode_name);
    std::unique_ptr<IterationModel> m = MakeModel(mode_name);
    ASSERT_NE(m, nullptr);
    IterationInput in = Batch128(m->options().mode);
    const int kSteps = 40;
    for (int step = 0; step < kSteps; ++step) {
      ExpectRunEqualsAFreshModel(m.get(), mode_name, in);
      for (auto& sb : in.sub_batches) {
        for (DecodeItem& d : sb) ++d.seq_len;
      }
      // A prefill in between always schedules its own graph and must not disturb the replay.
      if (step == kSteps / 2) {
        IterationInput prefill = in;
        prefill.prefill_prompts = {300};
        ASSERT_TRUE(m->Run(prefill).ok());
      }
    }
    EXPECT_GT(m->schedules_built(), 1);
    // Some of the list schedules were lean replays (the graph's shape kept by patching), and
    // each equalled the fresh model's; npu+pim (a single row buffer) never replays.
    const IterationModel::ListScheduleCalls calls = m->list_schedule_calls();
    if (m->options().mode.dual_row_buffers || !m->options().mode.pim_attention) {
      EXPECT_GT(calls.lean, 0);
    } else {
      EXPECT_EQ(calls.lean + calls.checked, 0);
    }
    // With PIM attention a step changes durations only when the busiest channel's sum crosses
    // a step; npu-only attention GEMMs grow with every token.
    if (m->options().mode.pim_attention) {
      EXPECT_LT(m->schedules_built(), kSteps);
    }
  }
}

// Runs of 5 and of 6 or 32 layers share a schedule key (five layers scheduled, no LM head): the
// replayed schedule must extrapolate as a fresh one does.
TEST(IterationModel, ReplayAcrossLayerCountsExtrapolatesAsAFreshSchedule) {
  std::unique_ptr<IterationModel> m = MakeModel("neupims");
  ASSERT_NE(m, nullptr);
  IterationInput in = Batch128(m->options().mode);
  for (int layers : {5, 32, 6, 5, 3, 32}) {
    SCOPED_TRACE(layers);
    in.layers = layers;
    ExpectRunEqualsAFreshModel(m.get(), "neupims", in);
  }
}

// Two stage graphs node by node, every field (costs and channel loads by value: the two graphs
// belong to different models).
void ExpectSameGraph(const StageGraph& got, const StageGraph& want) {
  ASSERT_EQ(got.nodes().size(), want.nodes().size());
  for (size_t i = 0; i < want.nodes().size(); ++i) {
    SCOPED_TRACE(i);
    const ScheduleNode& a = got.nodes()[i];
    const ScheduleNode& b = want.nodes()[i];
    EXPECT_EQ(a.lane, b.lane);
    EXPECT_EQ(a.priority, b.priority);
    EXPECT_EQ(a.dur_ns, b.dur_ns);
    EXPECT_EQ(a.dur_shared_ns, b.dur_shared_ns);
    EXPECT_EQ(std::vector<int>(a.deps.begin(), a.deps.end()),
              std::vector<int>(b.deps.begin(), b.deps.end()));
    EXPECT_EQ(a.stage, b.stage);
    EXPECT_EQ(a.start_ns, b.start_ns);
    EXPECT_EQ(a.end_ns, b.end_ns);
    const NodeInfo& x = got.node_info()[i];
    const NodeInfo& y = want.node_info()[i];
    EXPECT_STREQ(x.name, y.name);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.sub_batch, y.sub_batch);
    EXPECT_EQ(x.layer, y.layer);
    EXPECT_EQ(x.phase, y.phase);
    ASSERT_EQ(x.cost == nullptr, y.cost == nullptr);
    if (x.cost != nullptr) {
#define NEUPIMS_EXPECT_FIELD(name, kind) EXPECT_EQ(x.cost->name, y.cost->name) << #name;
      NEUPIMS_HW_COST_FIELDS(NEUPIMS_EXPECT_FIELD)
#undef NEUPIMS_EXPECT_FIELD
      EXPECT_EQ(x.cost->pim_commands, y.cost->pim_commands);
    }
    ASSERT_EQ(x.channel_ns == nullptr, y.channel_ns == nullptr);
    if (x.channel_ns != nullptr) {
      EXPECT_EQ(*x.channel_ns, *y.channel_ns);
    }
  }
}

// StageGraph::LayerEnd reads only the last node of each sub-batch's part of a layer: it must be
// the latest end of all the layer's nodes (and 0 past the last layer).
void ExpectLayerEndsAreTheLatestEnds(const StageGraph& g) {
  std::vector<double> latest;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const size_t layer = static_cast<size_t>(g.node_info()[i].layer);
    if (layer >= latest.size()) latest.resize(layer + 1, 0.0);
    latest[layer] = std::max(latest[layer], g.nodes()[i].end_ns);
  }
  latest.push_back(0.0);
  for (size_t layer = 0; layer < latest.size(); ++layer) {
    EXPECT_EQ(g.LayerEnd(static_cast<int>(layer)), latest[layer]) << "layer " << layer;
  }
}

// A random stage: usually two sub-batches of random sizes and lengths (a recurring topology
// with new token counts), sometimes one or none, local prefills, other layer counts or a
// timeline. A prefill-only input records its timeline (else Run answers it from its memo and
// schedules no graph).
IterationInput RandomStage(std::mt19937_64& rng) {
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  IterationInput in;
  const bool usual = uniform(0, 9) < 6;
  for (int s = 0; s < 2; ++s) {
    const int n = usual ? uniform(1, 48) : uniform(0, 48);
    for (int i = 0; i < n; ++i) in.sub_batches[s].push_back({uniform(1, 1500), uniform(0, 31)});
  }
  if (!usual) {
    for (int p = uniform(0, 2); p > 0; --p) in.prefill_prompts.push_back(uniform(1, 200));
    in.layers = std::array<int, 4>{0, 3, 5, 32}[uniform(0, 3)];
    in.record_timeline = uniform(0, 4) == 0;
  }
  const bool no_decode = in.sub_batches[0].empty() && in.sub_batches[1].empty();
  if (no_decode && in.prefill_prompts.empty()) in.sub_batches[0].push_back({100, 3});
  if (no_decode) in.record_timeline = true;
  return in;
}

// `items`' decoding requests as the scheduler holds them (each length split into prompt and
// generated tokens), and an input that reads them in place.
struct InPlaceInput {
  std::vector<scheduler::Request> requests;
  std::array<std::vector<const scheduler::Request*>, 2> lists;
  IterationInput input;
};
void ReadInPlace(const IterationInput& items, InPlaceInput* out) {
  out->input = items;
  out->requests.clear();
  out->requests.reserve(items.sub_batches[0].size() + items.sub_batches[1].size());
  for (int s = 0; s < 2; ++s) {
    out->lists[s].clear();
    for (const DecodeItem& d : items.sub_batches[s]) {
      scheduler::Request& r = out->requests.emplace_back();
      r.generated = d.seq_len / 3;
      r.prompt_tokens = d.seq_len - r.generated;
      r.channel = d.channel;
      out->lists[s].push_back(&r);
    }
    out->input.sub_batches[s].clear();
    out->input.decode[s] = out->lists[s];
  }
}

// The engine passes the scheduler's request lists, read in place; tests and `neupims step` pass
// DecodeItems. Over random stages (one, two or no sub-batches, prefills, timelines) and both
// pipeline splits, the two forms of the same batch must give the same bits on every mode.
TEST(IterationModel, DecodeListsReadInPlaceEqualTheirCopies) {
  for (const char* mode : {"npu-only", "npu+pim", "neupims"}) {
    for (const int pp : {1, 2}) {
      SCOPED_TRACE(absl::StrCat(mode, " pp ", pp));
      std::unique_ptr<IterationModel> copies = MakeModel(mode, nullptr, pp);
      std::unique_ptr<IterationModel> in_place = MakeModel(mode, nullptr, pp);
      ASSERT_NE(copies, nullptr);
      ASSERT_NE(in_place, nullptr);
      std::mt19937_64 rng(pp);
      InPlaceInput requests;
      for (int step = 0; step < 40; ++step) {
        SCOPED_TRACE(step);
        const IterationInput in = RandomStage(rng);
        ReadInPlace(in, &requests);
        absl::StatusOr<IterationCost> want = copies->Run(in);
        absl::StatusOr<IterationCost> got = in_place->Run(requests.input);
        ASSERT_TRUE(want.ok()) << want.status();
        ASSERT_TRUE(got.ok()) << got.status();
        ExpectSameCost(*got, *want);
        EXPECT_EQ(got->sub_batch_sizes, want->sub_batch_sizes);
        EXPECT_EQ(got->timeline.size(), want->timeline.size());
      }
    }
  }
}

TEST(IterationModel, AnInputWithBothDecodeFormsIsRejected) {
  std::unique_ptr<IterationModel> m = MakeModel("neupims");
  ASSERT_NE(m, nullptr);
  IterationInput in;
  in.sub_batches[0] = {{300, 1}};
  InPlaceInput requests;
  ReadInPlace(in, &requests);
  requests.input.sub_batches[1] = {{200, 2}};
  absl::StatusOr<IterationCost> cost = m->Run(requests.input);
  EXPECT_EQ(cost.status().code(), absl::StatusCode::kInvalidArgument) << cost.status();
}

// The patch walk's per-node check: a walk of another topology with the same node count must stop
// the program rather than keep the old graph's dependencies and stages (which would schedule the
// new stage on the old stage's edges).
TEST(StageGraph, APatchWalkOfAnotherTopologyStops) {
  const std::vector<CostedOp> one(1), two(2);
  StageGraph g;
  g.Clear(false);
  g.AddChain(two, 0, 0, Phase::kPreAttention);
  g.AddChain(one, 0, 0, Phase::kPostAttention);
  StageGraph::Patcher same(&g);
  same.Clear(false);
  same.AddChain(two, 0, 0, Phase::kPreAttention);
  same.AddChain(one, 0, 0, Phase::kPostAttention);
  EXPECT_TRUE(same.done());
  const auto walk = [&g](absl::Span<const CostedOp> first, int layer, int s,
                         absl::Span<const CostedOp> second) {
    StageGraph::Patcher p(&g);
    p.Clear(false);
    p.AddChain(first, s, layer, Phase::kPreAttention);
    p.AddChain(second, s, layer, Phase::kPostAttention);
  };
  EXPECT_DEATH(walk(one, 0, 0, two), "a patch walk of the same topology");  // a phase
  EXPECT_DEATH(walk(two, 1, 0, one), "a patch walk of the same topology");  // a layer
  EXPECT_DEATH(walk(two, 0, 1, one), "a patch walk of the same topology");  // a sub-batch
  EXPECT_DEATH(walk(two, 0, 0, two), "a patch walk of the same topology");  // past the end
}

// A graph whose topology repeats is patched (durations, lanes, names, costs overwritten in
// place) instead of built; after scheduling it must equal the graph a fresh model builds, node
// by node, on random stages: attention on and off per sub-batch, local prefills, serialised
// sub-batches (npu+pim with two), other layer counts, timelines, stage barriers, a chip-wide
// PIM issue limit, serial-GEMV npu-only attention, two pipeline stages. Each layer's end is also
// checked against all of its nodes.
TEST(IterationModel, PatchedGraphEqualsAFreshBuild) {
  std::mt19937_64 rng(20261127);
  struct Variant {
    const char* mode_name;
    void (*edit)(hw::DeviceConfig*);
    int pp = 1;
  };
  const Variant variants[] = {
      {"neupims", nullptr},
      {"npu+pim", nullptr},
      {"npu-only", nullptr},
      {"neupims", nullptr, 2},  // two micro-batches a stage
      {"neupims", [](hw::DeviceConfig* d) { d->stage_barriers = true; }},
      {"npu+pim",
       [](hw::DeviceConfig* d) {
         d->hbm.pim.issue = {hw::PimIssueScope::kChip, 1.0};
       }},
      {"npu-only",
       [](hw::DeviceConfig* d) { d->npu.attention_mapping = hw::AttentionMapping::kSerialGemv; }},
  };
  for (const auto& [mode_name, edit, pp] : variants) {
    SCOPED_TRACE(::testing::Message()
                 << mode_name << (edit != nullptr ? " edited" : "") << " pp " << pp);
    std::unique_ptr<IterationModel> m = MakeModel(mode_name, edit, pp);
    ASSERT_NE(m, nullptr);
    for (int step = 0; step < 30; ++step) {
      SCOPED_TRACE(step);
      const IterationInput in = RandomStage(rng);
      std::unique_ptr<IterationModel> fresh = MakeModel(mode_name, edit, pp);
      ASSERT_NE(fresh, nullptr);
      absl::StatusOr<IterationCost> got = m->Run(in);
      absl::StatusOr<IterationCost> want = fresh->Run(in);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(want.ok()) << want.status();
      // A fresh model builds its graph (with two micro-batches of one topology, the second
      // micro-batch's stage patches the first's graph within the same Run).
      EXPECT_LE(fresh->graphs_patched(), pp - 1);
      ExpectSameCost(*got, *want);
      ExpectSameGraph(m->stage_graph(), fresh->stage_graph());
      ExpectLayerEndsAreTheLatestEnds(m->stage_graph());
    }
    // Both paths were taken.
    EXPECT_GT(m->graphs_patched(), 5);
    EXPECT_GT(m->schedules_built() - m->graphs_patched(), 2);
  }
}

// A patch passes over a sub-batch's chains when its token count (its costed layer) is the one
// the graph's last walk wrote: decode stages whose sizes repeat among few values, with new
// context lengths each time and the topology alternating (one or two sub-batches, so a graph is
// patched again after another graph's walks), must equal a fresh build node for node.
TEST(IterationModel, PatchKeepingTheChainsOfARepeatedLayerEqualsAFreshBuild) {
  std::mt19937_64 rng(20261128);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (const auto& [mode_name, pp] :
       {std::pair{"neupims", 1}, {"npu+pim", 1}, {"npu-only", 1}, {"neupims", 2}}) {
    SCOPED_TRACE(::testing::Message() << mode_name << " pp " << pp);
    std::unique_ptr<IterationModel> m = MakeModel(mode_name, nullptr, pp);
    ASSERT_NE(m, nullptr);
    for (int step = 0; step < 40; ++step) {
      SCOPED_TRACE(step);
      IterationInput in;
      const int sizes[2] = {std::array{3, 5}[uniform(0, 1)], std::array{0, 3, 4}[uniform(0, 2)]};
      for (int s = 0; s < 2; ++s) {
        for (int i = 0; i < sizes[s]; ++i) {
          in.sub_batches[s].push_back({uniform(1, 1500), uniform(0, 31)});
        }
      }
      std::unique_ptr<IterationModel> fresh = MakeModel(mode_name, nullptr, pp);
      ASSERT_NE(fresh, nullptr);
      absl::StatusOr<IterationCost> got = m->Run(in);
      absl::StatusOr<IterationCost> want = fresh->Run(in);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(want.ok()) << want.status();
      ExpectSameCost(*got, *want);
      ExpectSameGraph(m->stage_graph(), fresh->stage_graph());
    }
    // Chains were kept, and chains were rewritten (a patch with a new token count).
    EXPECT_GT(m->chains_kept(), 5);
    EXPECT_LT(m->chains_kept(), 2 * m->graphs_patched() - 5);
  }
}

// Local prefills: the attention ops of prompt lengths seen before (alone or in other lists)
// come from the per-length cache, in prompt order; the stage must equal a fresh model's, which
// lowers the whole list. An invalid prompt still fails with the lowering's message.
TEST(IterationModel, PrefillAttentionOfKnownPromptsEqualsAFreshLowering) {
  for (const char* mode_name : {"neupims", "npu-only"}) {
    SCOPED_TRACE(mode_name);
    std::unique_ptr<IterationModel> m = MakeModel(mode_name);
    ASSERT_NE(m, nullptr);
    const std::vector<std::vector<int64_t>> lists = {
        {1500}, {700, 200}, {1500, 700}, {200, 1500, 700, 1500}};
    for (const std::vector<int64_t>& prompts : lists) {
      SCOPED_TRACE(prompts.size());
      IterationInput in;
      in.sub_batches[0] = {{300, 1}, {900, 2}};
      in.prefill_prompts = prompts;
      ExpectRunEqualsAFreshModel(m.get(), mode_name, in, /*compare_graphs=*/true);
    }
    // The last list's score GEMMs of layer 0 follow its prompts 200, 1500, 700, 1500.
    std::vector<double> scores;
    const StageGraph& g = m->stage_graph();
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const NodeInfo& info = g.node_info()[i];
      if (info.kind == NodeKind::kPrefillAttention && info.layer == 0 &&
          std::string_view(info.name) == "attn_scores") {
        scores.push_back(g.nodes()[i].dur_ns);
      }
    }
    ASSERT_EQ(scores.size(), 4u);
    EXPECT_LT(scores[0], scores[2]);
    EXPECT_LT(scores[2], scores[1]);
    EXPECT_EQ(scores[1], scores[3]);
    IterationInput bad;
    bad.prefill_prompts = {1500, 0};
    absl::StatusOr<IterationCost> c = m->Run(bad);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("prefill prompt 1 has 0 tokens"), std::string::npos)
        << c.status();
  }
}

// Prefill-only inputs (the standalone prefill NPUs') come from RunPrefill's memo once seen: each
// answer, first or repeated, equals a fresh model's (computed with an empty memo); a list that
// fails is not remembered (asked again, it fails again instead of answering a default cost); inputs
// with decode items or a timeline are refused.
TEST(IterationModel, PrefillMemoAnswersEqualAFreshRunAndFailuresAreNotKept) {
  std::unique_ptr<IterationModel> m = MakeModel("npu-only");
  ASSERT_NE(m, nullptr);
  const std::vector<std::vector<int64_t>> lists = {{1500},          {700, 200}, {1500},
                                                   {200, 700},      {700, 200}, {9, 8, 7, 6, 5},
                                                   {9, 8, 7, 6, 5}, {1500, 700}};
  for (int layers : {0, 2}) {
    for (const std::vector<int64_t>& prompts : lists) {
      SCOPED_TRACE(absl::StrCat(layers, " layers, ", prompts.size(), " prompts"));
      IterationInput in;
      in.prefill_prompts = prompts;
      in.layers = layers;
      absl::StatusOr<const IterationCost*> got = m->RunPrefill(in);
      ASSERT_TRUE(got.ok()) << got.status();
      std::unique_ptr<IterationModel> fresh = MakeModel("npu-only");
      ASSERT_NE(fresh, nullptr);
      absl::StatusOr<IterationCost> want = fresh->Run(in);  // an empty memo: computed anew
      ASSERT_TRUE(want.ok()) << want.status();
      ExpectSameCost(**got, *want);
    }
  }
  IterationInput bad;
  bad.prefill_prompts = {1500, 0};
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<const IterationCost*> c = m->RunPrefill(bad);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("prefill prompt 1 has 0 tokens"), std::string::npos)
        << c.status();
  }
  IterationInput decode;
  decode.sub_batches[0] = {{300, 0}};
  decode.prefill_prompts = {100};
  EXPECT_EQ(m->RunPrefill(decode).status().code(), absl::StatusCode::kInvalidArgument);
  IterationInput timeline;
  timeline.prefill_prompts = {100};
  timeline.record_timeline = true;
  EXPECT_EQ(m->RunPrefill(timeline).status().code(), absl::StatusCode::kInvalidArgument);
}

// The work of a stage as the graph's nodes cost it, node by node (what StageGraph::Account
// summed before the per-layer sums): each node's cost (PIM channel time from its channel
// loads), the interior layer 2 once more per extrapolated layer.
HwCost NodeByNodeWork(const StageGraph& g, int64_t extra_layers) {
  HwCost total;
  for (const NodeInfo& n : g.node_info()) {
    const double copies = 1.0 + (n.layer == 2 ? static_cast<double>(extra_layers) : 0.0);
    if (n.channel_ns != nullptr) {
      for (double c : *n.channel_ns) total.pim_channel_busy_ns += copies * c;
    }
    if (n.cost != nullptr) {
      HwCost c = *n.cost;
      c.pim_channel_busy_ns = 0;  // counted from the channel loads above
      total.AddScaledFields(c, copies);
    }
  }
  return total;
}

// A stage's work is summed per layer from each costed layer's sums (AccountStage); it must
// equal the node-by-node sum over its graph to rounding, in every mode, with prefills and over
// five scheduled layers extrapolated to 32.
TEST(IterationModel, AccountedWorkEqualsTheSumOverTheGraphsNodes) {
  std::mt19937_64 rng(7);
  for (const char* mode_name : {"neupims", "npu+pim", "npu-only"}) {
    SCOPED_TRACE(mode_name);
    std::unique_ptr<IterationModel> m = MakeModel(mode_name);
    ASSERT_NE(m, nullptr);
    for (int step = 0; step < 12; ++step) {
      SCOPED_TRACE(step);
      IterationInput in = RandomStage(rng);
      in.layers = 32;  // no LM head: the graph's nodes are all of the stage's work
      in.record_timeline = step % 3 == 0;
      absl::StatusOr<IterationCost> got = m->Run(in);
      ASSERT_TRUE(got.ok()) << got.status();
      const int64_t extra = in.record_timeline ? 0 : 32 - 5;
      HwCost want = NodeByNodeWork(m->stage_graph(), extra);
      want.ScaleEnergy(4);  // the iteration's energies are the tp = 4 group's
      auto near = [](double a, double b) { return std::abs(a - b) <= 1e-12 * std::abs(b); };
      // Every HwCost field (one list: a new counter is checked here too) but the two that
      // also hold the iteration's idle power over its duration.
#define NEUPIMS_EXPECT_NEAR_FIELD(name, kind)                                                    \
  if (std::string_view(#name) != "npu_static_j" &&                                               \
      std::string_view(#name) != "dram_background_j") {                                          \
    EXPECT_TRUE(near(got->name, want.name)) << #name << " " << got->name << " vs " << want.name; \
  }
      NEUPIMS_HW_COST_FIELDS(NEUPIMS_EXPECT_NEAR_FIELD)
#undef NEUPIMS_EXPECT_NEAR_FIELD
      EXPECT_GT(got->systolic_busy_ns, 0);
    }
  }
}

}  // namespace
}  // namespace neupims::engine
