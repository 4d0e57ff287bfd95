#include "hw/dram/timing_engine.h"

#include <algorithm>
#include <limits>

#include "common/check.h"

namespace neupims::hw {
namespace {
constexpr Cycles kNever = std::numeric_limits<Cycles>::max() / 4;
}  // namespace

TimingEngine::TimingEngine(const HbmSpec& spec, const TimingTable& table)
    : spec_(spec),
      row_buffers_(spec.pim.enabled && spec.pim.row_buffers == RowBufferMode::kDual ? 2 : 1),
      banks_(spec.org.banks_per_channel()) {
  const int sizes[kNumScopes] = {banks_ * row_buffers_, banks_, spec.org.bank_groups_per_channel(),
                                 spec.org.ranks, 1};
  for (int s = 0; s < kNumScopes; ++s) {
    ReadyRow zero{};
    ready_[s].assign(sizes[s], zero);
  }
  for (const TimingRule& r : table.rules) {
    CompiledRule c{r.scope, r.to, r.latency_cycles, r.siblings_only, r.from_last_column, r.window};
    if (r.window > 0) {
      NEUPIMS_CHECK_MSG(r.scope == Scope::kRank && !has_window_, "one rank-level window rule");
      NEUPIMS_CHECK_MSG(r.from == r.to, "window rules count one class of commands");
      NEUPIMS_CHECK_MSG(r.window <= 16, "window rules track at most 16 activations");
      window_rule_ = c;
      window_mask_ = r.from;
      has_window_ = true;
      continue;
    }
    for (int t = 0; t < kNumCommandTypes; ++t) {
      if (r.from & (CommandMask{1} << t)) rules_from_[t].push_back(c);
      if (r.to & (CommandMask{1} << t)) scopes_into_[t] |= 1u << static_cast<int>(r.scope);
    }
  }
  window_history_.assign(spec.org.ranks, {});
}

TimingEngine::Target TimingEngine::TargetOf(const Command& cmd) const {
  const HbmOrganization& o = spec_.org;
  const int pim_rb = row_buffers_ == 2 ? 1 : 0;
  const int group = cmd.rank * o.bank_groups + cmd.bank_group;
  const int bank = group * o.banks_per_group + cmd.bank;
  switch (cmd.type) {
    case CommandType::kAct:
    case CommandType::kPre:
    case CommandType::kRd:
    case CommandType::kWr:
      return {bank, bank + 1, 1};
    case CommandType::kPimGwrite:
      return {bank, bank + 1, static_cast<uint8_t>(1u << pim_rb)};
    case CommandType::kPimAct:
      return {group * o.banks_per_group, (group + 1) * o.banks_per_group,
              static_cast<uint8_t>(1u << pim_rb)};
    case CommandType::kRef:
      return {cmd.rank * o.banks_per_rank(), (cmd.rank + 1) * o.banks_per_rank(),
              static_cast<uint8_t>((1u << row_buffers_) - 1)};
    case CommandType::kPimHeader:
      return {0, banks_, 0};
    case CommandType::kPimDot:
    case CommandType::kPimRdResult:
    case CommandType::kPimGemv:
    case CommandType::kPimPre:
      return {0, banks_, static_cast<uint8_t>(1u << pim_rb)};
  }
  return {0, 0, 0};
}

template <typename F>
void TimingEngine::ForEachNode(Scope scope, const Target& tg, bool siblings, F&& f) const {
  const HbmOrganization& o = spec_.org;
  if (tg.bank_end <= tg.bank_begin) {
    if (scope == Scope::kChannel && !siblings) f(0);
    return;
  }
  switch (scope) {
    case Scope::kRowBuffer:
      for (int b = tg.bank_begin; b < tg.bank_end; ++b) {
        for (int rb = 0; rb < row_buffers_; ++rb) {
          if (tg.rb_mask & (1u << rb)) f(b * row_buffers_ + rb);
        }
      }
      return;
    case Scope::kBank:
      for (int b = tg.bank_begin; b < tg.bank_end; ++b) f(b);
      return;
    case Scope::kBankGroup: {
      const int g0 = tg.bank_begin / o.banks_per_group;
      const int g1 = (tg.bank_end - 1) / o.banks_per_group;
      for (int g = g0; g <= g1; ++g) f(g);
      return;
    }
    case Scope::kRank: {
      const int r0 = tg.bank_begin / o.banks_per_rank();
      const int r1 = (tg.bank_end - 1) / o.banks_per_rank();
      if (siblings) {
        for (int r = 0; r < o.ranks; ++r) {
          if (r < r0 || r > r1) f(r);
        }
      } else {
        for (int r = r0; r <= r1; ++r) f(r);
      }
      return;
    }
    case Scope::kChannel:
      if (!siblings) f(0);
      return;
  }
}

Cycles TimingEngine::WindowEarliest(int node, int weight, Cycles not_before) const {
  const WindowRing& h = window_history_[node];
  const int allowed_others = window_rule_.window - weight;  // entries that may stay in window
  if (allowed_others < 0) return kNever;
  const int must_expire = h.size - allowed_others;  // the oldest `must_expire` entries
  if (must_expire <= 0) return not_before;
  return std::max(not_before, h.Get(must_expire - 1) + window_rule_.latency);
}

Cycles TimingEngine::DataBusEarliest(Cycles not_before, Cycles offset, Cycles extra_slot) const {
  const Cycles bl = spec_.timing.tBL;
  Cycles d = not_before + offset;
  auto check = [&](Cycles s) {
    if (s + bl <= d) return true;   // slot entirely before: keep scanning
    if (d + bl <= s) return false;  // slot entirely after: done (ascending order)
    d = s + bl;                     // overlap: move past it
    return true;
  };
  if (extra_slot < 0) {  // Earliest's case: the same walk without the extra slot's test
    // The walk passes over every slot with s + bl <= d unchanged: start after them (the slots
    // are ascending; most of them lie before d, the bursts of commands issued just now).
    auto it = std::upper_bound(bus_slots_.begin(), bus_slots_.end(), d - bl);
    for (; it != bus_slots_.end(); ++it) {
      if (!check(*it)) break;
    }
    return d - offset;
  }
  bool extra_done = false;
  for (Cycles s : bus_slots_) {
    if (!extra_done && extra_slot <= s) {
      extra_done = true;
      if (!check(extra_slot)) return d - offset;
    }
    if (!check(s)) return d - offset;
  }
  if (!extra_done) check(extra_slot);
  return d - offset;
}

Cycles TimingEngine::SingleBankEarliest(int type, const Target& tg, Cycles t) const {
  const uint32_t scopes = scopes_into_[type];
  const int b = tg.bank_begin;
  auto take = [&](Scope scope, int node, int kind) {
    const int s = static_cast<int>(scope);
    if (scopes & (1u << s)) t = std::max({t, ready_[s][node][type], floor_[s][kind][type]});
  };
  if (tg.rb_mask != 0) {  // one row buffer (SingleNodeTarget): node b * row_buffers_ + k, kind k
    const int k = __builtin_ctz(tg.rb_mask);
    take(Scope::kRowBuffer, b * row_buffers_ + k, k);
  }
  take(Scope::kBank, b, 0);
  take(Scope::kBankGroup, b / spec_.org.banks_per_group, 0);
  take(Scope::kRank, b / spec_.org.banks_per_rank(), 0);
  take(Scope::kChannel, 0, 0);
  return t;
}

Cycles TimingEngine::Earliest(const Command& cmd, Cycles not_before) const {
  return EarliestAbove(cmd, not_before, RuleBound(cmd));
}

Cycles TimingEngine::EarliestAbove(const Command& cmd, Cycles not_before, Cycles bound) const {
  Cycles t = std::max(not_before, bound);
  if (auto off = DataBusOffset(cmd, spec_.timing)) t = DataBusEarliest(t, *off, -1);
  return t;
}

// Every rule and window raises t to a maximum with a value that does not depend on t (a window
// gives kNever, leaves t, or takes max(t, the expiring activation + tFAW)), so starting from the
// lowest cycle gives the bound that Earliest takes the maximum of with not_before.
Cycles TimingEngine::RuleBound(const Command& cmd) const {
  const int type = static_cast<int>(cmd.type);
  const Target tg = TargetOf(cmd);
  Cycles t = std::numeric_limits<Cycles>::min();
  const uint32_t scopes = scopes_into_[type];
  const bool all = CoversAll(tg);
  // The MEM commands' case, one node per scope, without the general walk (the same maximum).
  const bool single = !all && SingleNodeTarget(tg);
  for (int s = 0; s < kNumScopes && !single; ++s) {
    if (!(scopes & (1u << s))) continue;
    const Scope scope = static_cast<Scope>(s);
    if (all) {
      for (int k = 0; k < (scope == Scope::kRowBuffer ? row_buffers_ : 1); ++k) {
        if (scope == Scope::kRowBuffer && !(tg.rb_mask & (1u << k))) continue;
        t = std::max({t, floor_[s][k][type], ceil_[s][k][type]});
      }
      continue;
    }
    const auto& rows = ready_[s];
    const auto& floor = floor_[s];
    ForEachNode(scope, tg, false, [&](int n) {
      t = std::max({t, rows[n][type], floor[KindOf(scope, n)][type]});
    });
  }
  if (single) t = SingleBankEarliest(type, tg, t);
  if (has_window_ && InMask(window_mask_, cmd.type)) {
    const int w = ActivationWeight(cmd.type, spec_.org);
    ForEachNode(Scope::kRank, tg, false, [&](int n) { t = std::max(t, WindowEarliest(n, w, t)); });
  }
  return t;
}

Cycles TimingEngine::EarliestIfIssued(const Command& second, Cycles not_before,
                                      const Command& first, Cycles first_cycle) const {
  return EarliestIfIssuedFrom(Earliest(second, not_before), second, first, first_cycle);
}

Cycles TimingEngine::EarliestIfIssuedFrom(Cycles second_earliest, const Command& second,
                                          const Command& first, Cycles first_cycle) const {
  Cycles t = second_earliest;
  const Target t1 = TargetOf(first);
  const Target t2 = TargetOf(second);
  const int type2 = static_cast<int>(second.type);
  for (const CompiledRule& r : rules_from_[static_cast<int>(first.type)]) {
    if (!(r.to & (CommandMask{1} << type2))) continue;
    // Do the nodes `first` updates at this scope intersect the nodes `second` reads?
    bool hit = false;
    ForEachNode(r.scope, t1, r.siblings_only, [&](int n1) {
      if (hit) return;
      ForEachNode(r.scope, t2, false, [&](int n2) { hit = hit || n1 == n2; });
    });
    if (!hit) continue;
    const Cycles base =
        first_cycle + (r.from_last_column ? LastColumnOffset(first, spec_.timing) : 0);
    t = std::max(t, base + r.latency);
  }
  if (has_window_ && InMask(window_mask_, first.type) && InMask(window_mask_, second.type)) {
    const int w1 = ActivationWeight(first.type, spec_.org);
    const int w2 = ActivationWeight(second.type, spec_.org);
    ForEachNode(Scope::kRank, t1, false, [&](int n1) {
      bool shared = false;
      ForEachNode(Scope::kRank, t2, false, [&](int n2) { shared = shared || n1 == n2; });
      if (!shared) return;
      WindowRing h = window_history_[n1];
      for (int i = 0; i < w1; ++i) h.Push(first_cycle, window_rule_.window);
      const int must_expire = h.size - (window_rule_.window - w2);
      if (must_expire > 0) t = std::max(t, h.Get(must_expire - 1) + window_rule_.latency);
    });
  }
  auto off1 = DataBusOffset(first, spec_.timing);
  auto off2 = DataBusOffset(second, spec_.timing);
  if (off1 && off2) t = DataBusEarliest(t, *off2, first_cycle + *off1);
  return t;
}

void TimingEngine::Issue(const Command& cmd, Cycles cycle) {
  NEUPIMS_CHECK_MSG(cycle >= last_issue_, "commands must be issued in cycle order");
  ++issued_;
  const Target tg = TargetOf(cmd);
  for (const CompiledRule& r : rules_from_[static_cast<int>(cmd.type)]) {
    const Cycles base = cycle + (r.from_last_column ? LastColumnOffset(cmd, spec_.timing) : 0);
    const Cycles until = base + r.latency;
    const int s = static_cast<int>(r.scope);
    auto& rows = ready_[s];
    auto& ceil = ceil_[s];
    if (CoversAll(tg) && !r.siblings_only) {
      for (int k = 0; k < (r.scope == Scope::kRowBuffer ? row_buffers_ : 1); ++k) {
        if (r.scope == Scope::kRowBuffer && !(tg.rb_mask & (1u << k))) continue;
        for (CommandMask m = r.to; m != 0; m &= m - 1) {
          const int t = __builtin_ctz(m);
          floor_[s][k][t] = std::max(floor_[s][k][t], until);
          ceil[k][t] = std::max(ceil[k][t], until);
        }
      }
      continue;
    }
    ForEachNode(r.scope, tg, r.siblings_only, [&](int n) {
      ReadyRow& row = rows[n];
      ReadyRow& c = ceil[KindOf(r.scope, n)];
      for (CommandMask m = r.to; m != 0; m &= m - 1) {
        const int t = __builtin_ctz(m);
        row[t] = std::max(row[t], until);
        c[t] = std::max(c[t], until);
      }
    });
  }
  if (has_window_ && InMask(window_mask_, cmd.type)) {
    const int w = ActivationWeight(cmd.type, spec_.org);
    ForEachNode(Scope::kRank, tg, false, [&](int n) {
      WindowRing& h = window_history_[n];
      for (int i = 0; i < w; ++i) h.Push(cycle, window_rule_.window);
    });
  }
  if (auto off = DataBusOffset(cmd, spec_.timing)) {
    const Cycles slot = cycle + *off;
    bus_slots_.insert(std::upper_bound(bus_slots_.begin(), bus_slots_.end(), slot), slot);
  }
  last_issue_ = cycle;
  // Future commands put data on the bus no earlier than `cycle`: older slots cannot conflict.
  auto keep = bus_slots_.begin();
  while (keep != bus_slots_.end() && *keep + spec_.timing.tBL <= cycle) ++keep;
  bus_slots_.erase(bus_slots_.begin(), keep);
}

}  // namespace neupims::hw
