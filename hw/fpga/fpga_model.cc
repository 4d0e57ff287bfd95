#include "hw/fpga/fpga_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace neupims::hw::fpga {
namespace {

// One double-buffered tile: what DDR moves in and out for it and what each engine computes.
struct Step {
  int64_t load_bytes = 0;
  int64_t save_bytes = 0;
  int64_t conv_cycles = 0;
  int64_t pool_cycles = 0;
  int64_t misc_cycles = 0;
};

// Input extent that produces `out` outputs (F^-1 / G^-1 of sec. 4.3), clipped to the input
// (padding is generated on chip, never loaded).
int64_t InputExtent(int64_t out, int64_t kernel, int64_t stride, int64_t in_size) {
  return std::min((out - 1) * stride + kernel, in_size);
}

absl::Status CheckDims(const Dims& d, absl::string_view what) {
  if (d.c < 1 || d.h < 1 || d.w < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " dims must be >= 1, got ", d.c, "x", d.h, "x", d.w));
  }
  return absl::OkStatus();
}

absl::Status CheckConv(const ConvOp& c) {
  RETURN_IF_ERROR(CheckDims(c.in, "conv input"));
  RETURN_IF_ERROR(CheckDims(c.out, "conv output"));
  if (c.kernel_h < 1 || c.kernel_w < 1 || c.stride_h < 1 || c.stride_w < 1 || c.groups < 1 ||
      c.in.c % c.groups != 0 || c.out.c % c.groups != 0) {
    return absl::InvalidArgumentError(
        "conv kernel, stride and groups must be >= 1 and groups "
        "must divide both channel counts");
  }
  return absl::OkStatus();
}

absl::Status PoolShapeFollows(const Dims& conv_out, const PoolOp& p) {
  if (p.in.c != conv_out.c || p.in.h != conv_out.h || p.in.w != conv_out.w) {
    return absl::InvalidArgumentError("the fused pool must read the convolution's output");
  }
  return absl::OkStatus();
}

// The tiling of one convolution (per channel group): eqs. 5-6 plus the loop order.
struct ConvTiling {
  int64_t ic = 0, oc = 0;  // channels per group
  int64_t tw = 0;          // T_w
  int64_t n_oc = 0, n_h = 0, n_w = 0;
  int64_t weight_bytes = 0;  // one group's weights
  int64_t input_bytes = 0;   // one group's input
};

// kMaxTilesPerGroup, checked before any tile is built: ResourceExhausted naming the count.
absl::Status CheckTileCount(const FpgaSpec& s, const char* what, const Dims& out, double tiles) {
  if (tiles <= static_cast<double>(kMaxTilesPerGroup)) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("a ", what, " to ", out.c, "x", out.h, "x", out.w, " is ",
                   absl::SixDigits(tiles), " tiles on ", s.name, ", more than the ",
                   kMaxTilesPerGroup, " one group may have (kMaxTilesPerGroup)"));
}

class Tiler {
 public:
  explicit Tiler(const FpgaSpec& s) : s_(s) {}

  // Eq. 6: the widest T_w whose slices fit the three buffers. ResourceExhausted if none does.
  absl::StatusOr<ConvTiling> Tile(const ConvOp& c) const {
    ConvTiling t;
    const int64_t e = s_.bytes_per_element;
    t.ic = c.in.c / c.groups;
    t.oc = c.out.c / c.groups;
    if (int64_t{s_.ic_p} * c.kernel_h * c.kernel_w * s_.oc_p * e > s_.weight_buffer_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("a ", c.kernel_h, "x", c.kernel_w,
                                                       " weight tile does not fit B_weights (",
                                                       s_.weight_buffer_bytes, " bytes)"));
    }
    const int64_t rows_in = InputExtent(s_.h_p, c.kernel_h, c.stride_h, c.in.h);
    const int64_t by_out = s_.output_buffer_bytes / (int64_t{s_.h_p} * s_.oc_p * e);
    const int64_t cols_in_max = s_.input_buffer_bytes / (int64_t{s_.ic_p} * rows_in * e);
    const int64_t by_in =
        cols_in_max < c.kernel_w ? 0 : (cols_in_max - c.kernel_w) / c.stride_w + 1;
    t.tw = std::min({c.out.w, by_out, by_in});
    if (t.tw < 1) {
      return absl::ResourceExhaustedError("no output tile width fits B_in and B_out");
    }
    t.n_oc = CeilDiv(t.oc, s_.oc_p);
    t.n_h = CeilDiv(c.out.h, s_.h_p);
    t.n_w = CeilDiv(c.out.w, t.tw);
    // In double: the product of four counts of up to 2^20 each can overflow int64.
    RETURN_IF_ERROR(CheckTileCount(s_, "convolution", c.out,
                                   static_cast<double>(c.groups) * static_cast<double>(t.n_oc) *
                                       static_cast<double>(t.n_h) * static_cast<double>(t.n_w)));
    t.weight_bytes = t.ic * c.kernel_h * c.kernel_w * t.oc * e;
    t.input_bytes = t.ic * c.in.h * c.in.w * e;
    return t;
  }

  // CONV cycles of one tile: input channels ic_p/2 at a time, kernel positions and output
  // columns one after another, h_p rows and oc_p channels in parallel (Fig. 6).
  int64_t TileCycles(const ConvOp& c, const ConvTiling& t, int64_t cols) const {
    return CeilDiv(t.ic, s_.ic_macs()) * c.kernel_h * c.kernel_w * cols;
  }

  int64_t SlabBytes(const ConvOp& c, const ConvTiling& t, int64_t rows_out, int64_t cols) const {
    return t.ic * InputExtent(rows_out, c.kernel_h, c.stride_h, c.in.h) *
           InputExtent(cols, c.kernel_w, c.stride_w, c.in.w) * s_.bytes_per_element;
  }

 private:
  const FpgaSpec& s_;
};

