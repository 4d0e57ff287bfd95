// DeviceConfig: one simulated NPU+PIM device (NPU + HBM channels + PIM datapath) as data.
//
// Role: the typed form of configs/devices/<name>.json. LoadDeviceConfig accepts a built-in
// name ("neupims", "newton", "npu-only") or a file path; every field is required, unknown
// fields are errors naming the file and field (common/config_reader.h).
#ifndef NEUPIMS_HW_DEVICE_H_
#define NEUPIMS_HW_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "hw/dram/hbm_spec.h"
#include "hw/npu/npu_spec.h"

namespace neupims::hw {

struct DeviceConfig {
  std::string name;
  std::string description;
  NpuSpec npu;
  HbmSpec hbm;  // includes the PIM datapath (hbm.pim)
  // Whether tensor-parallel shards all-reduce their partial results after attention and after
  // the FFN (docs/hw.md). True is what TP needs; the reference simulator simulates one sharded
  // device and no all-reduce (issue 14).
  bool tp_all_reduce = true;
  // Whether a decoder layer's stages are separated by barriers (engine/stage_graph.h): every
  // operation of stage k+1 waits for every operation of stage k, so a stage lasts the longest
  // of its NPU and PIM programs. False: operations start as soon as their inputs and a unit are
  // free (list scheduling). True is the reference simulator's (stages A, B, E; A-F over two
  // layers with sub-batch interleaving; issue 14).
  bool stage_barriers = false;

  // Peak HBM bandwidth of the whole device, bytes per second.
  double PeakHbmBytesPerSecond() const;
  // HBM cycles per NPU cycle (clock-domain ratio).
  double HbmCyclesPerNpuCycle() const { return hbm.frequency_mhz / npu.frequency_mhz; }
};

// Resolves a built-in name or a path and parses it.
absl::StatusOr<DeviceConfig> LoadDeviceConfig(absl::string_view name_or_path);
// Parses JSON text; `source` names it in error messages.
absl::StatusOr<DeviceConfig> ParseDeviceConfig(absl::string_view json, absl::string_view source);

}  // namespace neupims::hw

#endif  // NEUPIMS_HW_DEVICE_H_
