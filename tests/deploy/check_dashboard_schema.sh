#!/usr/bin/env bash
# deploy/grafana/neupims.json type-checks as @grafana/schema's Dashboard (TypeScript).
set -euo pipefail
src="$1"
lint="$src/deploy/lint"
if ! command -v node > /dev/null; then
  echo "SKIP: node not found (Debian nodejs; needed for the @grafana/schema type check)"
  exit 77
fi
if [ ! -d "$lint/node_modules/@grafana/schema" ] || [ ! -d "$lint/node_modules/typescript" ]; then
  echo "SKIP: deploy/lint/node_modules missing: npm ci --prefix deploy/lint (scripts/install_deps.sh)"
  exit 77
fi
node "$lint/check_dashboard.mjs" "$src/deploy/grafana/neupims.json"
