#include "kv_cache/block_manager.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/units.h"

namespace neupims::kv_cache {
namespace {

// Absorbs rounding in watermark x capacity (0.29 x 100 = 28.999999999999996 must give 29).
constexpr double kWatermarkEpsilon = 1e-9;

const std::vector<int64_t>& EmptyTable() {
  static const std::vector<int64_t>* const kEmpty = new std::vector<int64_t>();
  return *kEmpty;
}

}  // namespace

const char* ToString(AllocStatus s) {
  switch (s) {
    case AllocStatus::kOk:
      return "OK";
    case AllocStatus::kLater:
      return "LATER";
    case AllocStatus::kNever:
      return "NEVER";
  }
  return "UNKNOWN";
}

absl::StatusOr<BlockManager> BlockManager::Create(const BlockManagerOptions& options) {
  if (options.block_tokens < 1 || options.block_tokens > kMaxBlockTokens) {
    return absl::InvalidArgumentError(absl::StrCat("block_tokens must be in [1, ", kMaxBlockTokens,
                                                   "], got ", options.block_tokens));
  }
  if (options.blocks_per_channel.empty()) {
    return absl::InvalidArgumentError("blocks_per_channel must name at least one channel");
  }
  if (options.blocks_per_channel.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError("too many channels");
  }
  for (size_t c = 0; c < options.blocks_per_channel.size(); ++c) {
    if (options.blocks_per_channel[c] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "blocks_per_channel[", c, "] must be >= 0, got ", options.blocks_per_channel[c]));
    }
  }
  // Written so that NaN fails too.
  if (!(options.watermark >= 0.0 && options.watermark < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("watermark must be in [0, 1), got ", options.watermark));
  }

  BlockManager manager;
  manager.block_tokens_ = options.block_tokens;
  manager.pools_.resize(options.blocks_per_channel.size());
  for (size_t c = 0; c < options.blocks_per_channel.size(); ++c) {
    Pool& pool = manager.pools_[c];
    pool.capacity = options.blocks_per_channel[c];
    pool.watermark = static_cast<int64_t>(
        std::floor(options.watermark * static_cast<double>(pool.capacity) + kWatermarkEpsilon));
    pool.free.reserve(static_cast<size_t>(pool.capacity));
    // Stack with block 0 on top: a fresh pool hands out 0, 1, 2, ...
    for (int64_t b = pool.capacity - 1; b >= 0; --b) pool.free.push_back(b);
    manager.total_blocks_ += pool.capacity;
  }
  manager.free_blocks_ = manager.total_blocks_;
  manager.calendar_.resize(static_cast<size_t>(options.block_tokens));
  return manager;
}

const BlockManager::Table* BlockManager::Find(RequestId id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &slots_[static_cast<size_t>(it->second)];
}

BlockManager::Table* BlockManager::Find(RequestId id) {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &slots_[static_cast<size_t>(it->second)];
}

absl::Status BlockManager::Allocate(RequestId id, int channel, int64_t tokens) {
  if (tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": tokens must be >= 1, got ", tokens));
  }
  if (!ValidChannel(channel)) {
    return absl::OutOfRangeError(
        absl::StrCat("request ", id, ": channel ", channel, " out of range [0, ", channels(), ")"));
  }
  if (index_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("request ", id, " is already allocated"));
  }
  Pool& pool = pools_[channel];
  const int64_t needed = BlocksFor(tokens);
  if (needed > static_cast<int64_t>(pool.free.size())) {
    return absl::ResourceExhaustedError(absl::StrCat("request ", id, ": needs ", needed,
                                                     " blocks, channel ", channel, " has ",
                                                     pool.free.size(), " free"));
  }
  int slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<int>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Table& table = slots_[static_cast<size_t>(slot)];
  table.used = true;
  table.streaming = false;
  table.order = next_order_++;
  table.id = id;
  table.channel = channel;
  table.room = needed * block_tokens_ - tokens;
  table.blocks.clear();  // keeps the capacity of the slot's previous table
  for (int64_t i = 0; i < needed; ++i) {
    table.blocks.push_back(pool.free.back());
    pool.free.pop_back();
  }
  free_blocks_ -= needed;
  index_.emplace(id, slot);
  return absl::OkStatus();
}