// Which operand stays on chip for a single convolution: the loop order moving fewer bytes.
enum class Resident { kWeights, kInput, kNone };

// Tiles of one convolution, appended to `steps`. Output channels are the inner loop when the
// weights stay on chip (each input slab loaded once), the outer loop otherwise.
absl::Status ConvSteps(const FpgaSpec& s, const ConvOp& c, std::vector<Step>* steps) {
  Tiler tiler(s);
  ASSIGN_OR_RETURN(ConvTiling t, tiler.Tile(c));
  const int64_t e = s.bytes_per_element;
  const int64_t slice_bytes = t.ic * c.kernel_h * c.kernel_w * s.oc_p * e;
  int64_t slabs_once = 0;  // every input slab loaded once
  for (int64_t h = 0; h < t.n_h; ++h) {
    for (int64_t w = 0; w < t.n_w; ++w) {
      slabs_once += tiler.SlabBytes(c, t, std::min<int64_t>(s.h_p, c.out.h - h * s.h_p),
                                    std::min(t.tw, c.out.w - w * t.tw));
    }
  }
  // Bytes moved in per group under each loop order.
  const int64_t weights_resident =
      t.weight_bytes <= s.weight_buffer_bytes ? t.weight_bytes + slabs_once : INT64_MAX;
  const int64_t input_resident =
      t.input_bytes <= s.input_buffer_bytes ? t.input_bytes + t.weight_bytes : INT64_MAX;
  const int64_t reload_input = t.weight_bytes + t.n_oc * slabs_once;
  const int64_t reload_weights = t.n_h * t.n_w * t.weight_bytes + slabs_once;
  Resident mode = Resident::kNone;
  int64_t best = std::min(reload_input, reload_weights);
  if (weights_resident <= best) mode = Resident::kWeights, best = weights_resident;
  if (input_resident < best) mode = Resident::kInput;
  const bool oc_outer =
      mode == Resident::kInput || (mode == Resident::kNone && reload_input <= reload_weights);

  for (int64_t g = 0; g < c.groups; ++g) {
    const int64_t outer = oc_outer ? t.n_oc : t.n_h * t.n_w;
    const int64_t inner = oc_outer ? t.n_h * t.n_w : t.n_oc;
    for (int64_t i = 0; i < outer; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t o = oc_outer ? i : j;
        const int64_t hw = oc_outer ? j : i;
        const int64_t rows = std::min<int64_t>(s.h_p, c.out.h - (hw / t.n_w) * s.h_p);
        const int64_t cols = std::min(t.tw, c.out.w - (hw % t.n_w) * t.tw);
        const int64_t ocs = std::min<int64_t>(s.oc_p, t.oc - o * s.oc_p);
        Step step;
        step.conv_cycles = tiler.TileCycles(c, t, cols);
        step.save_bytes = ocs * rows * cols * e;
        const bool first = i == 0 && j == 0;
        switch (mode) {
          case Resident::kWeights:
            if (first) step.load_bytes += t.weight_bytes;
            if (j == 0) step.load_bytes += tiler.SlabBytes(c, t, rows, cols);
            break;
          case Resident::kInput:
            if (first) step.load_bytes += t.input_bytes;
            if (j == 0) step.load_bytes += slice_bytes;
            break;
          case Resident::kNone:
            if (oc_outer) {
              if (j == 0) step.load_bytes += slice_bytes;
              step.load_bytes += tiler.SlabBytes(c, t, rows, cols);
            } else {
              if (j == 0) step.load_bytes += tiler.SlabBytes(c, t, rows, cols);
              step.load_bytes += slice_bytes;
            }
            break;
        }
        steps->push_back(step);
      }
    }
  }
  return absl::OkStatus();
}

