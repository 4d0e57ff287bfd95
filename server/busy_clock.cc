#include "server/busy_clock.h"

#include <algorithm>

namespace neupims::server {

void BusyClock::Observe(bool busy, const ClockReading& at) {
  if (started_ && busy_) {
    // Clocks never run backwards; a reading that seems to is ignored rather than subtracted.
    busy_wall_s_ += std::max(0.0, at.wall_s - last_.wall_s);
    busy_sim_s_ += std::max(0.0, at.sim_s - last_.sim_s);
  }
  started_ = true;
  busy_ = busy;
  last_.wall_s = std::max(last_.wall_s, at.wall_s);
  last_.sim_s = std::max(last_.sim_s, at.sim_s);
}

double BusyClock::ratio() const { return busy_wall_s_ > 0 ? busy_sim_s_ / busy_wall_s_ : 0.0; }

}  // namespace neupims::server
