#include "engine/cnn/profiler.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/cnn/fpga_compiler.h"
#include "hw/cim/cim_model.h"
#include "hw/fpga/fpga_model.h"
#include "hw/hpim/hpim_model.h"
#include "hw/roofline/roofline.h"
#include "models/cnn/fusion.h"

namespace neupims::engine::cnn {
namespace {

using hw::cluster::Device;
using hw::cluster::DeviceKind;
using models::cnn::Graph;
using models::cnn::Node;
using models::cnn::OpKind;
using scheduler::partition::kCannotRun;
using scheduler::partition::Profile;

// Caffe's default LRN window (AlexNet and GoogLeNet use it; the IR does not keep local_size).
constexpr double kLrnWindow = 5;

struct LayerCost {
  double time_s = kCannotRun;
  double energy_j = kCannotRun;
  std::string why;  // when it cannot run
};

LayerCost Runs(double time_s, double energy_j) { return {time_s, energy_j, ""}; }
LayerCost CannotRun(std::string why) { return {kCannotRun, kCannotRun, std::move(why)}; }

int64_t TensorBytes(const Graph& g, int node) {
  return g.nodes[node].out.elements() * g.batch * kTransferBytesPerElement;
}

bool IsMvm(const Node& n) { return n.kind == OpKind::kConv || n.kind == OpKind::kFullyConnected; }

LayerCost OnRoofline(const Graph& g, int node, const hw::cluster::RooflineDevice& d) {
  const models::cnn::NodeWork w = models::cnn::Work(g, node, d.spec.bytes_per_element);
  const hw::roofline::RooflineModel model(d.spec, d.measured);
  const hw::roofline::Cost c =
      model.CostOf(g.nodes[node].name, {.flops = w.ops + ElementOps(g, node),
                                        .bytes = w.weight_bytes + w.input_bytes + w.output_bytes});
  return Runs(c.time_s, c.energy_j);
}

// A convolution or FC node as a crossbar layer (an FC is a 1x1 conv over a 1x1 map).
hw::cim::MvmOp CimOp(const Graph& g, int node) {
  const Node& n = g.nodes[node];
  const models::cnn::Shape& in = g.nodes[n.inputs.at(0)].out;
  const bool fc = n.kind == OpKind::kFullyConnected;
  return {.in_channels = fc ? in.elements() : in.c / n.groups,
          .out_channels = n.out.c,
          .kernel_h = fc ? 1 : n.window.kernel_h,
          .kernel_w = fc ? 1 : n.window.kernel_w,
          .groups = fc ? 1 : n.groups,
          .out_pixels = (fc ? 1 : n.out.h * n.out.w) * g.batch};
}

// NeuroSim sizes the chip to the whole network (Chip.cpp): every MVM node's place on it, by node.
std::vector<hw::cim::ChipLayer> ChipFloorplan(const Graph& g, const hw::cim::CimModel& model) {
  std::vector<int> nodes;
  std::vector<hw::cim::MvmOp> ops;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!IsMvm(g.nodes[i])) continue;
    nodes.push_back(static_cast<int>(i));
    ops.push_back(CimOp(g, static_cast<int>(i)));
  }
  const std::vector<hw::cim::ChipLayer> placed = model.Floorplan(ops);
  std::vector<hw::cim::ChipLayer> by_node(g.nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) by_node[nodes[i]] = placed[i];
  return by_node;
}

absl::StatusOr<LayerCost> OnCim(const Graph& g, int node, const hw::cim::CimModel& model,
                                const std::vector<hw::cim::ChipLayer>& chip) {
  if (!IsMvm(g.nodes[node])) {
    const hw::cim::CimCost c = model.Digital(ElementOps(g, node));
    return Runs(c.time_s, c.energy_j);
  }
  hw::cim::MvmOp op = CimOp(g, node);
  op.novel_mapping = chip[node].novel_mapping;
  op.buffer_share = chip[node].buffer_share;
  op.bus_bits = chip[node].bus_bits;
  ASSIGN_OR_RETURN(hw::cim::CimCost c, model.Mvm(op));
  const hw::cim::CimCost relu = model.Digital(ElementOps(g, node));  // a folded ReLU
  return Runs(c.time_s + relu.time_s, c.energy_j + relu.energy_j);
}

absl::StatusOr<LayerCost> OnFpga(const Graph& g, int node, const hw::fpga::FpgaSpec& spec) {
  const Node& n = g.nodes[node];
  if (PlacementOf(n) != Placement::kFpga) {
    return CannotRun(absl::StrCat(models::cnn::OpKindName(n.kind),
                                  " (DNNVM runs it on the host, paper 002 sec. 6.1)"));
  }
  ASSIGN_OR_RETURN(hw::fpga::Group group, LowerGroup(g, {.nodes = {node}}));
  const int cores = static_cast<int>(std::min<int64_t>(spec.cores, g.batch));
  absl::StatusOr<hw::fpga::GroupCost> c = hw::fpga::FpgaModel(spec).Cost(group, cores);
  if (absl::IsResourceExhausted(c.status())) return CannotRun(std::string(c.status().message()));
  RETURN_IF_ERROR(c.status());
  const double waves = static_cast<double>((g.batch + cores - 1) / cores);
  return Runs(c->time_s * waves, c->energy_j * waves);
}

