// Random DONNA problems for the partitioner tests (donna_test.cc, donna_bounds_test.cc).
#ifndef NEUPIMS_TESTS_SCHEDULER_PARTITION_RANDOM_PROFILE_H_
#define NEUPIMS_TESTS_SCHEDULER_PARTITION_RANDOM_PROFILE_H_

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "scheduler/partition/profile.h"

namespace neupims::scheduler::partition {

inline LinkCost Link(double bytes_per_s, double joules_per_bit) {
  return {"test", bytes_per_s, joules_per_bit, 0};
}

// A random problem: costs spread over three orders of magnitude, some layers a device cannot
// run, memories that sometimes force a split, links from wireless to PCIe.
inline Profile RandomProfile(std::mt19937_64& rng, int layers, int devices) {
  std::uniform_real_distribution<double> cost(0.1, 10), log10(-3, 0);
  Profile p;
  p.model = "random";
  int64_t total_weights = 0;
  for (int l = 0; l < layers; ++l) {
    p.layers.push_back({"l" + std::to_string(l),
                        std::uniform_int_distribution<int64_t>(1, 1000)(rng),
                        std::uniform_int_distribution<int64_t>(0, 100)(rng)});
    total_weights += p.layers.back().weight_bytes;
  }
  for (int d = 0; d < devices; ++d) {
    const bool small = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
    p.devices.push_back(
        {"d" + std::to_string(d), "test", small ? total_weights / 2 : total_weights});
  }
  p.time_s.assign(layers, std::vector<double>(devices));
  p.energy_j = p.time_s;
  for (int l = 0; l < layers; ++l) {
    for (int d = 0; d < devices; ++d) {
      const bool runs = std::uniform_int_distribution<int>(0, 9)(rng) != 0;
      p.time_s[l][d] = runs ? cost(rng) * 1e-3 * std::pow(10, log10(rng)) : kCannotRun;
      p.energy_j[l][d] = runs ? cost(rng) * 1e-3 : kCannotRun;
    }
  }
  for (int l = 0; l + 1 < layers; ++l) {
    p.cut_bytes.push_back(std::uniform_int_distribution<int64_t>(1000, 1000000)(rng));
  }
  p.link.assign(devices, std::vector<LinkCost>(devices));
  for (int a = 0; a < devices; ++a) {
    for (int b = 0; b < devices; ++b) {
      p.link[a][b] = Link(std::pow(10, std::uniform_real_distribution<double>(6, 10)(rng)),
                          std::pow(10, std::uniform_real_distribution<double>(-12, -8)(rng)));
    }
  }
  return p;
}

// The profile with its links drawn from `media` random media, link a -> b on medium
// (a + b) % media: with one medium every device is reached over the same links, with two the
// devices of one parity are, so the searches share their next devices' states
// (GroupByIncomingLinks in donna.cc).
inline Profile WithMedia(Profile p, std::mt19937_64& rng, int media) {
  std::vector<LinkCost> drawn;
  for (int m = 0; m < media; ++m) {
    drawn.push_back(Link(std::pow(10, std::uniform_real_distribution<double>(6, 10)(rng)),
                         std::pow(10, std::uniform_real_distribution<double>(-12, -8)(rng))));
  }
  const size_t n = p.devices.size();
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) p.link[a][b] = drawn[(a + b) % media];
  }
  return p;
}

}  // namespace neupims::scheduler::partition

#endif  // NEUPIMS_TESTS_SCHEDULER_PARTITION_RANDOM_PROFILE_H_