bool BlockManager::CanAppendSlot(RequestId id) const {
  const Table* table = Find(id);
  if (table == nullptr) return false;
  if (Room(*table) > 0) return true;  // room in the last block
  return !pools_[table->channel].free.empty();
}

absl::Status BlockManager::AppendSlot(RequestId id) {
  if (TryAppendSlot(id)) return absl::OkStatus();
  const Table* table = Find(id);
  if (table == nullptr) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not allocated"));
  }
  return absl::ResourceExhaustedError(absl::StrCat("request ", id, ": no free block in channel ",
                                                   table->channel, " to append a token"));
}

bool BlockManager::Append(Table& table) {
  if (table.streaming) {
    // Out of step with the stream: its room made explicit, appended, and put back in the
    // calendar at its new phase.
    const int slot = static_cast<int>(&table - slots_.data());
    Unlink(slot);
    const bool appended = Append(table);
    Link(slot);
    return appended;
  }
  if (table.room == 0) {  // the last block is full: the token starts a new one
    Pool& pool = pools_[table.channel];
    if (pool.free.empty()) return false;
    table.blocks.push_back(pool.free.back());
    pool.free.pop_back();
    --free_blocks_;
    table.room = block_tokens_;
  }
  --table.room;
  return true;
}

bool BlockManager::TryAppendSlot(RequestId id) {
  Table* table = Find(id);
  return table != nullptr && Append(*table);
}

int BlockManager::SlotOf(RequestId id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

absl::Status BlockManager::Free(RequestId id) {
  if (fail_next_free_) {
    fail_next_free_ = false;
    return absl::InternalError(absl::StrCat("injected fault: freeing request ", id, " failed"));
  }
  auto it = index_.find(id);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not allocated"));
  }
  Table& table = slots_[static_cast<size_t>(it->second)];
  if (table.streaming) Unlink(it->second);
  Pool& pool = pools_[table.channel];
  const std::vector<int64_t>& blocks = table.blocks;
  // Push in reverse so the request's first block ends up on top: re-allocating the same size
  // right away gets the same block table back.
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool.free.push_back(*b);
  free_blocks_ += static_cast<int64_t>(blocks.size());
  table.used = false;
  table.blocks.clear();
  free_slots_.push_back(it->second);
  index_.erase(it);
  return absl::OkStatus();
}

void BlockManager::Link(int slot) {
  Table& table = slots_[static_cast<size_t>(slot)];
  // Its next block starts at the token after the `room` free slots, room + 1 ticks from now.
  table.phase = static_cast<int>((tick_ + table.room + 1) % block_tokens_);
  std::vector<int>& bucket = calendar_[static_cast<size_t>(table.phase)];
  // Usually the latest allocated: searched from the back.
  auto at = bucket.end();
  while (at != bucket.begin() && slots_[static_cast<size_t>(*(at - 1))].order > table.order) --at;
  bucket.insert(at, slot);
  table.streaming = true;
  ++streaming_;
}

void BlockManager::Unlink(int slot) {
  Table& table = slots_[static_cast<size_t>(slot)];
  const int64_t room = Room(table);
  std::vector<int>& bucket = calendar_[static_cast<size_t>(table.phase)];
  bucket.erase(std::find(bucket.begin(), bucket.end(), slot));
  table.streaming = false;
  table.room = room;
  --streaming_;
}

absl::Status BlockManager::JoinStream(RequestId id) {
  auto it = index_.find(id);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not allocated"));
  }
  if (slots_[static_cast<size_t>(it->second)].streaming) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " is already streaming"));
  }
  Link(it->second);
  return absl::OkStatus();
}

absl::Status BlockManager::LeaveStream(RequestId id) {
  auto it = index_.find(id);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " is not allocated"));
  }
  if (!slots_[static_cast<size_t>(it->second)].streaming) {
    return absl::FailedPreconditionError(absl::StrCat("request ", id, " is not streaming"));
  }
  Unlink(it->second);
  return absl::OkStatus();
}

