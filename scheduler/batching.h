// The batching algorithms of NeuPIMs sec. 6.4-6.5 as pure functions (tested against hand cases).
#ifndef NEUPIMS_SCHEDULER_BATCHING_H_
#define NEUPIMS_SCHEDULER_BATCHING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace neupims::scheduler {

// One request of Algorithm 2: the channel with the least load among those where `fits(c)`
// (ties to the lowest index), or -1. Loads are not changed. A template, so that the scheduler's
// per-admission call inlines `fits` (no std::function per channel).
template <typename Fits>
int MinLoadChannel(const std::vector<double>& channel_load, Fits&& fits) {
  int best = -1;
  for (int c = 0; c < static_cast<int>(channel_load.size()); ++c) {
    // The load first: `fits` (the scheduler's KV checks) is asked only of a channel that would
    // become the best; `best` is always a channel that fits, so the answer is the same.
    if (best >= 0 && !(channel_load[c] < channel_load[best])) continue;
    if (fits(c)) best = c;
  }
  return best;
}

// One request of the round-robin policy: the first channel from `*cursor` on where `fits(c)`,
// which also moves the cursor past it; -1 (cursor unchanged) if none fits.
template <typename Fits>
int RoundRobinChannel(int channels, int* cursor, Fits&& fits) {
  for (int k = 0; k < channels; ++k) {
    const int c = (*cursor + k) % channels;
    if (fits(c)) {
      *cursor = (c + 1) % channels;
      return c;
    }
  }
  return -1;
}

// Algorithm 2 (greedy min-load bin packing): requests, in the given order (the caller sorts
// them by decreasing length), each go to the channel with the least load among those where
// `fits(request, channel)`; that channel's load grows by the request's load. Returns the channel
// of each request (-1 if it fits nowhere). Ties go to the lowest channel index.
std::vector<int> GreedyMinLoad(std::vector<double>& channel_load,
                               const std::vector<double>& request_load,
                               const std::function<bool(int request, int channel)>& fits);

// Round-robin (the NPU+PIM baseline): requests take channels in rotation from `*cursor`,
// skipping channels where they do not fit.
std::vector<int> RoundRobin(int channels, int requests, int* cursor,
                            const std::function<bool(int request, int channel)>& fits);

// Algorithm 3 (sub-batch partitioning): each channel's requests are split in halves, the first
// half to SB1 and the rest to SB2; odd counts alternate between rounding up and down (starting
// with up) so both sub-batches stay balanced in size and per-channel load.

// The share of SB1 of a channel with `count` requests, channels taken in index order; `*turn`
// starts true and carries the alternation of odd counts from one channel to the next.
inline size_t SubBatchHalf(size_t count, bool* turn) {
  size_t half = count / 2;
  if (count % 2 != 0) {
    if (*turn) ++half;  // ceil on this turn, floor on the next
    *turn = !*turn;
  }
  return half;
}
// Algorithm 3 over per-channel lists: appends to *first and *second.
template <typename T>
void PartitionSubBatches(const std::vector<std::vector<T>>& per_channel, std::vector<T>* first,
                         std::vector<T>* second) {
  bool turn = true;
  for (const std::vector<T>& reqs : per_channel) {
    const size_t half = SubBatchHalf(reqs.size(), &turn);
    first->insert(first->end(), reqs.begin(), reqs.begin() + static_cast<long>(half));
    second->insert(second->end(), reqs.begin() + static_cast<long>(half), reqs.end());
  }
}

// The same split of `items` (each in channel `channel_of(item)`, 0 <= channel < channels; a
// channel's requests in their order in `items`) without building the per-channel lists: a count
// per channel, then each item written straight to its place. `*first` and `*second` are
// overwritten; `placed(item, s)` is called for each item with its sub-batch s (0 or 1).
// `scratch` is the caller's, reused between steps (the scheduler's per-iteration path).
template <typename T, typename ChannelOf, typename Placed>
void PartitionSubBatchesByChannel(const std::vector<T>& items, int channels, ChannelOf channel_of,
                                  Placed placed, std::vector<T>* first, std::vector<T>* second,
                                  std::vector<size_t>* scratch) {
  // Per channel: [0, channels) the count, then the next slot in SB1, then the next in SB2.
  std::vector<size_t>& count = *scratch;
  count.assign(3 * static_cast<size_t>(channels), 0);
  size_t* next_first = count.data() + channels;
  size_t* next_second = next_first + channels;
  for (const T& item : items) ++count[static_cast<size_t>(channel_of(item))];
  bool turn = true;
  size_t at_first = 0, at_second = 0;
  for (int c = 0; c < channels; ++c) {
    const size_t half = SubBatchHalf(count[c], &turn);
    next_first[c] = at_first;
    next_second[c] = at_second;
    at_first += half;
    at_second += count[c] - half;
    count[c] = half;  // from here on: SB1 slots left in the channel
  }
  first->resize(at_first);
  second->resize(at_second);
  for (const T& item : items) {
    const size_t c = static_cast<size_t>(channel_of(item));
    if (count[c] > 0) {
      --count[c];
      (*first)[next_first[c]++] = item;
      placed(item, 0);
    } else {
      (*second)[next_second[c]++] = item;
      placed(item, 1);
    }
  }
}
template <typename T>
std::pair<std::vector<T>, std::vector<T>> PartitionSubBatches(
    const std::vector<std::vector<T>>& per_channel) {
  std::pair<std::vector<T>, std::vector<T>> out;
  PartitionSubBatches(per_channel, &out.first, &out.second);
  return out;
}

}  // namespace neupims::scheduler

#endif  // NEUPIMS_SCHEDULER_BATCHING_H_