// A standalone pooling: slabs of h_p output rows (all channels, or as many as fit B_in).
absl::Status PoolSteps(const FpgaSpec& s, const PoolOp& p, std::vector<Step>* steps) {
  RETURN_IF_ERROR(CheckDims(p.in, "pool input"));
  RETURN_IF_ERROR(CheckDims(p.out, "pool output"));
  if (p.out.c != p.in.c) return absl::InvalidArgumentError("pooling must keep the channel count");
  const int64_t e = s.bytes_per_element;
  auto chunk_of = [&](int64_t rows) {  // channels whose input rows fit half of B_in
    const int64_t per_channel = InputExtent(rows, p.kernel_h, p.stride_h, p.in.h) * p.in.w * e;
    return std::max<int64_t>(1, s.input_buffer_bytes / 2 / per_channel);
  };
  // Full slabs have the smallest chunk, so this bounds the steps below.
  RETURN_IF_ERROR(CheckTileCount(
      s, "pooling", p.out,
      static_cast<double>(CeilDiv(p.out.h, s.h_p)) *
          static_cast<double>(CeilDiv(p.in.c, chunk_of(std::min<int64_t>(s.h_p, p.out.h))))));
  for (int64_t h = 0; h < p.out.h; h += s.h_p) {
    const int64_t rows = std::min<int64_t>(s.h_p, p.out.h - h);
    const int64_t in_rows = InputExtent(rows, p.kernel_h, p.stride_h, p.in.h);
    const int64_t per_channel = in_rows * p.in.w * e;
    const int64_t chunk = chunk_of(rows);
    for (int64_t c = 0; c < p.in.c; c += chunk) {
      const int64_t ch = std::min(chunk, p.in.c - c);
      Step step;
      step.load_bytes = ch * per_channel;
      step.save_bytes = ch * rows * p.out.w * e;
      step.pool_cycles =
          CeilDiv(ch * rows * p.out.w * p.kernel_h * p.kernel_w, s.pool_ops_per_cycle);
      steps->push_back(step);
    }
  }
  return absl::OkStatus();
}

// A standalone element-wise operation: slabs of rows whose inputs fit half of B_in.
absl::Status MiscSteps(const FpgaSpec& s, const MiscOp& m, std::vector<Step>* steps) {
  RETURN_IF_ERROR(CheckDims(m.out, "misc output"));
  if (m.inputs < 1 || m.ops_per_element < 1) {
    return absl::InvalidArgumentError("misc op needs >= 1 input and >= 1 op per element");
  }
  const int64_t e = s.bytes_per_element;
  const int64_t row_bytes = m.out.c * m.out.w * e;
  const int64_t rows_per_step =
      std::max<int64_t>(1, s.input_buffer_bytes / 2 / (m.inputs * row_bytes));
  for (int64_t h = 0; h < m.out.h; h += rows_per_step) {
    const int64_t rows = std::min(rows_per_step, m.out.h - h);
    Step step;
    step.load_bytes = m.inputs * rows * row_bytes;
    step.save_bytes = rows * row_bytes;
    step.misc_cycles = CeilDiv(
        rows * m.out.c * m.out.w * m.ops_per_element * (m.inputs - 1 > 0 ? m.inputs - 1 : 1),
        s.misc_ops_per_cycle);
    steps->push_back(step);
  }
  return absl::OkStatus();
}

