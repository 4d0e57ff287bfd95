#!/usr/bin/env bash
# Whether two `neupims` binaries give the same `simulate --json` summaries (docs/benchmarks.md):
# the 10,000-request benchmark command and 2,000-request runs in each mode with standalone and
# local prefill, on the reference devices, with pipeline parallelism and at the command level,
# each compared by bench/compare_summaries.py (integers exact, reals to 1e-12 relative).
# Usage: bench/compare_builds.sh OLD_BIN NEW_BIN    (exit status 1 if any summary differs)
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 OLD_BIN NEW_BIN" >&2
  exit 2
fi
old=$1
new=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
configs=(
  "-n 10000"
  "-n 2000 --mode neupims" "-n 2000 --mode neupims --prefill local"
  "-n 2000 --mode npu+pim" "-n 2000 --mode npu+pim --prefill local"
  "-n 2000 --mode npu-only" "-n 2000 --mode npu-only --prefill local"
  "-n 2000 --mode neupims --device neupims-ref" "-n 2000 --mode npu+pim --device neupims-ref"
  "-n 2000 --mode npu-only --device npu-only-ref"
  "-n 2000 --mode neupims --pp 2" "-n 2000 --mode neupims --level command"
)
status=0
for c in "${configs[@]}"; do
  # shellcheck disable=SC2086  # each config is a list of flags
  "$old" simulate --dataset sharegpt $c --json --no-progress >"$dir/old.json" 2>/dev/null &&
    "$new" simulate --dataset sharegpt $c --json --no-progress >"$dir/new.json" 2>/dev/null || {
    echo "$c: a run failed" >&2
    status=1
    continue
  }
  echo "== $c"
  python3 "$here/compare_summaries.py" "$dir/old.json" "$dir/new.json" || status=1
done
exit $status
