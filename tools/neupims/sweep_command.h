// `neupims sweep`: a design-space grid (model x device x mode x dataset x batch, from a JSON
// spec) of steady-state decode throughput, scaled out by sharding: `--shard i/N` runs every N-th
// point and writes one JSON per shard; `neupims sweep merge` combines shard files into the tables
// of a single run (docs/deploy.md; deploy/kubernetes/sweep-job.yaml runs the shards as an
// Indexed Job).
#ifndef NEUPIMS_TOOLS_NEUPIMS_SWEEP_COMMAND_H_
#define NEUPIMS_TOOLS_NEUPIMS_SWEEP_COMMAND_H_

#include "CLI/CLI.hpp"

namespace neupims::cli {

void RegisterSweepCommand(CLI::App& app, int* exit_code);

}  // namespace neupims::cli

#endif  // NEUPIMS_TOOLS_NEUPIMS_SWEEP_COMMAND_H_