// Conv+Pool: each conv tile goes to the POOL engine instead of DDR; only the pooled tile is
// saved, and the pool's load and its group overhead disappear (sec. 4.1.3, Fig. 8).
absl::Status ConvPoolSteps(const FpgaSpec& s, const ConvOp& c, const PoolOp& p,
                           std::vector<Step>* steps) {
  RETURN_IF_ERROR(PoolShapeFollows(c.out, p));
  const size_t first = steps->size();
  RETURN_IF_ERROR(ConvSteps(s, c, steps));
  const double save_ratio = static_cast<double>(p.out.elements()) / c.out.elements();
  const double pool_per_out = static_cast<double>(p.out.elements()) * p.kernel_h * p.kernel_w /
                              c.out.elements() / s.pool_ops_per_cycle;
  for (size_t i = first; i < steps->size(); ++i) {
    Step& step = (*steps)[i];
    const double out_elements = static_cast<double>(step.save_bytes) / s.bytes_per_element;
    step.save_bytes = static_cast<int64_t>(std::ceil(step.save_bytes * save_ratio));
    step.pool_cycles = static_cast<int64_t>(std::ceil(out_elements * pool_per_out));
  }
  return absl::OkStatus();
}

// Conv+Eltwise: the MISC engine adds each conv tile to the matching tiles of the other operands
// (loaded alongside); the conv's save and the eltwise's reload of it disappear (Fig. 9).
absl::Status ConvEltwiseSteps(const FpgaSpec& s, const ConvOp& c, const MiscOp& m,
                              std::vector<Step>* steps) {
  if (m.out.c != c.out.c || m.out.h != c.out.h || m.out.w != c.out.w || m.inputs < 2) {
    return absl::InvalidArgumentError(
        "the fused eltwise must add the convolution's output to >= 1 tensor of its shape");
  }
  const size_t first = steps->size();
  RETURN_IF_ERROR(ConvSteps(s, c, steps));
  for (size_t i = first; i < steps->size(); ++i) {
    Step& step = (*steps)[i];
    const int64_t out_elements = step.save_bytes / s.bytes_per_element;
    step.load_bytes += (m.inputs - 1) * step.save_bytes;
    step.misc_cycles =
        CeilDiv(out_elements * (m.inputs - 1) * m.ops_per_element, s.misc_ops_per_cycle);
  }
  return absl::OkStatus();
}

// Convolutions whose weights all stay on chip, computed slab by slab of the last one's output
// rows. Shared by Conv+Conv (B reads A's rows from the output buffer; A's rows for B's halo
// are recomputed) and horizontal fusion (every member reads the same input slab).
struct SlabMember {
  const ConvOp* conv;
  ConvTiling tiling;
};

absl::Status CheckWeightsFit(const FpgaSpec& s, const std::vector<SlabMember>& members) {
  int64_t weights = 0;
  for (const SlabMember& m : members) weights += m.tiling.weight_bytes * m.conv->groups;
  if (weights > s.weight_buffer_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "fused weights (", weights, " bytes) exceed B_weights (", s.weight_buffer_bytes, ")"));
  }
  return absl::OkStatus();
}

int64_t SlabConvCycles(const FpgaSpec& s, const SlabMember& m, int64_t rows, int64_t cols) {
  const Tiler tiler(s);
  return m.conv->groups * m.tiling.n_oc * CeilDiv(rows, s.h_p) *
         tiler.TileCycles(*m.conv, m.tiling, cols);
}

absl::Status ConvConvSteps(const FpgaSpec& s, const ConvOp& a, const ConvOp& b,
                           std::vector<Step>* steps) {
  if (b.in.c != a.out.c || b.in.h != a.out.h || b.in.w != a.out.w) {
    return absl::InvalidArgumentError("the second convolution must read the first's output");
  }
  const Tiler tiler(s);
  ASSIGN_OR_RETURN(ConvTiling ta, tiler.Tile(a));
  ASSIGN_OR_RETURN(ConvTiling tb, tiler.Tile(b));
  const std::vector<SlabMember> members = {{&a, ta}, {&b, tb}};
  RETURN_IF_ERROR(CheckWeightsFit(s, members));
  const int64_t e = s.bytes_per_element;
  const int64_t rows_a = InputExtent(s.h_p, b.kernel_h, b.stride_h, b.in.h);
  if (a.out.c * rows_a * a.out.w * e + b.out.c * s.h_p * b.out.w * e > s.output_buffer_bytes) {
    return absl::ResourceExhaustedError("the intermediate rows do not fit B_out");
  }
  for (int64_t h = 0; h < b.out.h; h += s.h_p) {
    const int64_t rows = std::min<int64_t>(s.h_p, b.out.h - h);
    const int64_t need_a = InputExtent(rows, b.kernel_h, b.stride_h, b.in.h);
    Step step;
    if (h == 0) step.load_bytes += (ta.weight_bytes * a.groups + tb.weight_bytes * b.groups);
    step.load_bytes += a.in.c * InputExtent(need_a, a.kernel_h, a.stride_h, a.in.h) * a.in.w * e;
    step.conv_cycles = SlabConvCycles(s, members[0], need_a, a.out.w) +
                       SlabConvCycles(s, members[1], rows, b.out.w);
    step.save_bytes = b.out.c * rows * b.out.w * e;
    steps->push_back(step);
  }
  return absl::OkStatus();
}

