#!/usr/bin/env bash
# The main job on the built-in default configuration: installs the dependencies, builds the
# `neupims` tool and runs it. With no arguments it replays 500 ShareGPT requests (Poisson,
# 20 requests/s) through the serving engine on the default NeuPIMs device (GPT3-7B, TP4) and
# prints the summary table. Any arguments are passed to `neupims` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
cmake --preset release > /dev/null
cmake --build --preset release --target neupims
bin=build/release/tools/neupims
if [ "$#" -gt 0 ]; then
  exec "$bin" "$@"
fi
exec "$bin" simulate --dataset sharegpt -n 500 --request-rate 20 --seed 0
