#!/usr/bin/env bash
# Offline check of the Kubernetes manifests (kubernetes-models): deploy/lint/check_kubernetes.mjs.
set -euo pipefail
src="$1"
lint="$src/deploy/lint"
if ! command -v node > /dev/null; then
  echo "SKIP: node not found (Debian nodejs; needed to check the Kubernetes manifests (kubernetes-models))"
  exit 77
fi
if [ ! -d "$lint/node_modules/kubernetes-models" ]; then
  echo "SKIP: deploy/lint/node_modules missing: npm ci --prefix deploy/lint (scripts/install_deps.sh)"
  exit 77
fi
node "$lint/check_kubernetes.mjs"
