#include "scheduler/batching.h"

namespace neupims::scheduler {

std::vector<int> GreedyMinLoad(std::vector<double>& channel_load,
                               const std::vector<double>& request_load,
                               const std::function<bool(int request, int channel)>& fits) {
  std::vector<int> out(request_load.size(), -1);
  for (size_t r = 0; r < request_load.size(); ++r) {
    int best = -1;
    for (int c = 0; c < static_cast<int>(channel_load.size()); ++c) {
      if (!fits(static_cast<int>(r), c)) continue;
      if (best < 0 || channel_load[c] < channel_load[best]) best = c;
    }
    out[r] = best;
    if (best >= 0) channel_load[best] += request_load[r];
  }
  return out;
}

std::vector<int> RoundRobin(int channels, int requests, int* cursor,
                            const std::function<bool(int request, int channel)>& fits) {
  std::vector<int> out(requests, -1);
  for (int r = 0; r < requests; ++r) {
    for (int k = 0; k < channels; ++k) {
      const int c = (*cursor + k) % channels;
      if (fits(r, c)) {
        out[r] = c;
        *cursor = (c + 1) % channels;
        break;
      }
    }
  }
  return out;
}

}  // namespace neupims::scheduler
