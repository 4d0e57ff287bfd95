// Speed of the CNN partitioners (docs/benchmarks.md). The bounds: ResNet152 over 8
// devices, the exact DP < 1 s and the published DP < 50 ms on one core. Two kinds of problem:
//  - synthetic profiles with ResNet152's shape (209 layers) and a chosen number of device
//    kinds, independent of the device models;
//  - the real ResNet152 profile on configs/clusters/eight-kinds.json (eight all-different
//    devices: every subset of them is a distinct state) with each of DONNA's link media.
#include <cmath>
#include <random>

#include "benchmark/benchmark.h"
#include "engine/cnn/profiler.h"
#include "hw/cluster/cluster.h"
#include "hw/link/link.h"
#include "models/cnn/graph.h"
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

const char* const kMedia[] = {"pcie5", "hb-wcc", "lb-wcc"};

// ResNet152 on eight-kinds with every link on medium range(0) of kMedia.
Profile EightKinds(int medium) {
  auto graph = neupims::models::cnn::LoadGraph("resnet152");
  auto cluster = neupims::hw::cluster::LoadCluster("eight-kinds");
  auto link = neupims::hw::link::BuiltinMedium(kMedia[medium]);
  if (!graph.ok() || !cluster.ok() || !link.ok()) std::abort();
  for (auto& row : cluster->link) {
    for (auto& l : row) l = *link;
  }
  auto profile = neupims::engine::cnn::BuildProfile(*graph, *cluster);
  if (!profile.ok()) std::abort();
  return *profile;
}

// range(0): medium (0 pcie5, 1 hb-wcc, 2 lb-wcc); range(1): alpha in tenths.
template <bool kExact>
void BM_ResNet152EightKinds(benchmark::State& state) {
  const Profile p = EightKinds(static_cast<int>(state.range(0)));
  const double alpha = static_cast<double>(state.range(1)) / 10;
  state.SetLabel(std::string(kMedia[state.range(0)]) + " alpha " + std::to_string(alpha));
  for (auto _ : state) {
    benchmark::DoNotOptimize(kExact ? neupims::scheduler::partition::DonnaExact(p, alpha)
                                    : neupims::scheduler::partition::DonnaPublished(p, alpha));
  }
}
void Media(benchmark::internal::Benchmark* b) {
  for (int medium = 0; medium < 3; ++medium) {
    for (int alpha : {2, 5, 8, 10}) b->Args({medium, alpha});
  }
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_ResNet152EightKinds<false>)->Apply(Media)->Name("BM_RealPublished");
BENCHMARK(BM_ResNet152EightKinds<true>)->Apply(Media)->Name("BM_RealExact");

}  // namespace

BENCHMARK_MAIN();
