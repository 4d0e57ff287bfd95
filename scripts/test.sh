#!/usr/bin/env bash
# Installs the dependencies, builds with a CMake preset (default: release) and runs the whole
# test suite with CTest. Usage: scripts/test.sh [release|debug|asan|tsan|fuzz]
# (fuzz: builds only the libFuzzer targets and runs each for NEUPIMS_FUZZ_SECONDS, 30 by default.)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
./scripts/install_deps.sh
cmake --preset "$preset" > /dev/null
cmake --build --preset "$preset"
ctest --preset "$preset"
