#include "hw/dram/timing_checker.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace neupims::hw {
namespace {

using CT = CommandType;

// The banks and row buffers a command touches, spelled out independently of TimingEngine.
struct Touch {
  int bank_lo = 0, bank_hi = 0;  // flat banks [lo, hi)
  bool rb[2] = {false, false};   // which row buffer of those banks
};

bool Is(CT t, std::initializer_list<CT> set) {
  return std::find(set.begin(), set.end(), t) != set.end();
}

}  // namespace

TimingChecker::TimingChecker(const HbmSpec& spec) : spec_(spec) {}

std::vector<Violation> TimingChecker::Check(const std::vector<IssuedCommand>& trace) const {
  const HbmOrganization& o = spec_.org;
  const HbmTiming& t = spec_.timing;
  const bool dual = spec_.pim.enabled && spec_.pim.row_buffers == RowBufferMode::kDual;
  const int pim_rb = dual ? 1 : 0;
  const int bpr = o.banks_per_rank();
  const int banks = o.banks_per_channel();
  std::vector<Violation> out;

  auto touch = [&](const Command& c) {
    Touch x;
    const int group = c.rank * o.bank_groups + c.bank_group;
    const int bank = group * o.banks_per_group + c.bank;
    switch (c.type) {
      case CT::kAct:
      case CT::kPre:
      case CT::kRd:
      case CT::kWr:
        x.bank_lo = bank;
        x.bank_hi = bank + 1;
        x.rb[0] = true;
        break;
      case CT::kPimGwrite:
        x.bank_lo = bank;
        x.bank_hi = bank + 1;
        x.rb[pim_rb] = true;
        break;
      case CT::kPimAct:
        x.bank_lo = group * o.banks_per_group;
        x.bank_hi = x.bank_lo + o.banks_per_group;
        x.rb[pim_rb] = true;
        break;
      case CT::kRef:
        x.bank_lo = c.rank * bpr;
        x.bank_hi = x.bank_lo + bpr;
        x.rb[0] = x.rb[1] = true;
        break;
      case CT::kPimHeader:
        x.bank_lo = 0;
        x.bank_hi = 0;
        break;
      default:  // all-bank PIM column ops and PIM_PRECHARGE
        x.bank_lo = 0;
        x.bank_hi = banks;
        x.rb[pim_rb] = true;
        break;
    }
    return x;
  };
  auto overlap = [](int a0, int a1, int b0, int b1) { return a0 < b1 && b0 < a1; };
  auto same_rb = [&](const Touch& a, const Touch& b) {
    return overlap(a.bank_lo, a.bank_hi, b.bank_lo, b.bank_hi) &&
           ((a.rb[0] && b.rb[0]) || (a.rb[1] && b.rb[1]));
  };
  auto bg_lo = [&](const Touch& a) { return a.bank_lo / o.banks_per_group; };
  auto bg_hi = [&](const Touch& a) {
    return (a.bank_hi + o.banks_per_group - 1) / o.banks_per_group;
  };
  auto same_bg = [&](const Touch& a, const Touch& b) {
    return a.bank_hi > a.bank_lo && b.bank_hi > b.bank_lo &&
           overlap(bg_lo(a), bg_hi(a), bg_lo(b), bg_hi(b));
  };
  auto rank_lo = [&](const Touch& a) { return a.bank_lo / bpr; };
  auto rank_hi = [&](const Touch& a) { return (a.bank_hi + bpr - 1) / bpr; };
  auto same_rank = [&](const Touch& a, const Touch& b) {
    return a.bank_hi > a.bank_lo && b.bank_hi > b.bank_lo &&
           overlap(rank_lo(a), rank_hi(a), rank_lo(b), rank_hi(b));
  };
  // b reads data from a die that a did not drive (a data-bus rank turnaround).
  auto other_rank = [&](const Touch& a, const Touch& b) {
    return a.bank_hi > a.bank_lo && b.bank_hi > b.bank_lo &&
           (rank_lo(b) < rank_lo(a) || rank_hi(b) > rank_hi(a));
  };
  // Cycle of a command's last column step (a composite PIM_GEMV runs k steps tCCD_L apart).
  auto last_col = [&](const IssuedCommand& x) {
    return x.cycle + (x.cmd.type == CT::kPimGemv && x.cmd.steps > 1
                          ? static_cast<Cycles>(x.cmd.steps - 1) * t.tCCD_L
                          : 0);
  };
  const Cycles bursts = o.bursts_per_row();
  const Cycles gwrite_busy =
      std::max<Cycles>(t.tRAS, t.tRCD + (bursts - 1) * t.tCCD_L + t.tRTP) + t.tRP;
  // No rule reaches further back than the longest latency plus the longest PIM_GEMV.
  Cycles longest_gemv = 0;
  for (const IssuedCommand& x : trace) {
    if (x.cmd.type == CT::kPimGemv) longest_gemv = std::max<Cycles>(longest_gemv, x.cmd.steps);
  }
  const Cycles horizon = std::max<Cycles>({t.tRFC, gwrite_busy, t.tRC(), t.tFAW,
                                           t.CL + t.tBL + t.tRTRS, t.CWL + t.tBL + t.tWR}) +
                         longest_gemv * t.tCCD_L + t.CL + t.tBL + 1;

  auto report = [&](const char* rule, size_t i, size_t j, Cycles need, Cycles got,
                    const std::string& detail = "") {
    out.push_back({rule, i, j, need, got, detail});
  };

  for (size_t i = 0; i < trace.size(); ++i) {
    const IssuedCommand& b = trace[i];
    const CT bt = b.cmd.type;
    const Touch tb = touch(b.cmd);
    for (size_t jj = i; jj-- > 0;) {
      const IssuedCommand& a = trace[jj];
      if (b.cycle - a.cycle > horizon) break;
      const CT at = a.cmd.type;
      const Touch ta = touch(a.cmd);
      auto need = [&](bool cond, const char* rule, Cycles min_gap, Cycles from = -1) {
        if (!cond) return;
        const Cycles g = b.cycle - (from < 0 ? a.cycle : from);
        if (g < min_gap) report(rule, i, jj, min_gap, g);
      };
      const bool a_act = Is(at, {CT::kAct, CT::kPimAct});
      const bool b_any_act = Is(bt, {CT::kAct, CT::kPimAct, CT::kPimGwrite});
      const bool a_any_act = Is(at, {CT::kAct, CT::kPimAct, CT::kPimGwrite});
      const bool b_pre = Is(bt, {CT::kPre, CT::kPimPre});
      const bool a_pre = Is(at, {CT::kPre, CT::kPimPre});
      const bool rb = same_rb(ta, tb);
      // Row buffer cycle.
      need(a_act && rb && Is(bt, {CT::kRd, CT::kWr, CT::kPimDot, CT::kPimGemv}), "tRCD", t.tRCD);
      need(a_act && rb && b_pre, "tRAS", t.tRAS);
      need(a_act && rb && b_any_act, "tRC", t.tRAS + t.tRP);
      need(a_pre && rb && (b_any_act || bt == CT::kRef), "tRP", t.tRP);
      need(Is(at, {CT::kRd, CT::kPimDot, CT::kPimRdResult}) && rb && b_pre, "tRTP", t.tRTP);
      need(at == CT::kPimGemv && rb && b_pre, "tRTP", t.tRTP, last_col(a));
      need(at == CT::kWr && rb && b_pre, "tWR", t.CWL + t.tBL + t.tWR);
      need(at == CT::kPimGwrite && rb && (b_any_act || b_pre || bt == CT::kRef), "tGWRITE",
           gwrite_busy);
      // Bank group.
      const bool bg = same_bg(ta, tb);
      need(a_any_act && b_any_act && bg, "tRRD_L", t.tRRD_L);
      need(Is(at, {CT::kRd, CT::kWr}) && Is(bt, {CT::kRd, CT::kWr}) && bg, "tCCD_L", t.tCCD_L);
      need(at == CT::kWr && bt == CT::kRd && bg, "tWTR_L", t.CWL + t.tBL + t.tWTR_L);
      const bool b_pimcol = Is(bt, {CT::kPimDot, CT::kPimRdResult, CT::kPimGemv});
      need(Is(at, {CT::kPimDot, CT::kPimRdResult}) && b_pimcol && bg, "tCCD_L", t.tCCD_L);
      need(at == CT::kPimGemv && b_pimcol && bg, "tCCD_L", t.tCCD_L, last_col(a));
      // Rank.
      const bool rk = same_rank(ta, tb);
      need(a_any_act && b_any_act && rk, "tRRD_S", t.tRRD_S);
      need(at == CT::kWr && bt == CT::kRd && rk, "tWTR_S", t.CWL + t.tBL + t.tWTR_S);
      need(at == CT::kRef && (b_any_act || bt == CT::kRef) && rk, "tRFC", t.tRFC);
      need(Is(at, {CT::kRd, CT::kPimRdResult}) && Is(bt, {CT::kRd, CT::kPimRdResult}) &&
               other_rank(ta, tb),
           "tRTRS", t.tBL + t.tRTRS);
      // Channel.
      need(Is(at, {CT::kRd, CT::kWr}) && Is(bt, {CT::kRd, CT::kWr}), "tCCD_S", t.tCCD_S);
      need(Is(at, {CT::kRd, CT::kPimRdResult}) && bt == CT::kWr, "tRTW",
           t.CL + t.tBL + t.tRTRS - t.CWL);
      need(at == CT::kPimGemv && bt == CT::kWr, "tRTW", t.CL + t.tBL + t.tRTRS - t.CWL,
           last_col(a));
      const bool a_row =
          Is(at, {CT::kAct, CT::kPre, CT::kRef, CT::kPimAct, CT::kPimPre, CT::kPimHeader});
      const bool b_row =
          Is(bt, {CT::kAct, CT::kPre, CT::kRef, CT::kPimAct, CT::kPimPre, CT::kPimHeader});
      need(a_row && b_row, "row_bus", 1);
      need(!a_row && !b_row, "column_bus", 1);
      need(at == CT::kPimGwrite && b_pimcol, "tGB_LOAD", t.tRCD + bursts * t.tCCD_L);
      need(at == CT::kPimGwrite && bt == CT::kPimGwrite, "tGB_LOAD", bursts * t.tCCD_L);
      need(Is(at, {CT::kPimDot, CT::kPimRdResult}) && bt == CT::kPimGwrite, "tGB_READ", t.tCCD_L);
      need(at == CT::kPimGemv && bt == CT::kPimGwrite, "tGB_READ", t.tCCD_L, last_col(a));
      // Data bus: bursts of tBL cycles may not overlap.
      auto data_start = [&](const IssuedCommand& x) -> Cycles {
        switch (x.cmd.type) {
          case CT::kRd:
          case CT::kPimRdResult:
            return x.cycle + t.CL;
          case CT::kWr:
            return x.cycle + t.CWL;
          case CT::kPimGemv:
            return last_col(x) + t.CL;
          default:
            return -1;
        }
      };
      const Cycles da = data_start(a), db = data_start(b);
      if (da >= 0 && db >= 0 && da < db + t.tBL && db < da + t.tBL) {
        report("data_bus", i, jj, t.tBL, std::abs(db - da), "overlapping data bursts");
      }
    }
  }

  // tFAW: weighted activations per rank in any window of tFAW cycles.
  for (int r = 0; r < o.ranks; ++r) {
    std::vector<size_t> acts;
    for (size_t i = 0; i < trace.size(); ++i) {
      const Command& c = trace[i].cmd;
      if (Is(c.type, {CT::kAct, CT::kPimAct, CT::kPimGwrite}) && c.rank == r) acts.push_back(i);
    }
    for (size_t k = 0; k < acts.size(); ++k) {
      const Cycles now = trace[acts[k]].cycle;
      int weight = 0;
      size_t first = acts[k];
      for (size_t m = k + 1; m-- > 0;) {
        const IssuedCommand& x = trace[acts[m]];
        if (now - x.cycle >= t.tFAW) break;
        weight += x.cmd.type == CT::kPimAct ? o.banks_per_group : 1;
        first = acts[m];
      }
      if (weight > 4) {
        report("tFAW", acts[k], first, t.tFAW, now - trace[first].cycle,
               absl::StrCat(weight, " activations in rank ", r, " within tFAW"));
      }
    }
  }

  // Refresh intervals and the bank state machine.
  std::vector<int32_t> open(static_cast<size_t>(banks) * 2, -1);
  auto rbref = [&](int bank, int rbi) -> int32_t& { return open[bank * 2 + rbi]; };
  std::vector<Cycles> last_ref(o.ranks, -1);
  for (size_t i = 0; i < trace.size(); ++i) {
    const Command& c = trace[i].cmd;
    const Touch x = touch(c);
    auto state = [&](const std::string& what) {
      report("state", i, i, 0, 0, absl::StrCat(c.ToString(), ": ", what));
    };
    switch (c.type) {
      case CT::kAct:
        if (rbref(x.bank_lo, 0) >= 0) state("bank already has an open row");
        if (dual && rbref(x.bank_lo, 1) == c.row) state("row already open in the PIM buffer");
        rbref(x.bank_lo, 0) = c.row;
        break;
      case CT::kPre:
        rbref(x.bank_lo, 0) = -1;
        break;
      case CT::kRd:
      case CT::kWr:
        if (rbref(x.bank_lo, 0) != c.row) state("row not open");
        break;
      case CT::kPimAct:
        for (int bk = x.bank_lo; bk < x.bank_hi; ++bk) {
          if (rbref(bk, pim_rb) >= 0) state("PIM row buffer already open");
          if (dual && rbref(bk, 0) == c.row) state("row already open in the MEM buffer");
          rbref(bk, pim_rb) = c.row;
        }
        break;
      case CT::kPimGwrite:
        if (rbref(x.bank_lo, pim_rb) >= 0) state("GWRITE source bank not precharged");
        if (dual && rbref(x.bank_lo, 0) == c.row) state("row already open in the MEM buffer");
        break;
      case CT::kPimDot:
      case CT::kPimRdResult:
      case CT::kPimGemv: {
        bool any = false;
        for (int bk = 0; bk < banks; ++bk) any = any || rbref(bk, pim_rb) >= 0;
        if (!any) state("no PIM row open");
        break;
      }
      case CT::kPimPre:
        for (int bk = 0; bk < banks; ++bk) rbref(bk, pim_rb) = -1;
        break;
      case CT::kRef:
        for (int bk = x.bank_lo; bk < x.bank_hi; ++bk) {
          if (rbref(bk, 0) >= 0 || rbref(bk, 1) >= 0) {
            state("refresh with an open row");
            break;
          }
        }
        if (last_ref[c.rank] >= 0 && trace[i].cycle - last_ref[c.rank] > t.tREFI) {
          report("tREFI", i, i, t.tREFI, trace[i].cycle - last_ref[c.rank],
                 absl::StrCat("rank ", c.rank, " refreshed late"));
        }
        last_ref[c.rank] = trace[i].cycle;
        break;
      case CT::kPimHeader:
        break;
    }
  }
  return out;
}

}  // namespace neupims::hw
