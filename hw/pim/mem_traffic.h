// Synthetic MEM traffic: the NPU's reads and writes that share a PIM channel with PIM work.
//
// "stream" models weight/activation streaming (sequential 64 B lines: the 16 bursts of a row,
// then the next bank, alternating ranks and bank groups), "random" models scattered accesses.
// Requests arrive at `demand` x the channel's peak data-bus rate until `limit` requests.
#ifndef NEUPIMS_HW_PIM_MEM_TRAFFIC_H_
#define NEUPIMS_HW_PIM_MEM_TRAFFIC_H_

#include <cstdint>
#include <random>

#include "common/enum_names.h"
#include "hw/dram/hbm_spec.h"
#include "hw/pim/channel_controller.h"

namespace neupims::hw {

struct MemTraffic {
  enum class Pattern { kStream, kRandom };
  double demand = 0;          // fraction of peak channel bandwidth requested, in [0, 1]
  double write_fraction = 0;  // share of requests that are writes
  Pattern pattern = Pattern::kStream;
  uint64_t seed = 1;

  bool active() const { return demand > 0; }
};
// "stream", "random" (the CLI's --mem-pattern).
const EnumNames<MemTraffic::Pattern>& MemPatternNames();

class SyntheticTraffic : public MemTrafficSource {
 public:
  SyntheticTraffic(const HbmSpec& spec, const MemTraffic& traffic, int64_t limit);
  Cycles NextArrival() const override;
  MemRequest Pop() override;
  int64_t issued() const { return issued_; }

 private:
  const HbmOrganization org_;
  MemTraffic traffic_;
  double interval_;
  int64_t limit_;
  int64_t issued_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_PIM_MEM_TRAFFIC_H_
