// An RRAM compute-in-memory accelerator in the style of DNN+NeuroSim V1.3's defaults (DONNA's
// CIM device, paper 003 sec. III-A and Fig. 1d; NeuroSim Param.cpp): 1T1R cells at 22 nm in
// 128 x 128 sub-arrays, 2-bit cells, a 5-bit ADC shared by 8 columns, 8-bit weights and
// activations fed bit-serially, a 10 ns read pulse. Parameters are data (configs/cim/*.json),
// each with its source in the file's `sources` object.
//
// Mapping (Fig. 1d, NeuroSim's novel mapping): a KxK convolution is spread over K^2 sub-matrices,
// one per kernel position, each IC rows x OC*(weight_bits/cell_bits) columns, so
//
//   arrays = K^2 * ceil(IC/rows) * ceil(OC * weight_bits/cell_bits / cols)     (per group)
//
// and every array holds its weights for the whole inference (weight-stationary, all arrays of a
// layer work in parallel). A fully-connected layer is a 1x1 convolution over a 1x1 map.
//
// Latency of an MVM layer (NeuroSim ProcessingUnit: numInVector = pixels x input bits, each a
// sub-array read of numColMuxed sensing cycles, then the adder tree over the row arrays):
//
//   t_read  = pixels * input_bits * columns_per_adc * read_pulse * sensing_latency_factor
//   t_shift = pixels * input_bits * (columns_per_adc + ceil(columns_per_adc / cells_per_weight))
//             / clock
//   t_accum = pixels * columns_per_adc * ceil(log2(row arrays)) / clock
//
// t_shift: after each input bit's sensing cycles the sub-array shifts and adds the cells of a
// weight (numColMuxed cycles) and the input bits (numColMuxed / cells per weight cycles);
// SubArray.cpp and ShiftAdd.cpp charge both in synchronous mode.
//
// Moving the activations (NeuroSim Chip.cpp, layer-by-layer): the layer's inputs leave the global
// buffer and its outputs return to it over the global H-tree, `bus` bits wide. A layer on the
// novel mapping reuses an input over the K kernel rows, so Chip.cpp loads IC*K^2/K_h per pixel
// (IC*K^2 on the conventional mapping). The buffer moves one line of each of ceil(bus / line)
// cores per cycle:
//
//   bits_in  = IC * K_w (* K_h) * input_bits * pixels   bits_out = OC * input_bits * pixels
//   t_buffer = (bits_in + bits_out) / (ceil(bus / line) * line) / clock * buffer_share
//   t_ic     = ceil((bits_in + bits_out) / bus) / clock     (one H-tree cycle per transfer)
//
// buffer_share is Chip.cpp's ceil(chip tiles / layer tiles): the global buffer's bandwidth is
// spread over the tiles of the whole chip, and a layer reaches only its own tiles' share of it.
// Floorplan() places a network the way NeuroSim sizes its chip to get it.
//
// Energy: every mapped cell is read once per input bit (activity-weighted), every mapped column
// of every row array converted once per input bit, and the partial sums of the row arrays added
// (W = OC * weight_bits / cell_bits weight columns):
//
//   E_cells = pixels * input_bits * K^2*IC*W * activity * V^2 * G_avg * read_pulse
//   E_adc   = pixels * input_bits * row arrays * W * E_conversion
//   E_accum = pixels * OC * input_bits * (row arrays - 1) * E_add
//   E_buffer = (bits_in + bits_out) * E_buffer_bit             (one read or write per bit moved)
//
// Operations without weights (pooling, element-wise adds, LRN, softmax) run on the chip's digital
// periphery: ops / (digital_ops_per_cycle * clock), ops * E_add.
#ifndef NEUPIMS_HW_CIM_CIM_MODEL_H_
#define NEUPIMS_HW_CIM_CIM_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neupims::hw::cim {

