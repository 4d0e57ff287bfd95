#!/usr/bin/env python3
"""Compares two `neupims simulate --json` summaries field by field (docs/benchmarks.md).

Integers, strings and booleans must be equal; real numbers equal to a relative tolerance
(default 1e-12, the golden summary test's); the wall-clock fields are skipped.
Usage: bench/compare_summaries.py OLD.json NEW.json [--rel 1e-12]
Exit status 0 when they agree; otherwise each differing field is printed and the status is 1.
The tolerance is for real-valued sums (energies) whose summation order may change; simulated
times must not move at all, and the JSON holds some of them (seconds) as reals: the last line
counts the fields that differ at all and names the largest relative difference, and `--rel 0`
lists them, to check that only energies did.
"""
import argparse
import json
import sys

WALL_FIELDS = {"wall_time_s", "sim_over_wall"}


def compare(old, new, path, rel, out, moved=None):
    """Appends each difference beyond `rel` to `out`; (relative difference, path) of every real
    field that moved at all to `moved` when given."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if key in WALL_FIELDS:
                continue
            if key not in old or key not in new:
                out.append(f"{path}/{key}: only in {'new' if key in new else 'old'}")
                continue
            compare(old[key], new[key], f"{path}/{key}", rel, out, moved)
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            out.append(f"{path}: {len(old)} items vs {len(new)}")
            return
        for i, (a, b) in enumerate(zip(old, new)):
            compare(a, b, f"{path}[{i}]", rel, out, moved)
    elif isinstance(old, float) or isinstance(new, float):
        if isinstance(old, bool) or isinstance(new, bool):
            if old != new:
                out.append(f"{path}: {old} vs {new}")
        elif not all(isinstance(x, (int, float)) for x in (old, new)):  # NaN is null in JSON
            if old != new:
                out.append(f"{path}: {old!r} vs {new!r}")
        else:
            if moved is not None and new != old:
                moved.append((abs(new - old) / abs(old) if old != 0 else float("inf"), path))
            if abs(new - old) > rel * abs(old):
                relative = f" (relative {abs(new - old) / abs(old):.3g})" if old != 0 else ""
                out.append(f"{path}: {old!r} vs {new!r}{relative}")
    elif old != new:  # integers exactly (times in ns, counts), strings, booleans
        out.append(f"{path}: {old!r} vs {new!r}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rel", type=float, default=1e-12)
    a = p.parse_args()
    with open(a.old) as f:
        old = json.load(f)
    with open(a.new) as f:
        new = json.load(f)
    diffs = []
    compare(old, new, "", a.rel, diffs)
    for d in diffs:
        print(d)
    exact, moved = [], []
    compare(old, new, "", 0.0, exact, moved)
    largest = ""
    if moved:
        r, path = max(moved)
        largest = f"; largest relative difference of a real field {r:.3g} ({path})"
    print(f"{len(diffs)} fields differ beyond {a.rel:g}; {len(exact)} differ at all{largest}",
          file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