// Pool+Conv: the POOL engine turns each input slab into the rows the convolution needs, which
// stay in the buffer; the pooled tensor never goes to DDR.
absl::Status PoolConvSteps(const FpgaSpec& s, const PoolOp& p, const ConvOp& c,
                           std::vector<Step>* steps) {
  RETURN_IF_ERROR(CheckDims(p.in, "pool input"));
  if (c.in.c != p.out.c || c.in.h != p.out.h || c.in.w != p.out.w || p.in.c != p.out.c) {
    return absl::InvalidArgumentError("the convolution must read the pool's output");
  }
  const Tiler tiler(s);
  ASSIGN_OR_RETURN(ConvTiling t, tiler.Tile(c));
  const std::vector<SlabMember> members = {{&c, t}};
  RETURN_IF_ERROR(CheckWeightsFit(s, members));
  const int64_t e = s.bytes_per_element;
  const int64_t pooled_rows = InputExtent(s.h_p, c.kernel_h, c.stride_h, c.in.h);
  if (p.in.c * InputExtent(pooled_rows, p.kernel_h, p.stride_h, p.in.h) * p.in.w * e >
      s.input_buffer_bytes) {
    return absl::ResourceExhaustedError("the pool's input rows do not fit B_in");
  }
  for (int64_t h = 0; h < c.out.h; h += s.h_p) {
    const int64_t rows = std::min<int64_t>(s.h_p, c.out.h - h);
    const int64_t need = InputExtent(rows, c.kernel_h, c.stride_h, c.in.h);
    Step step;
    if (h == 0) step.load_bytes += t.weight_bytes * c.groups;
    step.load_bytes += p.in.c * InputExtent(need, p.kernel_h, p.stride_h, p.in.h) * p.in.w * e;
    step.pool_cycles =
        CeilDiv(p.out.c * need * p.out.w * p.kernel_h * p.kernel_w, s.pool_ops_per_cycle);
    step.conv_cycles = SlabConvCycles(s, members[0], rows, c.out.w);
    step.save_bytes = c.out.c * rows * c.out.w * e;
    steps->push_back(step);
  }
  return absl::OkStatus();
}

absl::Status HorizontalSteps(const FpgaSpec& s, const std::vector<Op>& ops,
                             std::vector<Step>* steps) {
  const Tiler tiler(s);
  std::vector<SlabMember> members;
  for (const Op& op : ops) {
    if (op.kind != OpKind::kConv) {
      return absl::InvalidArgumentError("horizontal fusion takes convolutions only");
    }
    const ConvOp& c = op.conv;
    const ConvOp& c0 = ops[0].conv;
    if (c.in.c != c0.in.c || c.in.h != c0.in.h || c.in.w != c0.in.w || c.out.h != c0.out.h ||
        c.out.w != c0.out.w) {
      return absl::InvalidArgumentError(
          "horizontally fused convolutions must share their input and output size");
    }
    ASSIGN_OR_RETURN(ConvTiling t, tiler.Tile(c));
    members.push_back({&c, t});
  }
  RETURN_IF_ERROR(CheckWeightsFit(s, members));
  const int64_t e = s.bytes_per_element;
  const ConvOp& c0 = ops[0].conv;
  for (int64_t h = 0; h < c0.out.h; h += s.h_p) {
    const int64_t rows = std::min<int64_t>(s.h_p, c0.out.h - h);
    Step step;
    int64_t in_rows = 0;
    for (const SlabMember& m : members) {
      if (h == 0) step.load_bytes += m.tiling.weight_bytes * m.conv->groups;
      in_rows = std::max(in_rows, InputExtent(rows, m.conv->kernel_h, m.conv->stride_h, c0.in.h));
      step.conv_cycles += SlabConvCycles(s, m, rows, m.conv->out.w);
      step.save_bytes += m.conv->out.c * rows * m.conv->out.w * e;
    }
    step.load_bytes += c0.in.c * in_rows * c0.in.w * e;
    steps->push_back(step);
  }
  return absl::OkStatus();
}

