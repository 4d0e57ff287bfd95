#include "engine/hw_cost.h"

#include <algorithm>

namespace neupims::engine {

HwCost Growth(const HwCost& current, const HwCost& previous) {
  HwCost d = current - previous;
#define NEUPIMS_HW_COST_CLAMP(name, kind) d.name = std::max(0.0, d.name);
  NEUPIMS_HW_COST_FIELDS(NEUPIMS_HW_COST_CLAMP)
#undef NEUPIMS_HW_COST_CLAMP
  for (int64_t& c : d.pim_commands) c = std::max<int64_t>(0, c);
  return d;
}

}  // namespace neupims::engine
