// Speed of the serving engine itself (not of the simulated hardware): one whole-model decode
// iteration of the iteration model (engine/iteration_model.h) at a given batch, with the
// context lengths of a ShareGPT-like mix, on the default device (GPT3-7B, TP 4).
// Run: build/release/bench/engine_bench --benchmark_repetitions=5
// --benchmark_report_aggregates_only
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/engine.h"
#include "engine/iteration_model.h"
#include "scheduler/request.h"

namespace neupims::engine {
namespace {

// modes: 0 neupims (two sub-batches from batch 256 on), 1 npu+pim, 2 npu-only.
std::unique_ptr<IterationModel> Model(int mode) {
  EngineOptions o;
  o.mode = mode == 0   ? SystemModeKind::kNeuPims
           : mode == 1 ? SystemModeKind::kNpuPim
                       : SystemModeKind::kNpuOnly;
  auto e = Engine::Create(o);
  if (!e.ok()) return nullptr;
  auto m = IterationModel::Create((*e)->iteration_model().options());
  return m.ok() ? std::move(*m) : nullptr;
}

// A decode batch as the engine passes it: the scheduler's requests, read in place by the model.
struct Batch {
  std::vector<scheduler::Request> requests;
  std::array<std::vector<const scheduler::Request*>, 2> lists;
  IterationInput in;
};

void FillBatch(int batch, bool two_sub_batches, int channels, Batch* b) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> len(6.3, 0.8);  // median ~545 tokens
  b->requests.resize(batch);                          // sized before any pointer into it is taken
  for (int i = 0; i < batch; ++i) {
    scheduler::Request& r = b->requests[i];
    r.prompt_tokens = std::clamp<int64_t>(static_cast<int64_t>(len(rng)), 1, 2000);
    r.channel = i % channels;
    b->lists[two_sub_batches ? i % 2 : 0].push_back(&r);
  }
  for (int s = 0; s < 2; ++s) b->in.decode[s] = b->lists[s];
}

// The model of mode state.range(0) and a batch of state.range(1) requests on its channels
// (two sub-batches in NeuPIMs mode from 256 requests); null, with the benchmark skipped, when
// the model cannot be created.
std::unique_ptr<IterationModel> SetUp(benchmark::State& state, Batch* b) {
  const int mode = static_cast<int>(state.range(0));
  const int batch = static_cast<int>(state.range(1));
  std::unique_ptr<IterationModel> m = Model(mode);
  if (m == nullptr) {
    state.SkipWithError("cannot create the model");
    return nullptr;
  }
  FillBatch(batch, mode == 0 && batch >= 256, m->options().device.hbm.org.channels, b);
  return m;
}

void BM_DecodeIteration(benchmark::State& state) {
  Batch b;
  std::unique_ptr<IterationModel> m = SetUp(state, &b);
  if (m == nullptr) return;
  const IterationInput& in = b.in;
  const int batch = static_cast<int>(state.range(1));
  if (!m->Run(in).ok()) {  // warm the caches
    state.SkipWithError("iteration failed");
    return;
  }
  for (auto _ : state) {
    auto c = m->Run(in);
    benchmark::DoNotOptimize(c);
  }
  state.counters["requests_per_second"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

// The same batch decoding: every request grows by one token per iteration (restarting after
// 48 tokens, so lengths stay within the context), and the busiest channel's attention and the
// softmax width cross their steps as in a real run, so most iterations build and schedule their
// graph (BM_DecodeIteration repeats one input, whose schedule is replayed after the first run).
void BM_DecodeIterationGrowing(benchmark::State& state) {
  Batch b;
  std::unique_ptr<IterationModel> m = SetUp(state, &b);
  if (m == nullptr) return;
  const IterationInput& in = b.in;
  int step = 0;
  const int64_t built_before = m->schedules_built();
  for (auto _ : state) {
    auto c = m->Run(in);
    benchmark::DoNotOptimize(c);
    step = (step + 1) % 48;
    for (scheduler::Request& r : b.requests) r.generated = step;
  }
  state.counters["scheduled_fraction"] =
      static_cast<double>(m->schedules_built() - built_before) /
      static_cast<double>(std::max<int64_t>(1, state.iterations()));
}
BENCHMARK(BM_DecodeIterationGrowing)
    ->ArgNames({"mode", "batch"})
    ->Args({0, 256})
    ->Args({0, 64})
    ->Args({1, 256})
    ->Args({2, 256});

BENCHMARK(BM_DecodeIteration)
    ->ArgNames({"mode", "batch"})
    ->Args({0, 256})
    ->Args({0, 64})
    ->Args({1, 256})
    ->Args({2, 256});

}  // namespace
}  // namespace neupims::engine

BENCHMARK_MAIN();
