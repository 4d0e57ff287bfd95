// BlockManager: a vLLM-style paged KV cache whose physical blocks live in PIM channels.
//
// Role: owns every KV block of one device. Each request's KV cache lives in the one channel it
// was assigned to (NeuPIMs sec. 4: the PIM bank group that computes its attention holds its keys
// and values), so every channel is its own pool of `blocks_per_channel[c]` blocks of
// `block_tokens` tokens. Verbs follow vLLM's block manager:
//   CanAllocate(channel, tokens) -> kOk / kLater (not now) / kNever (exceeds the channel)
//   Allocate(request, channel, tokens), CanAppendSlot / AppendSlot / TryAppendSlot (one more
//   token), Free.
// A watermark keeps `watermark` x capacity free in every channel at admission time (not for
// appends), so running requests can grow before anyone must be preempted.
//
// Block layout of one request in its channel (block_tokens = 32 = one key tile of 32 banks):
//
//   block table (logical -> physical)     channel c pool
//   [0] -> 17                             | 0 | 1 | ... | 17 | ... |   each block: block_tokens
//   [1] -> 4                              tokens x (K + V) x layers on this device
//   [2] -> 23   (last block partly full)
//
// The decode stream: requests that grow by one token at every step (the scheduler's decoding
// requests) can join it, and AppendStream then appends one token to each of them at once. A
// streaming request keeps no per-token count: the room of its last block follows from the
// stream's tick, and it needs a new block every block_tokens ticks, always at the same tick
// modulo block_tokens (its phase). A calendar of block_tokens buckets lists the streaming
// requests by phase, so a tick visits only the requests that start a block (about 1 in
// block_tokens), and takes their blocks in allocation order (as a per-request pass over the
// requests in allocation order would).
//
// Contract: single-threaded (the engine thread). Errors for unknown requests, double
// allocation, out-of-range channels. Invariant: used + free == capacity in every channel.
// Physical block ids are per channel (0 .. capacity-1); each free list is a stack, so the ids a
// sequence of calls hands out are deterministic (a fresh pool hands out 0, 1, 2, ...).
#ifndef NEUPIMS_KV_CACHE_BLOCK_MANAGER_H_
#define NEUPIMS_KV_CACHE_BLOCK_MANAGER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/units.h"

namespace neupims::kv_cache {

using RequestId = int64_t;

enum class AllocStatus { kOk, kLater, kNever };
const char* ToString(AllocStatus s);

// The largest block: the decode stream keeps a calendar bucket per token of a block.
inline constexpr int kMaxBlockTokens = 1 << 20;

struct BlockManagerOptions {
  int block_tokens = 32;                    // 1 .. kMaxBlockTokens
  std::vector<int64_t> blocks_per_channel;  // capacity of each channel's pool
  double watermark = 0.01;                  // fraction kept free at admission
};

class BlockManager {
  struct Table;  // a request's block table (below)

 public:
  static absl::StatusOr<BlockManager> Create(const BlockManagerOptions& options);

  int channels() const { return static_cast<int>(pools_.size()); }
  int block_tokens() const { return block_tokens_; }

