#!/usr/bin/env bash
# Installs every build and test dependency of the project from Debian's packages, and the npm
# packages of the deploy/ checks (deploy/lint, when npm is available).
# Idempotent: packages already present are skipped, so a second run is a no-op.
# --build-only: only what building the binaries needs (the container image's build stage, which
#   configures with NEUPIMS_BUILD_TESTS=OFF and NEUPIMS_BUILD_BENCH=OFF): no test or benchmark
#   libraries, no formatter.
# --list: print the packages the other options select, one a line, and install nothing.
set -euo pipefail

BUILD_ONLY=0
LIST=0
for arg in "$@"; do
  case "$arg" in
    --build-only) BUILD_ONLY=1 ;;
    --list) LIST=1 ;;
    *)
      echo "install_deps: unknown option '$arg' (allowed: --build-only, --list)" >&2
      exit 2
      ;;
  esac
done

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libtbb-dev prometheus-cpp-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libssl-dev
)
if [ "$BUILD_ONLY" -eq 0 ]; then
  # The test suite and bench/ (GoogleTest, Google Benchmark), and clang-format for developers
  # (the house style: every touched file is formatted).
  PACKAGES+=(libgtest-dev libgmock-dev libbenchmark-dev clang-format)
  # Tests of deploy/: promtool and a real Prometheus server (tests/deploy). The fuzz preset:
  # clang 14 and its libFuzzer / sanitizer runtimes.
  PACKAGES+=(prometheus clang-14 libclang-rt-14-dev)
  # The TLS tests make their CA and certificates with the openssl command (tests/server).
  PACKAGES+=(openssl)
fi

# The deploy/ type checks (Grafana dashboard, Kubernetes manifests) use pinned npm packages.
install_deploy_lint() {
  if [ "$BUILD_ONLY" -eq 1 ]; then return; fi
  local lint
  lint="$(cd "$(dirname "$0")/.." && pwd)/deploy/lint"
  if ! command -v npm > /dev/null; then
    echo "install_deps: npm not found; the deploy/ type checks will be skipped"
    return
  fi
  if [ ! -d "$lint/node_modules" ]; then
    echo "install_deps: npm ci --prefix deploy/lint"
    # Offline (no registry) is not an error: the checks then skip and say why.
    if ! npm ci --prefix "$lint" --no-audit --no-fund --loglevel=error; then
      echo "install_deps: npm ci failed (offline?); the deploy/ type checks will be skipped"
      rm -rf "$lint/node_modules"
    fi
  fi
}

if [ "$LIST" -eq 1 ]; then
  printf '%s\n' "${PACKAGES[@]}"
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  install_deploy_lint
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_deploy_lint
