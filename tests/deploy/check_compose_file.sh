#!/usr/bin/env bash
# Offline check of deploy/compose.yaml (yaml): deploy/lint/check_compose.mjs.
set -euo pipefail
src="$1"
lint="$src/deploy/lint"
if ! command -v node > /dev/null; then
  echo "SKIP: node not found (Debian nodejs; needed to check deploy/compose.yaml (yaml))"
  exit 77
fi
if [ ! -d "$lint/node_modules/yaml" ]; then
  echo "SKIP: deploy/lint/node_modules missing: npm ci --prefix deploy/lint (scripts/install_deps.sh)"
  exit 77
fi
node "$lint/check_compose.mjs"
