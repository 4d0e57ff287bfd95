#include "engine/cnn/fpga_compiler.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace neupims::engine::cnn {
namespace {

using models::cnn::FusionGroup;
using models::cnn::FusionKind;
using models::cnn::Graph;
using models::cnn::Node;
using models::cnn::OpKind;

hw::fpga::Dims DimsOf(const models::cnn::Shape& s) { return {s.c, s.h, s.w}; }

absl::StatusOr<hw::fpga::Op> LowerNode(const Graph& g, const Node& n) {
  if (PlacementOf(n) != Placement::kFpga) {
    return absl::InvalidArgumentError(
        absl::StrCat("node '", n.name, "' (", OpKindName(n.kind), ") does not run on the FPGA"));
  }
  const hw::fpga::Dims in = DimsOf(g.nodes[n.inputs.at(0)].out);
  const hw::fpga::Dims out = DimsOf(n.out);
  switch (n.kind) {
    case OpKind::kConv:
      return hw::fpga::Op::Conv({.in = in,
                                 .out = out,
                                 .kernel_h = n.window.kernel_h,
                                 .kernel_w = n.window.kernel_w,
                                 .stride_h = n.window.stride_h,
                                 .stride_w = n.window.stride_w,
                                 .groups = n.groups});
    case OpKind::kPool: {
      const bool global = n.global_pool;
      return hw::fpga::Op::Pool({.in = in,
                                 .out = out,
                                 .kernel_h = global ? in.h : n.window.kernel_h,
                                 .kernel_w = global ? in.w : n.window.kernel_w,
                                 .stride_h = global ? 1 : n.window.stride_h,
                                 .stride_w = global ? 1 : n.window.stride_w});
    }
    default:  // kEltwise, kReLU: element-wise on MISC
      return hw::fpga::Op::Misc(
          {.out = out, .inputs = static_cast<int>(n.inputs.size()), .ops_per_element = 1});
  }
}

hw::fpga::Fusion FusionOf(FusionKind kind) {
  switch (kind) {
    case FusionKind::kSingle:
      return hw::fpga::Fusion::kSingle;
    case FusionKind::kConvPool:
      return hw::fpga::Fusion::kConvPool;
    case FusionKind::kConvEltwise:
      return hw::fpga::Fusion::kConvEltwise;
    case FusionKind::kConvConv:
      return hw::fpga::Fusion::kConvConv;
    case FusionKind::kPoolConv:
      return hw::fpga::Fusion::kPoolConv;
    case FusionKind::kHorizontal:
      return hw::fpga::Fusion::kHorizontal;
  }
  return hw::fpga::Fusion::kSingle;
}

std::string Label(const Graph& g, const FusionGroup& f) {
  std::vector<std::string> names;
  for (int n : f.nodes) names.push_back(g.nodes[n].name);
  return absl::StrJoin(names, "+");
}

}  // namespace

Placement PlacementOf(const Node& node) {
  switch (node.kind) {
    case OpKind::kConv:
    case OpKind::kPool:
    case OpKind::kEltwise:
    case OpKind::kReLU:
      return Placement::kFpga;
    case OpKind::kInput:
    case OpKind::kConcat:
    case OpKind::kFlatten:
    case OpKind::kDropout:
      return Placement::kFree;
    default:
      return Placement::kHost;
  }
}

absl::StatusOr<hw::fpga::Group> LowerGroup(const Graph& graph, const FusionGroup& group) {
  hw::fpga::Group out{.fusion = FusionOf(group.kind)};
  for (int n : group.nodes) {
    ASSIGN_OR_RETURN(hw::fpga::Op op, LowerNode(graph, graph.nodes.at(n)));
    out.ops.push_back(op);
  }
  return out;
}

absl::StatusOr<FpgaCompilation> CompileForFpga(const Graph& graph, const hw::fpga::FpgaSpec& spec,
                                               models::cnn::StrategyKind strategy) {
  ASSIGN_OR_RETURN(Graph g, models::cnn::Canonicalize(graph));
  const hw::fpga::FpgaModel model(spec);
  FpgaCompilation out;
  out.model = g.name;
  out.device = spec.name;
  out.strategy = strategy;
  out.batch = g.batch;
  out.active_cores = static_cast<int>(std::min<int64_t>(spec.cores, g.batch));

  std::map<std::vector<int>, hw::fpga::GroupCost> costs;
  absl::Status lowering_error;
  // Why the last singleton could not run: ChooseStrategy stops at the first such node and names
  // it, but only the cost model knows which limit (buffer, tiles) it exceeds.
  absl::Status singleton_error;
  auto cost = [&](const FusionGroup& f) -> std::optional<double> {
    if (f.nodes.size() == 1 && PlacementOf(g.nodes[f.nodes[0]]) != Placement::kFpga) return 0.0;
    absl::StatusOr<hw::fpga::Group> lowered = LowerGroup(g, f);
    if (!lowered.ok()) {
      lowering_error.Update(lowered.status());
      return std::nullopt;
    }
    absl::StatusOr<hw::fpga::GroupCost> c = model.Cost(*lowered, out.active_cores);
    if (!c.ok()) {
      // A fusion whose working set does not fit is simply not a candidate.
      if (!absl::IsResourceExhausted(c.status())) lowering_error.Update(c.status());
      if (f.nodes.size() == 1) singleton_error = c.status();
      return std::nullopt;
    }
    costs[f.nodes] = *c;
    return c->time_s;
  };
  const std::vector<FusionGroup> candidates = models::cnn::EnumerateFusions(g);
  out.candidates = static_cast<int>(candidates.size());
  absl::StatusOr<models::cnn::Strategy> chosen =
      models::cnn::ChooseStrategy(g, candidates, strategy, cost);
  RETURN_IF_ERROR(lowering_error);
  if (!chosen.ok() && !singleton_error.ok()) {
    return absl::Status(chosen.status().code(),
                        absl::StrCat(chosen.status().message(), ": ", singleton_error.message()));
  }
  RETURN_IF_ERROR(chosen.status());

  const int64_t waves = CeilDiv(g.batch, out.active_cores);
  double image_time_s = 0;
  for (const FusionGroup& f : chosen->groups) {
    const Node& first = g.nodes[f.nodes[0]];
    if (f.nodes.size() == 1 && PlacementOf(first) == Placement::kHost) {
      out.host_nodes.push_back(first.name);
    }
    auto it = costs.find(f.nodes);
    if (it == costs.end()) continue;  // free or host
    out.groups.push_back({f, Label(g, f), it->second});
    if (f.nodes.size() > 1) ++out.fused_groups;
    image_time_s += it->second.time_s;
    out.load_bytes += it->second.load_bytes * g.batch;
    out.save_bytes += it->second.save_bytes * g.batch;
  }
  // Cores take `active_cores` images at a time, all sharing the DDR (the cost above).
  out.time_s = image_time_s * static_cast<double>(waves);
  out.conv_gop = models::cnn::ConvGops(g);
  out.energy_j = spec.power_w * out.time_s;
  out.gops_per_s = out.time_s > 0 ? out.conv_gop / out.time_s : 0;
  out.gops_per_w = spec.power_w > 0 ? out.gops_per_s / spec.power_w : 0;
  return out;
}

}  // namespace neupims::engine::cnn
