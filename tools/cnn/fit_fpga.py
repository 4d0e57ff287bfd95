#!/usr/bin/env python3
"""Fits the two free parameters of the DNNVM FPGA model (docs/offload.md) and nothing else.

The paper does not state the DDR bandwidth an accelerator streaming INT8 tiles achieves on the
ZU2 board, nor the cycles it takes to dispatch an instruction group. They are fitted here, by a
grid search minimising the squared relative error, on the two ZU2 baselines the issue allows:
VGG16 325.5 and ResNet50 195.4 GOP/s (paper 002, Table 3, unfused). Every other figure
(optimised throughputs, GoogLeNet and ResNet152 baselines, ZU9) is then a prediction.

Usage: tools/cnn/fit_fpga.py [path/to/neupims]   (default build/release/tools/neupims)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = {"vgg16": 325.5, "resnet50": 195.4}
EFFICIENCIES = [0.28 + 0.0025 * i for i in range(17)]
OVERHEADS = [0, 250, 500, 750, 1000, 1500, 2000, 4000]


def throughput(cli, device_path, model):
    out = subprocess.run([cli, "cnn", "compile", "--model", model, "--device", device_path,
                          "--strategy", "none", "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["gops_per_s"]


def main():
    cli = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/release/tools/neupims")
    with open(os.path.join(ROOT, "configs/fpga/zu2.json")) as f:
        spec = json.load(f)
    best = None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "zu2-fit.json")
        for eff in EFFICIENCIES:
            for overhead in OVERHEADS:
                spec["ddr"]["efficiency"] = round(eff, 4)
                spec["engines"]["group_overhead_cycles"] = overhead
                with open(path, "w") as f:
                    json.dump(spec, f)
                got = {m: throughput(cli, path, m) for m in TARGETS}
                err = sum((got[m] / t - 1) ** 2 for m, t in TARGETS.items())
                if best is None or err < best[0]:
                    best = (err, round(eff, 4), overhead, got)
    err, eff, overhead, got = best
    print(f"ddr.efficiency {eff}  engines.group_overhead_cycles {overhead}")
    for m, t in TARGETS.items():
        print(f"  {m}: {got[m]:.1f} GOP/s (paper {t}, {100 * (got[m] / t - 1):+.2f}%)")


if __name__ == "__main__":
    main()
