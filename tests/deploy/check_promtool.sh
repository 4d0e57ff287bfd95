#!/usr/bin/env bash
# promtool on deploy/prometheus/: the scrape configs and the rules are valid, and the rules' unit
# tests (rules_test.yml: at least one per alert) pass.
set -euo pipefail
src="$1"
if ! command -v promtool > /dev/null; then
  echo "SKIP: promtool not found (Debian package prometheus; scripts/install_deps.sh installs it)"
  exit 77
fi
cd "$src/deploy/prometheus"
promtool check config prometheus.yml prometheus-compose.yml
promtool check rules rules.yml
promtool test rules rules_test.yml
# Every alert has a test: its name appears as an alertname in the unit tests.
missing=0
for alert in $(sed -n 's/^ *- alert: *//p' rules.yml); do
  if ! grep -q "alertname: $alert\$" rules_test.yml; then
    echo "no promtool unit test for alert $alert" >&2
    missing=1
  fi
done
exit $missing
