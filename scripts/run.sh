#!/usr/bin/env bash
# The main job on the built-in default configuration: installs the dependencies, builds, and
#  1. starts the server (`neupims serve`: GPT3-7B, TP4, NeuPIMs device, realtime pacing): gRPC on
#     127.0.0.1:${NEUPIMS_PORT:-50051}, the OpenAI-compatible HTTP API on
#     :${NEUPIMS_HTTP_PORT:-8000} and Prometheus metrics on :${NEUPIMS_METRICS_PORT:-9400};
#  2. replays 200 ShareGPT requests (Poisson, 20 requests/s) through it with the load generator
#     (`neupims-bench`), which prints the serving summary (client and simulated views) and writes
#     an HTML report to ${NEUPIMS_REPORT_DIR:-out/report}/report.html; then replays the same
#     requests through the OpenAI-compatible HTTP API (`--backend openai`), report in
#     ${NEUPIMS_REPORT_DIR:-out/report}/openai/report.html, so the two front ends compare in one run;
#  3. in a terminal, keeps the server running for you to talk to (docs/api.md) until Ctrl-C;
#     otherwise drains and stops it.
# With arguments, runs `neupims <arguments>` instead (e.g. `scripts/run.sh simulate -n 2000`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
cmake --preset release > /dev/null
cmake --build --preset release --target neupims neupims-bench
bin=build/release/tools
if [ "$#" -gt 0 ]; then
  exec "$bin/neupims" "$@"
fi

port="${NEUPIMS_PORT:-50051}"
metrics_port="${NEUPIMS_METRICS_PORT:-9400}"
http_port="${NEUPIMS_HTTP_PORT:-8000}"
report_dir="${NEUPIMS_REPORT_DIR:-out/report}"
"$bin/neupims" serve --port "$port" --metrics-port "$metrics_port" --http-port "$http_port" &
server=$!
stop_server() {
  if kill -0 "$server" 2> /dev/null; then
    kill -TERM "$server"
    wait "$server" || true
  fi
}
trap stop_server EXIT

"$bin/neupims-bench" --server "127.0.0.1:$port" --connect-timeout-s 30 \
  --dataset sharegpt -n 200 --request-rate 20 --seed 0 --report "$report_dir"
echo
"$bin/neupims-bench" --backend openai --base-url "http://127.0.0.1:$http_port" \
  --connect-timeout-s 30 --dataset sharegpt -n 200 --request-rate 20 --seed 0 \
  --report "$report_dir/openai"

if [ -t 0 ]; then
  cat << MSG

The server is still running: gRPC 127.0.0.1:$port, OpenAI-compatible HTTP http://127.0.0.1:$http_port/v1,
metrics http://127.0.0.1:$metrics_port/metrics
  $bin/neupims-bench --server 127.0.0.1:$port --dataset alpaca -n 500 --request-rate 50
  $bin/neupims-bench --backend openai --base-url http://127.0.0.1:$http_port --dataset alpaca -n 500 --request-rate 50
  grpcurl -plaintext -d '{"text": "Hello", "max_new_tokens": 16}' 127.0.0.1:$port neupims.v1.LlmService/Generate
  curl -N http://127.0.0.1:$http_port/v1/completions -d '{"prompt": "Hello", "max_tokens": 16, "stream": true}'
(docs/api.md for the API, docs/loadgen.md for the load generator). Ctrl-C stops it.
MSG
  trap - EXIT
  trap 'stop_server; exit 0' INT TERM
  wait "$server"
fi
