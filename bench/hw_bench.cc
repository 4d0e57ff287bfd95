// Speed of the hardware models themselves (not of the simulated hardware):
//  - the command-level PIM model: DRAM/PIM commands issued per second of wall time,
//  - the analytic PIM model: one request-layer attention-latency query,
//  - the NPU models: one GEMM query.
// Run: build/release/bench/hw_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <cstdint>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "hw/device.h"
#include "hw/npu/npu_model.h"
#include "hw/pim/channel_controller.h"
#include "hw/pim/mem_traffic.h"
#include "hw/pim/pim_model.h"

namespace neupims::hw {
namespace {

HbmSpec Spec(RowBufferMode rb, PimCommandSet cs) {
  HbmSpec s;
  s.pim.row_buffers = rb;
  s.pim.command_set = cs;
  return s;
}

// Issues the commands of a GPT3-7B/TP4 attention (seq 2048) on one channel, optionally with
// concurrent streaming MEM traffic; counters report commands per second.
void BM_CommandLevelIssue(benchmark::State& state) {
  const HbmSpec spec = Spec(state.range(0) ? RowBufferMode::kDual : RowBufferMode::kSingle,
                            state.range(0) ? PimCommandSet::kNeuPims : PimCommandSet::kNewton);
  const double demand = static_cast<double>(state.range(1)) / 100.0;
  auto program = *PlanAttention({2048, 8, 8, 128}, PimGeometry::FromSpec(spec));
  int64_t commands = 0;
  for (auto _ : state) {
    ChannelController c(spec, {});
    MemTraffic traffic;
    traffic.demand = demand;
    SyntheticTraffic source(spec, traffic, INT64_MAX);
    if (demand > 0) c.SetTrafficSource(&source);
    c.SubmitPim(0, program);
    c.RunUntilPimDone();
    for (int64_t n : c.stats().commands) commands += n;
  }
  state.counters["commands_per_second"] =
      benchmark::Counter(static_cast<double>(commands), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CommandLevelIssue)
    ->ArgNames({"dual", "mem_demand_pct"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({1, 50})
    ->Unit(benchmark::kMillisecond);

// One attention-latency query of the analytic model for one request-layer, over a spread of
// sequence lengths (as the engine asks them).
void BM_AnalyticAttentionQuery(benchmark::State& state) {
  auto model = CreateAnalyticPimModel(Spec(RowBufferMode::kDual, PimCommandSet::kNeuPims), {});
  std::mt19937 rng(1);
  std::vector<AttentionShape> shapes;
  for (int i = 0; i < 1024; ++i) {
    shapes.push_back({1 + static_cast<int64_t>(rng() % 4096), 8, 8, 128});
  }
  for (const auto& s : shapes) benchmark::DoNotOptimize(model->AttentionCycles(s));  // warm
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(model->AttentionCycles(shapes[i++ & 1023]));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AnalyticAttentionQuery);

void BM_NpuGemmQuery(benchmark::State& state) {
  auto device = LoadDeviceConfig("neupims");
  auto npu =
      state.range(0) ? CreateTiledNpuModel(device->npu) : CreateAnalyticNpuModel(device->npu);
  for (auto _ : state) benchmark::DoNotOptimize(npu->Gemm({256, 4096, 12288, true, false}));
}
BENCHMARK(BM_NpuGemmQuery)->ArgName("tiled")->Arg(0)->Arg(1);

}  // namespace
}  // namespace neupims::hw

BENCHMARK_MAIN();
