#include "scheduler/batching.h"

namespace neupims::scheduler {

std::vector<int> GreedyMinLoad(std::vector<double>& channel_load,
                               const std::vector<double>& request_load,
                               const std::function<bool(int request, int channel)>& fits) {
  std::vector<int> out(request_load.size(), -1);
  for (size_t r = 0; r < request_load.size(); ++r) {
    const int best =
        MinLoadChannel(channel_load, [&](int c) { return fits(static_cast<int>(r), c); });
    out[r] = best;
    if (best >= 0) channel_load[best] += request_load[r];
  }
  return out;
}

std::vector<int> RoundRobin(int channels, int requests, int* cursor,
                            const std::function<bool(int request, int channel)>& fits) {
  std::vector<int> out(requests, -1);
  for (int r = 0; r < requests; ++r) {
    out[r] = RoundRobinChannel(channels, cursor, [&](int c) { return fits(r, c); });
  }
  return out;
}

}  // namespace neupims::scheduler
