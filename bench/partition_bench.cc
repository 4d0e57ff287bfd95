// Speed of the CNN partitioners (docs/benchmarks.md). The bounds: ResNet152 over 8
// devices, the exact DP < 1 s and the published DP < 50 ms on one core. The profile here is
// synthetic with ResNet152's shape (209 layers) so the benchmark does not depend on the device
// models; `neupims cnn pareto` runs both on the real profiles.
#include <cmath>
#include <random>

#include "benchmark/benchmark.h"
#include "scheduler/partition/donna.h"

namespace {

using neupims::scheduler::partition::LinkCost;
using neupims::scheduler::partition::Profile;

// `kinds` distinct device types, `devices` devices dealt round robin over them (several of a
// kind, as in DONNA's clusters {2 CPU, 2 GPU, ...}).
Profile Synthetic(int layers, int devices, int kinds) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0.1, 10);
  Profile p;
  p.model = "synthetic";
  for (int l = 0; l < layers; ++l) p.layers.push_back({"l", 100000, 100000});
  for (int d = 0; d < devices; ++d) p.devices.push_back({"d", "x", int64_t{1} << 40});
  p.time_s.assign(layers, std::vector<double>(devices));
  p.energy_j = p.time_s;
  for (int l = 0; l < layers; ++l) {
    for (int d = 0; d < devices; ++d) {
      // Device d is 2^(d/2) times slower and 2^(d/2) times more efficient: a real trade-off.
      const int k = d % kinds;
      if (k != d) {  // a copy of its kind
        p.time_s[l][d] = p.time_s[l][k];
        p.energy_j[l][d] = p.energy_j[l][k];
        continue;
      }
      p.time_s[l][d] = u(rng) * 1e-4 * std::pow(2, k / 2.0);
      p.energy_j[l][d] = u(rng) * 1e-3 / std::pow(2, k / 2.0);
    }
  }
  p.cut_bytes.assign(layers - 1, 200000);
  p.link.assign(devices, std::vector<LinkCost>(devices, LinkCost{"hb-wcc", 1e9, 1e-7, 0}));
  return p;
}

void BM_Published(benchmark::State& state) {
  const Profile p =
      Synthetic(209, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state)
    benchmark::DoNotOptimize(neupims::scheduler::partition::DonnaPublished(p, 0.8));
}

void BM_Exact(benchmark::State& state) {
  const Profile p =
      Synthetic(209, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  for (auto _ : state) benchmark::DoNotOptimize(neupims::scheduler::partition::DonnaExact(p, 0.8));
}

// {devices, kinds}: 8 devices of 3 kinds (DONNA-like), 4 and 8 all different.
BENCHMARK(BM_Published)->Args({8, 3})->Args({4, 4})->Args({8, 8})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Exact)->Args({8, 3})->Args({4, 4})->Args({8, 8})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
