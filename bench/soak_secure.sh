#!/usr/bin/env bash
# A soak of a secured `neupims serve` (issue 18): mutual TLS and a bearer token on both front
# ends. Makes a throw-away PKI with the `openssl` command (a CA, a server certificate for
# localhost / 127.0.0.1, a client certificate), starts the server with --tls-cert, --tls-key,
# --tls-client-ca and --auth-token-file (fast pacing, ports chosen by the system), then runs
# `soak --front-end http` and `soak` (gRPC) against it with the client certificate and the
# token, the server's counts read from its HTTP API's /metrics. Every soak check must pass, then
# SIGTERM must stop the server with exit status 0.
#
# Usage: bench/soak_secure.sh NEUPIMS SOAK [HTTP_REQUESTS]
#   (the gRPC soak makes three times as many calls; CTest: Soak.ShortSecure). Exits 77 (skipped)
#   without openssl.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 NEUPIMS SOAK [HTTP_REQUESTS]" >&2
  exit 2
fi
neupims=$(realpath "$1")
soak=$(realpath "$2")
n=${3:-1000}
if ! command -v openssl >/dev/null; then
  echo "skipped: no openssl command (scripts/install_deps.sh installs it)"
  exit 77
fi

dir=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then kill -KILL "$server_pid"; fi
  rm -rf "$dir"
}
trap cleanup EXIT
cd "$dir"

# The PKI, as tests/server/test_pki.h makes it.
pki() { openssl "$@" >>openssl.log 2>&1 || { cat openssl.log >&2; exit 1; }; }
leaf() {  # name cn extensions serial
  printf '%b' "$3" >"$1.ext"
  pki req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$2" \
    -keyout "$1.key" -out "$1.csr"
  pki x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -set_serial "$4" -days 2 -extfile "$1.ext" \
    -out "$1.pem"
}
pki req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=soak-ca \
  -keyout ca.key -out ca.pem
leaf server localhost "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n" 2
leaf client soak-client "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n\
extendedKeyUsage=clientAuth\n" 3
openssl rand -hex 24 >token

: >serve.log  # there before the server's shell opens it: the loop below reads it at once
"$neupims" serve --pacing fast --port 0 --http-port 0 --metrics-port -1 \
  --tls-cert server.pem --tls-key server.key --tls-client-ca ca.pem --auth-token-file token \
  >serve.log 2>&1 &
server_pid=$!
grpc_port= http_port=
for _ in $(seq 300); do
  grpc_port=$(sed -n 's/^ *gRPC *127\.0\.0\.1:\([0-9]*\).*/\1/p' serve.log)
  http_port=$(sed -n 's|^ *HTTP *https://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' serve.log)
  [ -n "$grpc_port" ] && [ -n "$http_port" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$grpc_port" ] || [ -z "$http_port" ]; then
  echo "soak_secure: the server did not start:" >&2
  cat serve.log >&2
  exit 1
fi
cat serve.log

secure=(--tls-ca ca.pem --tls-cert client.pem --tls-key client.key --auth-token-file token
        --metrics "https://127.0.0.1:$http_port" --clients 8 --seed 7)
"$soak" --front-end http --target "127.0.0.1:$http_port" --grpc "127.0.0.1:$grpc_port" \
  --requests "$n" "${secure[@]}"
"$soak" --target "127.0.0.1:$grpc_port" --requests $((3 * n)) "${secure[@]}"

# The server's memory after both soaks (printed, not checked: the soaks bound their own RSS, and
# the server's HTTP threads grow it up to the pool's size, docs/reliability.md).
grep -E '^(VmRSS|VmHWM|Threads):' "/proc/$server_pid/status" | sed 's/^/server /' || true
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=
tail -n 2 serve.log
if [ "$status" -ne 0 ]; then
  echo "soak_secure: the server exited with status $status after SIGTERM" >&2
  exit 1
fi
echo "soak_secure: PASSED"
