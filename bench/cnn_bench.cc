// Speed of the DNNVM compiler (docs/benchmarks.md): compiling and costing a whole network for
// an FPGA device, per strategy. The bound: ResNet152 with the optimal strategy in under
// 100 ms on one core.
#include <string>

#include "benchmark/benchmark.h"
#include "engine/cnn/fpga_compiler.h"
#include "hw/fpga/fpga_spec.h"
#include "models/cnn/fusion.h"
#include "models/cnn/graph.h"

namespace {

using neupims::models::cnn::StrategyKind;

void BM_Compile(benchmark::State& state, const std::string& model, StrategyKind strategy) {
  const auto graph = neupims::models::cnn::LoadGraph(model);
  const auto spec = neupims::hw::fpga::LoadFpgaSpec("zu2");
  if (!graph.ok() || !spec.ok()) {
    state.SkipWithError("cannot load the graph or the device");
    return;
  }
  for (auto _ : state) {
    auto c = neupims::engine::cnn::CompileForFpga(*graph, *spec, strategy);
    benchmark::DoNotOptimize(c);
  }
}

void BM_Load(benchmark::State& state, const std::string& model) {
  for (auto _ : state) {
    auto g = neupims::models::cnn::LoadGraph(model);
    benchmark::DoNotOptimize(g);
  }
}

void BM_EnumerateFusions(benchmark::State& state, const std::string& model) {
  const auto graph = neupims::models::cnn::Canonicalize(*neupims::models::cnn::LoadGraph(model));
  for (auto _ : state) {
    auto f = neupims::models::cnn::EnumerateFusions(*graph);
    benchmark::DoNotOptimize(f);
  }
}

BENCHMARK_CAPTURE(BM_Load, resnet152, std::string("resnet152"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EnumerateFusions, resnet152, std::string("resnet152"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, resnet152_none, std::string("resnet152"), StrategyKind::kNone)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, resnet152_greedy, std::string("resnet152"), StrategyKind::kGreedy)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, resnet152_optimal, std::string("resnet152"), StrategyKind::kOptimal)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, googlenet_optimal, std::string("googlenet"), StrategyKind::kOptimal)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, vgg16_optimal, std::string("vgg16"), StrategyKind::kOptimal)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