struct CimSpec {
  std::string name;
  std::string description;
  std::string cell;  // "1T1R"
  int technology_nm = 22;
  int array_rows = 128;
  int array_cols = 128;
  int cell_bits = 2;
  int weight_bits = 8;
  int input_bits = 8;
  int adc_bits = 5;
  int columns_per_adc = 8;
  double read_pulse_s = 10e-9;
  double sensing_latency_factor = 1;  // NeuroSim's validated "beta"
  double clock_hz = 1e9;
  double read_voltage_v = 0.5;
  double r_on_ohm = 6e3;
  double r_off_ohm = 9e5;
  double input_activity = 0.5;  // fraction of input bits that are 1
  double adc_energy_j = 0;      // per conversion
  double add_energy_j = 0;      // per digital add (accumulation and periphery)
  int digital_ops_per_cycle = 128;
  int64_t weight_capacity = 0;     // 8-bit weights the chip holds
  int max_global_bus_bits = 2048;  // the widest global bus NeuroSim builds
  int buffer_line_bits = 128;      // a global buffer core's line, moved in one cycle
  double buffer_bit_energy_j = 0;  // per bit read from or written to a buffer

  // Cells (array columns) one weight spans; validation makes it whole.
  int64_t cells_per_weight() const { return weight_bits / cell_bits; }
  // Mean cell conductance (cells spread evenly over the levels between G_off and G_on).
  double mean_conductance_s() const { return 0.5 * (1 / r_on_ohm + 1 / r_off_ohm); }
  double cell_read_energy_j() const {
    return read_voltage_v * read_voltage_v * mean_conductance_s() * read_pulse_s;
  }
};

absl::StatusOr<CimSpec> LoadCimSpec(absl::string_view name_or_path);
std::vector<std::string> BuiltinCimNames();

// A convolution or fully-connected layer (for FC: kernel 1, out_pixels = batch).
struct MvmOp {
  int64_t in_channels = 0;   // per group
  int64_t out_channels = 0;  // all groups
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t groups = 1;
  int64_t out_pixels = 0;  // output H * W * images
  // Where the layer sits on the network's chip (Floorplan); the defaults: a chip of this layer
  // alone, on the novel mapping.
  bool novel_mapping = true;
  int64_t buffer_share = 1;  // chip tiles / layer tiles, rounded up
  double bus_bits = 0;       // the chip's global bus width; 0: max_global_bus_bits
};

// A layer's place on NeuroSim's chip for the whole network.
struct ChipLayer {
  bool novel_mapping = false;
  int64_t tiles = 0;
  int64_t buffer_share = 1;
  double bus_bits = 0;  // the chip's global bus width, the same for every layer
};

struct ArrayMapping {
  int64_t row_arrays = 0;  // K^2 * ceil(IC / rows): partial sums added by the adder tree
  int64_t col_arrays = 0;  // ceil(OC * weight_bits / cell_bits / cols), per group
  int64_t arrays = 0;      // row_arrays * col_arrays * groups
};

struct CimCost {
  double time_s = 0;
  double energy_j = 0;
  double read_s = 0, shift_add_s = 0, accumulate_s = 0, buffer_s = 0, interconnect_s = 0;
  double cell_energy_j = 0, adc_energy_j = 0, accumulate_energy_j = 0, buffer_energy_j = 0;
  double bits_moved = 0;  // bits_in + bits_out
  ArrayMapping mapping;
};

class CimModel {
 public:
  explicit CimModel(CimSpec spec) : spec_(std::move(spec)) {}

  ArrayMapping Map(const MvmOp& op) const;
  // InvalidArgument for a non-positive shape.
  absl::StatusOr<CimCost> Mvm(const MvmOp& op) const;
  // `ops` digital operations on the periphery.
  CimCost Digital(double ops) const;
  // NeuroSim's floorplan of `layers` (one network) on one chip (Chip.cpp, layer-by-layer): the
  // layers of the most common kernel size above 1x1 with at least a sub-array of rows take the
  // novel mapping (a tile of K^2 PEs of P x P cells), the rest the conventional one (T x T tiles);
  // P and T are the powers of two, from the widest layer's down to 4 and 8 sub-arrays, that
  // maximise the mapped share of the tiles. The global bus is the tiles' interfaces summed (P*K
  // or T columns each, plus their ADC outputs) and halved down to max_global_bus_bits. One entry
  // per layer, in order.
  std::vector<ChipLayer> Floorplan(const std::vector<MvmOp>& layers) const;

  const CimSpec& spec() const { return spec_; }

 private:
  // The global buffer and H-tree terms of moving the layer's activations in and out.
  void AddMovement(const MvmOp& op, CimCost* c) const;

  CimSpec spec_;
};

}  // namespace neupims::hw::cim

#endif  // NEUPIMS_HW_CIM_CIM_MODEL_H_
