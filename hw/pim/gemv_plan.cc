#include "hw/pim/gemv_plan.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/units.h"

namespace neupims::hw {

PimGeometry PimGeometry::FromSpec(const HbmSpec& spec) {
  PimGeometry g;
  g.banks = spec.org.banks_per_channel();
  g.banks_per_group = spec.org.banks_per_group;
  g.groups = spec.org.bank_groups_per_channel();
  g.ranks = spec.org.ranks;
  g.page_elements = spec.org.page_bytes / spec.pim.element_bytes;
  g.lanes = spec.pim.mac_lanes_per_bank;
  return g;
}

int64_t GemvProgram::tiles() const {
  int64_t n = 0;
  for (const auto& b : blocks) {
    for (const auto& r : b.runs) n += b.repeat * r.count;
  }
  return n;
}

int64_t GemvProgram::vector_loads() const {
  int64_t n = 0;
  for (const auto& b : blocks) n += b.load_vector ? b.repeat : 0;
  return n;
}

int64_t GemvProgram::dot_products() const {
  int64_t n = 0;
  for (const auto& b : blocks) {
    for (const auto& r : b.runs) n += b.repeat * r.count * r.dots;
  }
  return n;
}

int64_t GemvProgram::column_steps() const {
  int64_t n = 0;
  for (const auto& b : blocks) {
    for (const auto& r : b.runs) n += b.repeat * r.count * r.dots * r.steps_per_dot;
  }
  return n;
}

int64_t GemvProgram::macs(const PimGeometry& g) const {
  int64_t n = 0;
  for (const auto& b : blocks) {
    for (const auto& r : b.runs) {
      n += b.repeat * r.count * r.dots * r.steps_per_dot * r.groups * g.banks_per_group * g.lanes;
    }
  }
  return n;
}

void GemvProgram::Append(const GemvProgram& other) {
  blocks.insert(blocks.end(), other.blocks.begin(), other.blocks.end());
}

namespace {

// Tiles covering `items` bank slots (one item per bank): full tiles then one partial tile.
absl::InlinedVector<TileRun, 2> TilesOver(int64_t items, int dots, int steps,
                                          const PimGeometry& g) {
  absl::InlinedVector<TileRun, 2> runs;
  const int64_t full = items / g.banks;
  const int64_t rest = items % g.banks;
  if (full > 0) runs.push_back({full, g.groups, dots, steps});
  if (rest > 0) {
    runs.push_back({1, static_cast<int>(CeilDiv(rest, g.banks_per_group)), dots, steps});
  }
  return runs;
}

void AddBlock(GemvProgram* p, int64_t repeat, absl::InlinedVector<TileRun, 2> runs) {
  if (repeat <= 0 || runs.empty()) return;
  p->blocks.push_back({repeat, true, std::move(runs)});
}

}  // namespace

absl::Status ValidateAttentionShape(const AttentionShape& s) {
  if (s.seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("seq_len must be >= 1, got ", s.seq_len));
  }
  if (s.num_heads < 1 || s.num_kv_heads < 1 || s.head_dim < 1) {
    return absl::InvalidArgumentError("num_heads, num_kv_heads and head_dim must be >= 1");
  }
  if (s.num_heads % s.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_heads (", s.num_heads, ") must be a multiple of num_kv_heads (", s.num_kv_heads, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GemvProgram> PlanLogit(const AttentionShape& s, const PimGeometry& g) {
  RETURN_IF_ERROR(ValidateAttentionShape(s));
  GemvProgram p;
  const int64_t group_size = s.num_heads / s.num_kv_heads;  // queries sharing one K head (GQA)
  const int P = g.page_elements;
  // A dot product starts on a column boundary, so a head takes whole column steps (lanes past
  // head_dim are zero padding) and a key row holds whole heads: 6 heads of 80 fill 480 of 512
  // elements. A head longer than the page spans several rows, the last one partial.
  const int steps_per_head = static_cast<int>(CeilDiv(s.head_dim, g.lanes));
  const int slot = steps_per_head * g.lanes;
  if (slot <= P) {
    const int per_chunk = P / slot;  // heads per key row
    const int64_t chunks = CeilDiv(s.num_kv_heads, per_chunk);
    const int last_heads = static_cast<int>(s.num_kv_heads - (chunks - 1) * per_chunk);
    AddBlock(&p, group_size * (chunks - 1), TilesOver(s.seq_len, per_chunk, steps_per_head, g));
    AddBlock(&p, group_size, TilesOver(s.seq_len, last_heads, steps_per_head, g));
  } else {
    // One partial dot product per row of a head, summed on the NPU.
    const int64_t full_rows = s.head_dim / P;
    const int rest = s.head_dim % P;
    AddBlock(&p, group_size * s.num_kv_heads * full_rows, TilesOver(s.seq_len, 1, P / g.lanes, g));
    if (rest > 0) {
      AddBlock(&p, group_size * s.num_kv_heads,
               TilesOver(s.seq_len, 1, static_cast<int>(CeilDiv(rest, g.lanes)), g));
    }
  }
  return p;
}

absl::StatusOr<GemvProgram> PlanAttend(const AttentionShape& s, const PimGeometry& g) {
  RETURN_IF_ERROR(ValidateAttentionShape(s));
  GemvProgram p;
  const int P = g.page_elements;
  const int64_t chunks = CeilDiv(s.seq_len, P);
  const int64_t last_tokens = s.seq_len - (chunks - 1) * P;
  AddBlock(&p, static_cast<int64_t>(s.num_heads) * (chunks - 1),
           TilesOver(s.head_dim, 1, P / g.lanes, g));
  AddBlock(&p, s.num_heads,
           TilesOver(s.head_dim, 1, static_cast<int>(CeilDiv(last_tokens, g.lanes)), g));
  return p;
}

absl::StatusOr<GemvProgram> PlanAttention(const AttentionShape& s, const PimGeometry& g) {
  ASSIGN_OR_RETURN(GemvProgram p, PlanLogit(s, g));
  ASSIGN_OR_RETURN(GemvProgram attend, PlanAttend(s, g));
  p.Append(attend);
  return p;
}

absl::StatusOr<GemvProgram> PlanGemv(const GemvShape& s, const PimGeometry& g) {
  if (s.rows < 1 || s.cols < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("GEMV rows and cols must be >= 1, got ", s.rows, " x ", s.cols));
  }
  GemvProgram p;
  const int P = g.page_elements;
  const int64_t chunks = CeilDiv(s.cols, P);
  const int64_t last = s.cols - (chunks - 1) * P;
  AddBlock(&p, chunks - 1, TilesOver(s.rows, 1, P / g.lanes, g));
  AddBlock(&p, 1, TilesOver(s.rows, 1, static_cast<int>(CeilDiv(last, g.lanes)), g));
  return p;
}

}  // namespace neupims::hw
