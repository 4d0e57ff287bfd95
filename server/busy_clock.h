// BusyClock: simulated seconds per wall-clock second while the engine has work.
//
// Role: feeds neupims:sim_wall_time_ratio. Dividing the simulated clock by the wall time since
// start would count the wall time a server sits idle waiting for clients (1.1x after a burst that
// `neupims simulate` runs at ~230x), so only the stretches during which the engine had work count.
// The engine runner reports its state whenever it may have changed; pure arithmetic, no clock.
#ifndef NEUPIMS_SERVER_BUSY_CLOCK_H_
#define NEUPIMS_SERVER_BUSY_CLOCK_H_

namespace neupims::server {

struct ClockReading {
  double wall_s = 0;  // wall seconds since the engine started
  double sim_s = 0;   // the engine's simulated time, seconds
};

class BusyClock {
 public:
  // From `at` on, the engine is busy (has live requests or pending events) or idle. The stretch
  // since the previous call counts if the engine was busy during it.
  void Observe(bool busy, const ClockReading& at);

  double busy_wall_s() const { return busy_wall_s_; }
  double busy_sim_s() const { return busy_sim_s_; }
  // busy_sim_s / busy_wall_s; 0 before any busy wall time.
  double ratio() const;

 private:
  bool busy_ = false;
  bool started_ = false;
  ClockReading last_;
  double busy_wall_s_ = 0;
  double busy_sim_s_ = 0;
};

}  // namespace neupims::server

#endif  // NEUPIMS_SERVER_BUSY_CLOCK_H_