void BlockManager::EndStream() {
  for (std::vector<int>& bucket : calendar_) {
    for (int slot : bucket) {
      Table& table = slots_[static_cast<size_t>(slot)];
      table.room = Room(table);
      table.streaming = false;
    }
    bucket.clear();
  }
  streaming_ = 0;
}

bool BlockManager::AppendStream() {
  const int next = tick_ + 1 == block_tokens_ ? 0 : tick_ + 1;
  const std::vector<int>& takers = calendar_[static_cast<size_t>(next)];
  for (size_t i = 0; i < takers.size(); ++i) {
    Table& table = slots_[static_cast<size_t>(takers[i])];
    Pool& pool = pools_[table.channel];
    if (pool.free.empty()) {
      // Undone in reverse, so every free list is as it was.
      while (i-- > 0) {
        Table& taken = slots_[static_cast<size_t>(takers[i])];
        pools_[taken.channel].free.push_back(taken.blocks.back());
        taken.blocks.pop_back();
      }
      return false;
    }
    table.blocks.push_back(pool.free.back());
    pool.free.pop_back();
  }
  free_blocks_ -= static_cast<int64_t>(takers.size());
  tick_ = next;
  return true;
}

bool BlockManager::Streaming(RequestId id) const {
  const Table* table = Find(id);
  return table != nullptr && table->streaming;
}

int BlockManager::ChannelOf(RequestId id) const {
  const Table* table = Find(id);
  return table == nullptr ? -1 : table->channel;
}

int64_t BlockManager::TokensOf(RequestId id) const {
  const Table* table = Find(id);
  return table == nullptr ? 0 : Tokens(*table);
}

const std::vector<int64_t>& BlockManager::BlockTable(RequestId id) const {
  const Table* table = Find(id);
  return table == nullptr ? EmptyTable() : table->blocks;
}

int64_t BlockManager::UsedBlocks(int channel) const {
  if (!ValidChannel(channel)) return 0;
  return pools_[channel].capacity - static_cast<int64_t>(pools_[channel].free.size());
}

int64_t BlockManager::TotalBlocks(int channel) const {
  if (!ValidChannel(channel)) return 0;
  return pools_[channel].capacity;
}

double BlockManager::Usage() const {
  const int64_t total = TotalBlocks();
  if (total == 0) return 0.0;
  return static_cast<double>(total - TotalFreeBlocks()) / static_cast<double>(total);
}

