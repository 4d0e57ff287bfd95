#!/usr/bin/env bash
# The load generator's own limits (docs/benchmarks.md, "Load generator"): the request rate it
# sustains and its CPU cost per request. Starts a `neupims serve --pacing fast` server (GPT3-7B,
# TP4, NeuPIMs) on 127.0.0.1:${PORT:-50151}, sweeps `neupims-bench` over ${RATES} with
# ${N} short synthetic requests per rate (32 prompt, 16 output tokens, so the server is as cheap
# as it gets and the client's own cost shows), and prints one line per rate: the run (target
# rate), achieved send rate, send lag p99 / max, completed req/s, failed, client CPU per request.
# Usage: bench/loadgen_limits.sh [build dir, default build/release]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
port="${PORT:-50151}"
rates="${RATES:-100,200,400,800,1600,3200,6400,12800,inf}"
n="${N:-2000}"
out="$(mktemp -d)"

"$build/tools/neupims" serve --pacing fast --port "$port" --metrics-port -1 --max-waiting 0 \
  > "$out/server.log" 2>&1 &
server=$!
cleanup() {
  kill -TERM "$server" 2> /dev/null || true
  wait "$server" 2> /dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT

"$build/tools/neupims-bench" --server "127.0.0.1:$port" --connect-timeout-s 30 -q \
  --synthetic 32:16 -n "$n" --seed 0 --sweep-rates "$rates" > "$out/summary.txt"

# Each run's summary opens with a "Run:" row and ends its head with the client rows.
awk -F':' '
  function val(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
  BEGIN { printf "%-12s %-12s %-20s %-13s %-7s %s\n", "run", "sent req/s",
          "send lag p99/max ms", "done req/s", "failed", "client CPU ms/req" }
  /^Run:/ { target = val($2) }
  /^Failed requests:/ { failed = val($2) }
  /^Request throughput/ { done = val($2) }
  /^Achieved send rate/ { sent = val($2) }
  /^Send lag p99 \/ max/ { lag = val($2) }
  /^Client CPU per request/ {
    printf "%-12s %-12s %-20s %-13s %-7s %s\n", target, sent, lag, done, failed, val($2)
    sent = "-"; lag = "-"
  }
' "$out/summary.txt"
