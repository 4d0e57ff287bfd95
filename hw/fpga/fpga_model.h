// Timing and energy of DNNVM instruction groups on the FPGA accelerator (paper 002, sec. 3.1,
// 4.1.3 and 4.3).
//
// The accelerator has LOAD / SAVE (DDR <-> on-chip buffers), CONV, POOL and MISC engines that
// run concurrently on double-buffered tiles. A *group* is one or more operations compiled into
// one instruction stream: a single operation, or a kernel-fusion template (Conv+Pool,
// Conv+Eltwise, Conv+Conv, horizontal convolutions sharing their input). Groups run one after
// another; within a group the engines overlap tile by tile:
//
//   DDR : [load 0][load 1 + save -][load 2 + save 0] ...            [save n-1]
//   CONV:         [   conv 0     ][     conv 1     ] ... [conv n-1]
//   POOL/MISC:    [   pool 0     ][     pool 1     ] ...
//
//   group cycles = overhead + load(0) + sum_t max(conv_t, pool_t, misc_t, ddr_t) + save(n-1)
//   ddr_t        = (load(t+1) + save(t-1)) / DDR bytes per cycle      (one DDR for both ways)
//
// Tiling follows eqs. 5-6: T_h = h_p output rows, T_oc = oc_p output channels, the input
// channels streamed ic_p/2 at a time, and T_w the widest output tile whose input, weight and
// output slices fit B_in, B_weights and B_out. A tile's CONV time is
// ceil(IC/(ic_p/2)) * Kh * Kw * T_w cycles (all h_p rows and oc_p channels in parallel).
// DDR traffic depends on what stays on chip: weights of all output channels (then each input
// slab is loaded once), or the whole input (then each weight slice is loaded once), or neither
// (the compiler picks the loop order that moves fewer bytes). Fusion removes the DDR round trip
// of the intermediate tensor, the reload of a shared input, and one group overhead.
//
// hw/ knows nothing of graphs: callers describe each operation by its shapes.
#ifndef NEUPIMS_HW_FPGA_FPGA_MODEL_H_
#define NEUPIMS_HW_FPGA_FPGA_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/fpga/fpga_spec.h"

namespace neupims::hw::fpga {

// Feature-map shape of one image (channels x rows x columns).
struct Dims {
  int64_t c = 0, h = 0, w = 0;
  int64_t elements() const { return c * h * w; }
};

// A convolution (a fully-connected layer is a 1x1 convolution over a 1x1 map).
struct ConvOp {
  Dims in, out;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t groups = 1;
};

// A pooling window over each channel.
struct PoolOp {
  Dims in, out;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride_h = 1, stride_w = 1;
};

// An element-wise operation on the MISC engine (e.g. the add of a residual block): `inputs`
// tensors of shape `out` in, one out, `ops_per_element` operations per output element.
struct MiscOp {
  Dims out;
  int inputs = 2;
  int64_t ops_per_element = 1;
};

enum class OpKind { kConv, kPool, kMisc };

struct Op {
  OpKind kind = OpKind::kConv;
  ConvOp conv;
  PoolOp pool;
  MiscOp misc;
  static Op Conv(const ConvOp& c) { return Op{.kind = OpKind::kConv, .conv = c}; }
  static Op Pool(const PoolOp& p) { return Op{.kind = OpKind::kPool, .pool = p}; }
  static Op Misc(const MiscOp& m) { return Op{.kind = OpKind::kMisc, .misc = m}; }
};

// DNNVM's kernel-fusion templates (sec. 4.1.3) and the unfused single operation.
enum class Fusion {
  kSingle,       // ops = {any}
  kConvPool,     // ops = {conv, pool of the conv's output}
  kConvEltwise,  // ops = {conv, misc adding the conv's output to (inputs - 1) loaded tensors}
  kConvConv,     // ops = {conv A, conv B reading A's output}
  kPoolConv,     // ops = {pool, conv reading the pool's output}
  kHorizontal,   // ops = {conv, conv, ...} all reading the same input
};

struct Group {
  Fusion fusion = Fusion::kSingle;
  std::vector<Op> ops;
};

// The most tiles (steps) one group may have. FpgaModel::Cost walks a group tile by tile, so a
// layer of far more tiles (a graph file may give every dimension up to 2^20) would take
// gigabytes and minutes; it is ResourceExhausted naming the count instead (a layer the device
// cannot run, as when a weight tile does not fit B_weights). A 4K frame
// (2160 x 3840) through a 3x3 convolution of 64 channels is about 200,000 tiles on ZU2.
inline constexpr int64_t kMaxTilesPerGroup = int64_t{1} << 22;

struct GroupCost {
  int64_t cycles = 0;
  double time_s = 0;
  double energy_j = 0;  // board power x time (Table 5 gives power per board, nothing finer)
  double ops = 0;       // eq. 3 work of the convolutions (2 per MAC)
  int64_t tiles = 0;
  int64_t load_bytes = 0;
  int64_t save_bytes = 0;
  int64_t conv_cycles = 0;  // busy cycles of each engine
  int64_t pool_cycles = 0;
  int64_t misc_cycles = 0;
  int64_t ddr_cycles = 0;
};

class FpgaModel {
 public:
  explicit FpgaModel(FpgaSpec spec) : spec_(std::move(spec)) {}

  // Cost of one group on one core while `active_cores` cores share the DDR. InvalidArgument
  // for a malformed group (wrong op kinds or shapes for its template), ResourceExhausted when
  // the group's working set does not fit the on-chip buffers (then it cannot be fused).
  absl::StatusOr<GroupCost> Cost(const Group& group, int active_cores = 1) const;

  const FpgaSpec& spec() const { return spec_; }

 private:
  FpgaSpec spec_;
};

}  // namespace neupims::hw::fpga

#endif  // NEUPIMS_HW_FPGA_FPGA_MODEL_H_
