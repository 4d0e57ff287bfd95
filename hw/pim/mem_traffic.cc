#include "hw/pim/mem_traffic.h"

#include <algorithm>
#include <cmath>

namespace neupims::hw {

const EnumNames<MemTraffic::Pattern>& MemPatternNames() {
  static constexpr EnumName<MemTraffic::Pattern> kEntries[] = {
      {"stream", MemTraffic::Pattern::kStream}, {"random", MemTraffic::Pattern::kRandom}};
  static constexpr EnumNames<MemTraffic::Pattern> kNames("MEM traffic pattern", kEntries);
  return kNames;
}

SyntheticTraffic::SyntheticTraffic(const HbmSpec& spec, const MemTraffic& traffic, int64_t limit)
    : org_(spec.org),
      traffic_(traffic),
      interval_(traffic.demand > 0 ? spec.timing.tBL / std::min(1.0, traffic.demand) : 0),
      limit_(traffic.demand > 0 ? limit : 0),
      rng_(traffic.seed) {}

Cycles SyntheticTraffic::NextArrival() const {
  if (issued_ >= limit_) return kNeverCycle;
  return static_cast<Cycles>(std::floor(static_cast<double>(issued_) * interval_));
}

MemRequest SyntheticTraffic::Pop() {
  MemRequest r;
  r.id = issued_;
  r.arrival = NextArrival();
  const int64_t mem_rows = std::max<int64_t>(1, org_.rows / 2);  // KV/PIM rows use the upper half
  if (traffic_.pattern == MemTraffic::Pattern::kStream) {
    const int64_t bursts = org_.bursts_per_row();
    const int64_t n = issued_;
    r.col = static_cast<int16_t>(n % bursts);
    const int64_t slot = (n / bursts) % org_.banks_per_channel();
    r.rank = static_cast<int>(slot % org_.ranks);
    r.bank_group = static_cast<int>((slot / org_.ranks) % org_.bank_groups);
    r.bank = static_cast<int>(slot / (org_.ranks * org_.bank_groups));
    r.row = static_cast<int32_t>((n / (bursts * org_.banks_per_channel())) % mem_rows);
  } else {
    r.rank = static_cast<int>(rng_() % org_.ranks);
    r.bank_group = static_cast<int>(rng_() % org_.bank_groups);
    r.bank = static_cast<int>(rng_() % org_.banks_per_group);
    r.row = static_cast<int32_t>(rng_() % mem_rows);
    r.col = static_cast<int16_t>(rng_() % org_.bursts_per_row());
  }
  if (traffic_.write_fraction > 0) {
    r.is_write = std::uniform_real_distribution<double>(0, 1)(rng_) < traffic_.write_fraction;
  }
  ++issued_;
  return r;
}

}  // namespace neupims::hw