absl::StatusOr<LayerCost> OnHpim(const Graph& g, int node, const hw::hpim::HpimSpec& spec) {
  const models::cnn::NodeWork w = models::cnn::Work(g, node, spec.bytes_per_element);
  ASSIGN_OR_RETURN(
      hw::hpim::PimCost c,
      hw::hpim::HpimModel(spec).Cost({.macs = w.macs,
                                      .other_flops = ElementOps(g, node),
                                      .bytes = w.weight_bytes + w.input_bytes + w.output_bytes}));
  return Runs(c.time_s, c.energy_j);
}

// `chip`: the network's floorplan on a CIM device (ChipFloorplan), unused by the others.
absl::StatusOr<LayerCost> CostOn(const Graph& g, int node, const Device& d,
                                 const std::vector<hw::cim::ChipLayer>& chip) {
  switch (d.kind) {
    case DeviceKind::kCpu:
    case DeviceKind::kGpu:
      return OnRoofline(g, node, std::get<hw::cluster::RooflineDevice>(d.spec));
    case DeviceKind::kCim:
      return OnCim(g, node, hw::cim::CimModel(std::get<hw::cim::CimSpec>(d.spec)), chip);
    case DeviceKind::kFpga:
      return OnFpga(g, node, std::get<hw::fpga::FpgaSpec>(d.spec));
    case DeviceKind::kHpim:
      return OnHpim(g, node, std::get<hw::hpim::HpimSpec>(d.spec));
  }
  return absl::InternalError("unhandled device kind");
}

int ElementBytes(const Device& d) {
  switch (d.kind) {
    case DeviceKind::kCpu:
    case DeviceKind::kGpu:
      return std::get<hw::cluster::RooflineDevice>(d.spec).spec.bytes_per_element;
    case DeviceKind::kCim:
      return std::get<hw::cim::CimSpec>(d.spec).weight_bits / 8;
    case DeviceKind::kFpga:
      return std::get<hw::fpga::FpgaSpec>(d.spec).bytes_per_element;
    case DeviceKind::kHpim:
      return std::get<hw::hpim::HpimSpec>(d.spec).bytes_per_element;
  }
  return 1;
}

// The layers that read node `p`'s tensor, looking through Concat (free) nodes.
void Readers(const Graph& g, const std::vector<std::vector<int>>& consumers, int p,
             std::vector<int>* out) {
  for (int c : consumers[p]) {
    if (g.nodes[c].kind == OpKind::kConcat) {
      Readers(g, consumers, c, out);
    } else {
      out->push_back(c);
    }
  }
}

// cut_bytes[i]: every tensor produced at or before layer i (or the input) and read after it.
std::vector<int64_t> CutBytes(const Graph& g, const std::vector<int>& layers) {
  std::vector<int> position(g.nodes.size(), -1);  // input and concat: -1
  for (size_t i = 0; i < layers.size(); ++i) position[layers[i]] = static_cast<int>(i);
  const std::vector<std::vector<int>> consumers = g.Consumers();
  std::vector<int64_t> cut(layers.empty() ? 0 : layers.size() - 1, 0);
  for (size_t p = 0; p < g.nodes.size(); ++p) {
    const bool producer = g.nodes[p].kind == OpKind::kInput || position[p] >= 0;
    if (!producer) continue;
    std::vector<int> readers;
    Readers(g, consumers, static_cast<int>(p), &readers);
    int last = -1;
    for (int r : readers) last = std::max(last, position[r]);
    // Live across cuts position[p] .. last - 1.
    for (int i = std::max(position[p], 0); i < last && i < static_cast<int>(cut.size()); ++i) {
      cut[i] += TensorBytes(g, static_cast<int>(p));
    }
  }
  return cut;
}

// The devices, their memory in FP32 bytes (an INT8 device's capacity x 4).
std::vector<scheduler::partition::ProfiledDevice> ProfileDevices(
    const hw::cluster::Cluster& cluster) {
  std::vector<scheduler::partition::ProfiledDevice> out;
  for (const Device& d : cluster.devices) {
    out.push_back({.name = d.name,
                   .kind = hw::cluster::ToString(d.kind),
                   .memory_bytes = d.memory_bytes / ElementBytes(d) * kTransferBytesPerElement});
  }
  return out;
}

