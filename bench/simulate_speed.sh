#!/usr/bin/env bash
# Simulation speed of `neupims simulate` (simulated time / wall time, as --json reports it),
# for one or two binaries run alternately on the same machine in one invocation: the median of
# REPS runs each and, for two binaries, the ratio of the medians (docs/benchmarks.md).
# Usage: bench/simulate_speed.sh [-n REQUESTS] [-r REPS] NEW_BIN [OLD_BIN] [-- SIMULATE_ARGS...]
set -euo pipefail
n=10000
reps=5
while getopts "n:r:" opt; do
  case "$opt" in
    n) n="$OPTARG" ;;
    r) reps="$OPTARG" ;;
    *) echo "usage: $0 [-n REQUESTS] [-r REPS] NEW_BIN [OLD_BIN] [-- ARGS...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the "--"
if [ ${#bins[@]} -lt 1 ] || [ ${#bins[@]} -gt 2 ]; then
  echo "usage: $0 [-n REQUESTS] [-r REPS] NEW_BIN [OLD_BIN] [-- ARGS...]" >&2
  exit 2
fi

# Prints "<sim_over_wall> <wall_time_s> <duration_s>" of one run.
run() {
  "$1" simulate --dataset sharegpt -n "$n" --json --no-progress "${@:2}" 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["sim_over_wall"], j["wall_time_s"], j["duration_s"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -A speed wall
for ((i = 0; i < reps; i++)); do
  for b in "${bins[@]}"; do
    read -r s w d < <(run "$b" "$@")
    speed[$b]+="$s "
    wall[$b]+="$w "
    sim="$d"
  done
done
printf '%d requests, %s simulated seconds, median of %d runs each\n' "$n" "$sim" "$reps"
printf '%-40s %14s %12s\n' binary sim/wall wall_s
for b in "${bins[@]}"; do
  ms=$(tr ' ' '\n' <<<"${speed[$b]}" | grep . | median)
  mw=$(tr ' ' '\n' <<<"${wall[$b]}" | grep . | median)
  printf '%-40s %13.0fx %12.3f\n' "$b" "$ms" "$mw"
  eval "med_$([ "$b" = "${bins[0]}" ] && echo new || echo old)=$ms"
done
if [ ${#bins[@]} -eq 2 ]; then
  awk -v a="$med_new" -v b="$med_old" 'BEGIN {printf "speed-up (new / old): %.2fx\n", a / b}'
fi
