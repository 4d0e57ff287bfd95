// A cluster of heterogeneous devices and the media between them (DONNA's set D, paper 003 sec.
// II and IV-C), loaded from configs/clusters/*.json:
//
//   {"name": "donna-hetero", "description": "...",
//    "devices": [{"name": "cpu0", "kind": "cpu", "config": "xeon-w3323"},
//                {"name": "gpu0", "kind": "gpu", "config": "rtx3070ti", "profile": "gpu.csv"},
//                {"name": "cim0", "kind": "cim", "config": "neurosim"},
//                {"name": "fpga0", "kind": "fpga", "config": "zu9", "memory_bytes": 4294967296}],
//    "links": {"default": {"medium": "hb-wcc"},
//              "pairs": [{"between": ["cim0", "gpu0"], "medium": "lb-wcc"},
//                        {"between": ["cpu0", "gpu0"], "medium": "eth",
//                         "bytes_per_s": 1.25e9, "joules_per_bit": 5e-9, "latency_s": 1e-5}]},
//    "input_device": "cim0"}
//
// A device's `config` is a built-in name of its kind or a path to a JSON file; `profile` (CPU and
// GPU only) a measured `layer,time_s,energy_j` CSV that overrides the roofline; `memory_bytes`
// (required for an FPGA, whose spec has no DDR capacity) the board memory. A link is a DONNA
// Table I medium by name, or a custom medium with its bandwidth, energy per bit and latency;
// pairs are symmetric and override the default. Errors name the file and the field: an unknown
// device kind (listing the kinds), a duplicate device name, a link to a missing device, a
// non-positive bandwidth, a device config that does not load.
#ifndef NEUPIMS_HW_CLUSTER_CLUSTER_H_
#define NEUPIMS_HW_CLUSTER_CLUSTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/enum_names.h"
#include "hw/cim/cim_model.h"
#include "hw/fpga/fpga_spec.h"
#include "hw/hpim/hpim_model.h"
#include "hw/link/link.h"
#include "hw/roofline/roofline.h"

namespace neupims::hw::cluster {

enum class DeviceKind { kCpu, kGpu, kCim, kFpga, kHpim };
const EnumNames<DeviceKind>& DeviceKindNames();
const char* ToString(DeviceKind kind);

struct RooflineDevice {
  roofline::RooflineSpec spec;
  roofline::MeasuredProfile measured;
};

struct Device {
  std::string name;  // unique in the cluster
  DeviceKind kind = DeviceKind::kCpu;
  std::string config;  // as written: built-in name or path
  std::variant<RooflineDevice, cim::CimSpec, fpga::FpgaSpec, hpim::HpimSpec> spec;
  // Bytes the device holds for weights: RAM (CPU, GPU, HPIM, FPGA board), 8-bit weights (CIM).
  int64_t memory_bytes = 0;
};

struct Cluster {
  std::string name;
  std::string description;
  std::vector<Device> devices;
  // link[d][e] for d != e; link[d][d] is unused (a zero-cost "local" medium).
  std::vector<std::vector<link::Link>> link;

  // Where the model's input arrives (an edge device, DONNA sec. IV-C): the first stage runs
  // there. Unset: the input is available on whichever device takes the first stage.
  std::optional<int> input_device;

  int Find(absl::string_view device) const;  // index or -1
};

// A built-in name ("edge-cloud": configs/clusters/edge-cloud.json) or a path.
absl::StatusOr<Cluster> LoadCluster(absl::string_view name_or_path);
absl::StatusOr<Cluster> ParseCluster(absl::string_view json_text, std::string source);
std::vector<std::string> BuiltinClusterNames();

}  // namespace neupims::hw::cluster

#endif  // NEUPIMS_HW_CLUSTER_CLUSTER_H_
