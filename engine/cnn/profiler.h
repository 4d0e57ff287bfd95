// DONNA's profiler (paper 003, sec. II-A and Fig. 1b): one CNN on one cluster ->
// scheduler::partition::Profile, the per-layer time, energy and tensor sizes every partitioner
// reads.
//
// Layers are the canonical graph's nodes that do work (convolution, fully-connected, pooling,
// element-wise, LRN, softmax, a standalone ReLU), in topological order; the input and Concat are
// not layers (a Concat is a strided SAVE of its producers, so its readers read its producers'
// tensors). Each layer is costed alone on each device:
//
//   CPU / GPU  hw::roofline: FLOPs = eq. 3 work + element operations; bytes = weights + inputs +
//              output at FP32; a measured CSV entry overrides the roofline for its layer
//   CIM        hw::cim: conv / FC on the crossbars (FC a 1x1 conv over 1x1), the rest on the
//              digital periphery
//   FPGA       engine::cnn::LowerGroup (a singleton group) + hw::fpga::FpgaModel::Cost, in waves
//              of `cores` images; FC, LRN and Softmax do not run on DNNVM (sec. 6.1): kCannotRun
//   HPIM       hw::hpim: MACs on the fixed-function units, element operations on the core
//
// A layer whose weights exceed a device's memory cannot run there either. If some layer runs
// nowhere, BuildProfile fails with "model ... fits on no device", naming each device's memory
// and what it cannot run.
//
// Bytes: every byte in the Profile (output, weights, cuts, input) is FP32, 4 per element, the
// precision DONNA's tensors cross links in (its 12,845,056-byte example is VGG's 64x224x224
// FP32 conv1 output). INT8 devices (CIM, FPGA) hold 8-bit weights, so their memory_bytes in the
// Profile is their weight capacity x 4: the partitioner compares like with like.
#ifndef NEUPIMS_ENGINE_CNN_PROFILER_H_
#define NEUPIMS_ENGINE_CNN_PROFILER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/cluster/cluster.h"
#include "models/cnn/graph.h"
#include "scheduler/partition/profile.h"

namespace neupims::engine::cnn {

// The precision of every tensor that crosses a link, and of the Profile's weight bytes.
inline constexpr int64_t kTransferBytesPerElement = 4;

// Nodes of the canonical `graph` that are Profile layers, in order.
std::vector<int> ProfiledNodes(const models::cnn::Graph& canonical);

// Element-wise operations of a node beyond eq. 3 (pooling windows, adds, ReLU, LRN, softmax).
double ElementOps(const models::cnn::Graph& canonical, int node);

// `graph` in framework or canonical form (it is canonicalised first).
absl::StatusOr<scheduler::partition::Profile> BuildProfile(const models::cnn::Graph& graph,
                                                           const hw::cluster::Cluster& cluster);

}  // namespace neupims::engine::cnn

#endif  // NEUPIMS_ENGINE_CNN_PROFILER_H_