  // Inline, as are CanAllocate and FreeBlocks: admission asks them for every channel per
  // admitted request (32 channels), and the calls cost more than the answers.
  // Blocks needed to hold `tokens` tokens: ceil(tokens / block_tokens); 0 for tokens <= 0.
  int64_t BlocksFor(int64_t tokens) const {
    return tokens <= 0 ? 0 : CeilDiv(tokens, block_tokens_);
  }
  // Blocks of `channel` that admission keeps free: floor(watermark x capacity). 0 for a bad
  // channel.
  int64_t WatermarkBlocks(int channel) const {
    return ValidChannel(channel) ? pools_[channel].watermark : 0;
  }
  // Admission test. kNever: BlocksFor(tokens) > capacity - WatermarkBlocks (it can never be
  // admitted to this channel), also for a bad channel or tokens < 1 (Allocate would fail).
  // kLater: free - BlocksFor(tokens) < WatermarkBlocks. Otherwise kOk.
  AllocStatus CanAllocate(int channel, int64_t tokens) const {
    if (!ValidChannel(channel) || tokens < 1) return AllocStatus::kNever;
    const Pool& pool = pools_[channel];
    const int64_t needed = BlocksFor(tokens);
    if (needed > pool.capacity - pool.watermark) return AllocStatus::kNever;
    if (static_cast<int64_t>(pool.free.size()) - needed < pool.watermark) {
      return AllocStatus::kLater;
    }
    return AllocStatus::kOk;
  }
  // Allocates blocks for `tokens` tokens of a new request in `channel`. Ignores the watermark
  // (the caller checked CanAllocate). Errors: InvalidArgument (tokens < 1), OutOfRange (bad
  // channel), AlreadyExists (id already allocated), ResourceExhausted (not enough free blocks).
  // On error nothing changes.
  absl::Status Allocate(RequestId id, int channel, int64_t tokens);
  // Whether the request can grow by one token: room in its last block, or a free block in its
  // channel (the watermark does not apply). False for an unknown request.
  bool CanAppendSlot(RequestId id) const;
  // Adds one token, taking one block when the token starts a new block. Errors: NotFound,
  // ResourceExhausted (no free block in the channel; nothing changes).
  absl::Status AppendSlot(RequestId id);
  // CanAppendSlot and AppendSlot in one lookup (the scheduler's per-token hot path): adds one
  // token and returns true, or returns false and changes nothing (unknown request, or no free
  // block in its channel).
  bool TryAppendSlot(RequestId id);
  // Releases every block of the request (finish, abort, preemption); it leaves the stream.
  // Error: NotFound.
  absl::Status Free(RequestId id);

  // The decode stream (see the top of this file). JoinStream: from now on the request grows by
  // one token at every AppendStream, until LeaveStream or Free. Errors: NotFound,
  // FailedPrecondition (already streaming); on error nothing changes. The per-request verbs
  // (AppendSlot, TryAppendSlot, ...) still work on a streaming request, which stays in the
  // stream.
  absl::Status JoinStream(RequestId id);
  // The request stops growing with the stream but keeps its blocks (the scheduler's requests
  // leave through Free or EndStream; this verb is for a caller that pauses one request, and for
  // the tests). Errors: NotFound, FailedPrecondition (not streaming); on error nothing changes.
  absl::Status LeaveStream(RequestId id);
  // Every streaming request leaves the stream (before a per-request pass, e.g. one that
  // preempts).
  void EndStream();
  // One token for every streaming request, as TryAppendSlot on each in allocation order would
  // add it: a request whose last block is full takes a block of its channel. True, or false
  // when a channel has fewer free blocks than its streaming requests that start a block need;
  // then nothing changes. O(requests that start a block).
  bool AppendStream();
  bool Streaming(RequestId id) const;
  int64_t streaming() const { return streaming_; }

  // Where the request's block table is kept (-1 if unknown): a hint the caller may hold while
  // the request is allocated, so that its per-token appends skip the id lookup.
  int SlotOf(RequestId id) const;
  // TryAppendSlot through a hint from SlotOf. A stale or wrong hint (the table there belongs to
  // another request, or to none) falls back to the lookup by id, so the answer is always
  // TryAppendSlot(id)'s.
  bool TryAppendSlot(RequestId id, int slot_hint) {
    return TryAppendInRoom(id, slot_hint) || TryAppendSlot(id);
  }
  // Only the common case of TryAppendSlot(id, slot_hint), 31 of 32 appends: the hinted table is
  // the request's and its last block has room. Then adds the token and returns true; otherwise
  // returns false and changes nothing (the caller goes on with TryAppendSlot).
  bool TryAppendInRoom(RequestId id, int slot_hint) {
    return InRoomAppender().TryAppend(id, slot_hint);
  }
  // TryAppendInRoom for a pass over many requests (the scheduler's fallback after a tick the
  // stream refused; a streaming table is refused, as its room follows the tick): the block tables'
  // location is copied into the appender, a local of the caller's loop, so that the loop does not
  // reload it after every append (the compiler cannot tell the caller's stores of pointers from
  // this manager's). Valid until the next Allocate.
  class RoomAppender {
   public:
    bool TryAppend(RequestId id, int slot_hint) {
      // A negative hint converts to a size above any table count.
      if (static_cast<size_t>(slot_hint) >= count_) return false;
      Table& table = tables_[static_cast<size_t>(slot_hint)];
      // A streaming table's room is implied by the stream's tick, not kept in `room`.
      if (!table.used || table.id != id || table.room == 0 || table.streaming) return false;
      --table.room;
      return true;
    }

