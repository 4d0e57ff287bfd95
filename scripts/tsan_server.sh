#!/usr/bin/env bash
# The gRPC server suites under ThreadSanitizer, repeatedly (issue 18): builds the tsan preset's
# server and tools test binaries (and the `neupims` binary ServeSignals drives), then runs every
# test whose name matches the server pattern N times in a row, stopping at the first failure or
# TSan report (the preset's TSAN_OPTIONS: halt_on_error=1, tests/tsan.supp).
# Usage: scripts/tsan_server.sh [N]   (N: repetitions, 20 by default)
# Not in CI (.ci/run): a cold tsan build takes ~25 min on 2 cores; 20 passes ~15 min at -j2.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat="${1:-20}"
pattern='Server|Tls|ServeSignals|Cnn|OpenAi|EngineRunner'
./scripts/install_deps.sh
cmake --preset tsan > /dev/null
cmake --build --preset tsan --target server_tests tools_tests neupims
ctest --preset tsan -j2 --repeat "until-fail:${repeat}" -R "$pattern"