absl::Status GroupSteps(const FpgaSpec& s, const Group& g, std::vector<Step>* steps) {
  auto kinds = [&](std::initializer_list<OpKind> want) {
    if (g.ops.size() != want.size()) return false;
    size_t i = 0;
    for (OpKind k : want) {
      if (g.ops[i++].kind != k) return false;
    }
    return true;
  };
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::kConv) RETURN_IF_ERROR(CheckConv(op.conv));
  }
  switch (g.fusion) {
    case Fusion::kSingle:
      if (g.ops.size() != 1) break;
      if (g.ops[0].kind == OpKind::kConv) return ConvSteps(s, g.ops[0].conv, steps);
      if (g.ops[0].kind == OpKind::kPool) return PoolSteps(s, g.ops[0].pool, steps);
      return MiscSteps(s, g.ops[0].misc, steps);
    case Fusion::kConvPool:
      if (!kinds({OpKind::kConv, OpKind::kPool})) break;
      return ConvPoolSteps(s, g.ops[0].conv, g.ops[1].pool, steps);
    case Fusion::kConvEltwise:
      if (!kinds({OpKind::kConv, OpKind::kMisc})) break;
      return ConvEltwiseSteps(s, g.ops[0].conv, g.ops[1].misc, steps);
    case Fusion::kPoolConv:
      if (!kinds({OpKind::kPool, OpKind::kConv})) break;
      return PoolConvSteps(s, g.ops[0].pool, g.ops[1].conv, steps);
    case Fusion::kConvConv:
      if (!kinds({OpKind::kConv, OpKind::kConv})) break;
      return ConvConvSteps(s, g.ops[0].conv, g.ops[1].conv, steps);
    case Fusion::kHorizontal:
      if (g.ops.size() < 2) break;
      return HorizontalSteps(s, g.ops, steps);
  }
  return absl::InvalidArgumentError("the group's operations do not match its fusion template");
}

// The double-buffered pipeline over the steps (header diagram): DDR loads step t+1 and saves
// step t-1 while the engines work on step t.
GroupCost Pipeline(const FpgaSpec& s, const std::vector<Step>& steps, int active_cores) {
  GroupCost cost;
  const double bw = s.ddr_bytes_per_cycle(active_cores);
  auto ddr = [&](int64_t bytes) { return static_cast<int64_t>(std::ceil(bytes / bw)); };
  const size_t n = steps.size();
  int64_t cycles = s.group_overhead_cycles;
  if (n > 0) cycles += ddr(steps[0].load_bytes) + ddr(steps[n - 1].save_bytes);
  for (size_t t = 0; t < n; ++t) {
    const Step& st = steps[t];
    const int64_t moved =
        (t + 1 < n ? steps[t + 1].load_bytes : 0) + (t > 0 ? steps[t - 1].save_bytes : 0);
    cycles += std::max({st.conv_cycles, st.pool_cycles, st.misc_cycles, ddr(moved)});
    cost.load_bytes += st.load_bytes;
    cost.save_bytes += st.save_bytes;
    cost.conv_cycles += st.conv_cycles;
    cost.pool_cycles += st.pool_cycles;
    cost.misc_cycles += st.misc_cycles;
  }
  cost.tiles = static_cast<int64_t>(n);
  cost.ddr_cycles = ddr(cost.load_bytes + cost.save_bytes);
  cost.cycles = cycles;
  cost.time_s = s.clock().CyclesToSeconds(static_cast<double>(cycles));
  cost.energy_j = s.power_w * cost.time_s;
  return cost;
}

double ConvOps(const ConvOp& c) {
  return 2.0 * c.kernel_h * c.kernel_w * (c.in.c / c.groups) * c.out.c * c.out.h * c.out.w;
}

}  // namespace

absl::StatusOr<GroupCost> FpgaModel::Cost(const Group& group, int active_cores) const {
  if (group.ops.empty()) return absl::InvalidArgumentError("empty group");
  if (active_cores < 1 || active_cores > spec_.cores) {
    return absl::InvalidArgumentError(
        absl::StrCat("active_cores must be in [1, ", spec_.cores, "], got ", active_cores));
  }
  std::vector<Step> steps;
  RETURN_IF_ERROR(GroupSteps(spec_, group, &steps));
  GroupCost cost = Pipeline(spec_, steps, active_cores);
  for (const Op& op : group.ops) {
    if (op.kind == OpKind::kConv) cost.ops += ConvOps(op.conv);
  }
  return cost;
}

}  // namespace neupims::hw::fpga