std::vector<std::vector<scheduler::partition::LinkCost>> ProfileLinks(
    const hw::cluster::Cluster& cluster) {
  std::vector<std::vector<scheduler::partition::LinkCost>> out;
  for (const std::vector<hw::link::Link>& row : cluster.link) {
    out.emplace_back();
    for (const hw::link::Link& l : row) {
      out.back().push_back({.medium = l.medium,
                            .bytes_per_s = l.bytes_per_s,
                            .joules_per_bit = l.joules_per_bit,
                            .latency_s = l.latency_s});
    }
  }
  return out;
}

absl::Status FitsSomewhere(const Profile& p, const std::vector<std::vector<std::string>>& why) {
  for (size_t l = 0; l < p.layers.size(); ++l) {
    if (std::any_of(p.time_s[l].begin(), p.time_s[l].end(),
                    [](double t) { return t != kCannotRun; })) {
      continue;
    }
    const auto largest = std::max_element(
        p.layers.begin(), p.layers.end(),
        [](const auto& a, const auto& b) { return a.weight_bytes < b.weight_bytes; });
    std::vector<std::string> devices;
    for (size_t d = 0; d < p.devices.size(); ++d) {
      devices.push_back(absl::StrCat(p.devices[d].name, " (", p.devices[d].kind, "): memory ",
                                     p.devices[d].memory_bytes, " bytes, ", why[l][d]));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("model '", p.model, "' fits on no device: layer '", p.layers[l].name,
                     "' runs nowhere (largest layer weights: '", largest->name, "' ",
                     largest->weight_bytes, " bytes FP32); ", absl::StrJoin(devices, "; ")));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int> ProfiledNodes(const Graph& canonical) {
  std::vector<int> out;
  for (size_t i = 0; i < canonical.nodes.size(); ++i) {
    const OpKind k = canonical.nodes[i].kind;
    if (k != OpKind::kInput && k != OpKind::kConcat && k != OpKind::kFlatten &&
        k != OpKind::kDropout) {
      out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

double ElementOps(const Graph& g, int node) {
  const Node& n = g.nodes[node];
  const double out = static_cast<double>(n.out.elements() * g.batch);
  const double relu = n.relu ? out : 0;
  switch (n.kind) {
    case OpKind::kPool: {
      const models::cnn::Shape& in = g.nodes[n.inputs.at(0)].out;
      const double window = n.global_pool
                                ? static_cast<double>(in.h * in.w)
                                : static_cast<double>(n.window.kernel_h * n.window.kernel_w);
      return out * window + relu;
    }
    case OpKind::kEltwise:
      return out * static_cast<double>(n.inputs.size() - 1) + relu;
    case OpKind::kReLU:
      return out;
    case OpKind::kLrn:  // square and sum over the window, then scale, power and divide
      return out * (2 * kLrnWindow + 3);
    case OpKind::kSoftmax:  // max, exp, sum, divide
      return out * 4;
    default:
      return relu;  // conv / FC: their MACs are eq. 3 work
  }
}

absl::StatusOr<Profile> BuildProfile(const Graph& graph, const hw::cluster::Cluster& cluster) {
  ASSIGN_OR_RETURN(Graph g, models::cnn::Canonicalize(graph));
  Profile p;
  p.model = g.name;
  p.devices = ProfileDevices(cluster);
  const std::vector<int> layers = ProfiledNodes(g);
  std::vector<std::vector<hw::cim::ChipLayer>> chip(cluster.devices.size());
  for (size_t d = 0; d < cluster.devices.size(); ++d) {
    if (cluster.devices[d].kind != DeviceKind::kCim) continue;
    chip[d] =
        ChipFloorplan(g, hw::cim::CimModel(std::get<hw::cim::CimSpec>(cluster.devices[d].spec)));
  }
  std::vector<std::vector<std::string>> why(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const int node = layers[l];
    const models::cnn::NodeWork w = models::cnn::Work(g, node, kTransferBytesPerElement);
    p.layers.push_back({.name = g.nodes[node].name,
                        .output_bytes = w.output_bytes,
                        .weight_bytes = w.weight_bytes});
    p.time_s.emplace_back();
    p.energy_j.emplace_back();
    for (size_t d = 0; d < cluster.devices.size(); ++d) {
      ASSIGN_OR_RETURN(LayerCost c, CostOn(g, node, cluster.devices[d], chip[d]));
      if (c.time_s != kCannotRun && w.weight_bytes > p.devices[d].memory_bytes) {
        c = CannotRun(absl::StrCat("'", g.nodes[node].name, "' weights ", w.weight_bytes,
                                   " bytes exceed its memory"));
      }
      why[l].push_back(c.time_s == kCannotRun ? c.why : "runs");
      p.time_s.back().push_back(c.time_s);
      p.energy_j.back().push_back(c.energy_j);
    }
  }
  RETURN_IF_ERROR(FitsSomewhere(p, why));
  p.cut_bytes = CutBytes(g, layers);
  p.input_bytes = TensorBytes(g, 0);
  p.link = ProfileLinks(cluster);
  p.input_device = cluster.input_device;
  return p;
}

}  // namespace neupims::engine::cnn