absl::Status BlockManager::CheckInvariants() const {
  // owner[c][b]: kUnseen, kFree, or the index of the owning table in iteration order.
  constexpr int64_t kUnseen = -2;
  constexpr int64_t kFree = -1;
  std::vector<std::vector<int64_t>> owner(pools_.size());
  for (size_t c = 0; c < pools_.size(); ++c) {
    const Pool& pool = pools_[c];
    if (pool.capacity < 0) {
      return absl::InternalError(absl::StrCat("channel ", c, ": negative capacity"));
    }
    if (static_cast<int64_t>(pool.free.size()) > pool.capacity) {
      return absl::InternalError(absl::StrCat("channel ", c, ": ", pool.free.size(),
                                              " free blocks exceed capacity ", pool.capacity));
    }
    owner[c].assign(static_cast<size_t>(pool.capacity), kUnseen);
    for (int64_t b : pool.free) {
      if (b < 0 || b >= pool.capacity) {
        return absl::InternalError(
            absl::StrCat("channel ", c, ": free block ", b, " out of range"));
      }
      if (owner[c][b] != kUnseen) {
        return absl::InternalError(
            absl::StrCat("channel ", c, ": block ", b, " is on the free list twice"));
      }
      owner[c][b] = kFree;
    }
  }
  int64_t index = 0;
  for (const auto& [id, slot] : index_) {
    if (slot < 0 || static_cast<size_t>(slot) >= slots_.size() ||
        !slots_[static_cast<size_t>(slot)].used || slots_[static_cast<size_t>(slot)].id != id) {
      return absl::InternalError(
          absl::StrCat("request ", id, ": slot ", slot, " is not its table"));
    }
    const Table& table = slots_[static_cast<size_t>(slot)];
    if (!ValidChannel(table.channel)) {
      return absl::InternalError(
          absl::StrCat("request ", id, ": channel ", table.channel, " out of range"));
    }
    // The token count is the blocks' slots less the free ones of the last block (Tokens), so
    // it holds at least one token and no more blocks than it needs: room < block_tokens.
    if (table.blocks.empty() || Room(table) < 0 || Room(table) >= block_tokens_) {
      return absl::InternalError(absl::StrCat("request ", id, ": ", Room(table),
                                              " free slots recorded in the last of its ",
                                              table.blocks.size(), " blocks"));
    }
    std::vector<int64_t>& own = owner[table.channel];
    for (int64_t b : table.blocks) {
      if (b < 0 || b >= pools_[table.channel].capacity) {
        return absl::InternalError(absl::StrCat("request ", id, ": block ", b,
                                                " out of range in channel ", table.channel));
      }
      if (own[b] == kFree) {
        return absl::InternalError(absl::StrCat("request ", id, ": block ", b, " of channel ",
                                                table.channel, " is also on the free list"));
      }
      if (own[b] != kUnseen) {
        return absl::InternalError(absl::StrCat("request ", id, ": block ", b, " of channel ",
                                                table.channel, " is owned twice"));
      }
      own[b] = index;
    }
    ++index;
  }
  int64_t free_total = 0, capacity_total = 0;
  for (const Pool& pool : pools_) {
    free_total += static_cast<int64_t>(pool.free.size());
    capacity_total += pool.capacity;
  }
  if (free_total != free_blocks_) {
    return absl::InternalError(
        absl::StrCat(free_total, " blocks on the free lists, ", free_blocks_, " counted free"));
  }
  if (capacity_total != total_blocks_) {
    return absl::InternalError(absl::StrCat("the channels hold ", capacity_total, " blocks, ",
                                            total_blocks_, " counted in all"));
  }
  const auto used =
      std::count_if(slots_.begin(), slots_.end(), [](const Table& t) { return t.used; });
  if (static_cast<size_t>(used) != index_.size()) {
    return absl::InternalError(
        absl::StrCat(used, " block tables in use for ", index_.size(), " allocated requests"));
  }
  for (size_t c = 0; c < pools_.size(); ++c) {
    for (size_t b = 0; b < owner[c].size(); ++b) {
      if (owner[c][b] == kUnseen) {
        return absl::InternalError(
            absl::StrCat("channel ", c, ": block ", b, " is neither free nor owned (leak)"));
      }
    }
  }
  return CheckStream();
}

absl::Status BlockManager::CheckStream() const {
  if (tick_ < 0 || tick_ >= block_tokens_ ||
      calendar_.size() != static_cast<size_t>(block_tokens_)) {
    return absl::InternalError(absl::StrCat("stream tick ", tick_, " or calendar of ",
                                            calendar_.size(), " phases out of range"));
  }
  int64_t listed = 0;
  for (size_t phase = 0; phase < calendar_.size(); ++phase) {
    int64_t last_order = -1;
    for (int slot : calendar_[phase]) {
      if (slot < 0 || static_cast<size_t>(slot) >= slots_.size() ||
          !slots_[static_cast<size_t>(slot)].used || !slots_[static_cast<size_t>(slot)].streaming) {
        return absl::InternalError(
            absl::StrCat("stream phase ", phase, ": slot ", slot, " is not a streaming table"));
      }
      const Table& table = slots_[static_cast<size_t>(slot)];
      if (static_cast<size_t>(table.phase) != phase) {
        return absl::InternalError(absl::StrCat("request ", table.id, " of phase ", table.phase,
                                                " is listed under phase ", phase));
      }
      if (table.order <= last_order) {
        return absl::InternalError(absl::StrCat("stream phase ", phase,
                                                ": not in allocation order at request ", table.id));
      }
      last_order = table.order;
      ++listed;
    }
  }
  const auto streaming = std::count_if(slots_.begin(), slots_.end(),
                                       [](const Table& t) { return t.used && t.streaming; });
  if (listed != streaming || listed != streaming_) {
    return absl::InternalError(absl::StrCat(listed, " requests in the stream's calendar, ",
                                            streaming, " streaming tables, ", streaming_,
                                            " counted"));
  }
  return absl::OkStatus();
}

}  // namespace neupims::kv_cache
