#!/usr/bin/env bash
# The main job on the built-in default configuration: installs the dependencies, builds the
# `neupims` tool and runs it. With no arguments it describes the default NeuPIMs device and
# simulates one request-layer's attention on a PIM channel at command level, validated by the
# independent timing checker. Any arguments are passed to `neupims` instead.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
cmake --preset release > /dev/null
cmake --build --preset release --target neupims
bin=build/release/tools/neupims
if [ "$#" -gt 0 ]; then
  exec "$bin" "$@"
fi
"$bin" hw info
echo
exec "$bin" hw attention --seq-len 1024 --heads 8 --head-dim 128 --check