   private:
    friend class BlockManager;
    RoomAppender(Table* tables, size_t count) : tables_(tables), count_(count) {}
    Table* tables_;
    size_t count_;
  };
  RoomAppender InRoomAppender() { return RoomAppender(slots_.data(), slots_.size()); }

  // Accessors for one request; for an unknown id: ChannelOf -1, TokensOf 0, BlockTable empty.
  bool Has(RequestId id) const { return index_.contains(id); }
  int ChannelOf(RequestId id) const;
  int64_t TokensOf(RequestId id) const;
  const std::vector<int64_t>& BlockTable(RequestId id) const;

  // Per-channel counts; 0 for a bad channel.
  int64_t FreeBlocks(int channel) const {
    return ValidChannel(channel) ? static_cast<int64_t>(pools_[channel].free.size()) : 0;
  }
  int64_t UsedBlocks(int channel) const;
  int64_t TotalBlocks(int channel) const;
  // Kept as counts (the engine asks for Usage every iteration), not summed over the channels.
  int64_t TotalFreeBlocks() const { return free_blocks_; }
  int64_t TotalBlocks() const { return total_blocks_; }
  // used / total over all channels.
  double Usage() const;
  int64_t requests() const { return static_cast<int64_t>(index_.size()); }

  // Checks every internal invariant (no block owned twice, free lists consistent, usage within
  // capacity); returns the first broken one. For tests.
  absl::Status CheckInvariants() const;

  // Fault injection for tests: the next Free fails with Internal and changes nothing, as a
  // corrupted block table would. Lets tests check that a broken invariant surfaces.
  void FailNextFreeForTesting() { fail_next_free_ = true; }

 private:
  struct Pool {
    int64_t capacity = 0;
    int64_t watermark = 0;      // WatermarkBlocks, fixed with the capacity (asked per admission)
    std::vector<int64_t> free;  // free physical block ids (stack)
  };
  // The request's token count is not kept: an append changes only `room` (Tokens), and a
  // streaming request's room is implied by the stream's tick (Room).
  struct Table {
    bool used = false;
    bool streaming = false;
    RequestId id = 0;
    int channel = 0;
    int64_t room = 0;   // not streaming: free token slots in the last block
    int phase = 0;      // streaming: the tick (mod block_tokens) at which it takes a block
    int64_t order = 0;  // allocation order: the stream takes blocks in this order
    std::vector<int64_t> blocks;
  };
  // Free token slots in the last block: blocks x block_tokens - tokens. A streaming table takes
  // a block at tick `phase` and then has block_tokens - 1 slots left, one fewer every tick.
  int64_t Room(const Table& table) const {
    if (!table.streaming) return table.room;
    const int64_t d = int64_t{table.phase} - 1 - tick_;  // in [-block_tokens, block_tokens - 1)
    return d < 0 ? d + block_tokens_ : d;
  }
  int64_t Tokens(const Table& table) const {
    return static_cast<int64_t>(table.blocks.size()) * block_tokens_ - Room(table);
  }
  BlockManager() = default;
  bool ValidChannel(int channel) const { return channel >= 0 && channel < channels(); }
  const Table* Find(RequestId id) const;
  Table* Find(RequestId id);
  bool Append(Table& table);
  // Puts the table of `slot` into the stream's calendar (by phase, in allocation order) or takes
  // it out (its room made explicit again).
  void Link(int slot);
  void Unlink(int slot);
  absl::Status CheckStream() const;

  int block_tokens_ = 32;
  std::vector<Pool> pools_;
  // Block tables in slots (reused after Free, keeping their vectors' capacity) and the slot of
  // each allocated request.
  std::vector<Table> slots_;
  std::vector<int> free_slots_;
  absl::flat_hash_map<RequestId, int> index_;
  int64_t total_blocks_ = 0;  // the channels' capacities
  int64_t free_blocks_ = 0;   // blocks on the free lists of all channels
  int64_t next_order_ = 0;    // Table::order of the next Allocate
  // The stream: its tick (mod block_tokens), and per phase the slots of the streaming tables
  // that take a block at that tick, in allocation order.
  int tick_ = 0;
  std::vector<std::vector<int>> calendar_;
  int64_t streaming_ = 0;
  bool fail_next_free_ = false;
};

}  // namespace neupims::kv_cache

#endif  // NEUPIMS_KV_CACHE_BLOCK_MANAGER_H_
