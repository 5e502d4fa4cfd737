#!/usr/bin/env python3
"""What overlapping a batch's staging with the batch before it buys on a CPU
device (bench/results/server.md, "Overlap"; docs/architecture.md#overlap).

A model with a large input and almost no compute (FP32 [3,224,224], 0.6 MB,
answering its mean: TorchScript, made here with torch), where gathering a
batch's inputs is a large part of its time, served by `symphony serve` on one
CPU device under its built-in open-loop load, with `overlap: off` and
`overlap: on`, alternating, --runs times at each rate. Per run: goodput, the
bad rate, p99 of the ok requests, mean batch, the device's busy fraction and
the dispatch delay learned. The summary gives, per rate, the worst, median
and best goodput of each mode and the median of on / off over the pairs.
Bounded: each serve runs --duration seconds plus warm-up, with a timeout.

    /usr/bin/python3 bench/overlap_bench.py --symphony build/release/symphony
    /usr/bin/python3 bench/overlap_bench.py --rates 300,600,1200 --runs 3 --duration 10
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_model(path):
    import torch

    class Mean(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=[1, 2, 3])

    torch.jit.script(Mean()).save(path)


def run(symphony, d, overlap, rate, args):
    cfg = os.path.join(d, f"serve-{overlap}-{rate}.yaml")
    with open(cfg, "w") as f:
        f.write(f"""devices: cpu
cpu_threads: 1
overlap: {overlap}
load: {{duration_s: {args.duration}, warmup_s: {args.warmup}, arrival: poisson, seed: 1}}
models:
  - {{name: mean, path: {os.path.join(d, "mean.pt")}, input: "float32[3,224,224]", slo_ms: {args.slo_ms},
     max_batch: {args.max_batch}, rate: {rate}}}
""")
    out = os.path.join(d, "report.json")
    timeout = args.duration + args.warmup + 120
    p = subprocess.run([symphony, "serve", cfg, "--quiet", "--json", out], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"serve failed ({p.returncode}):\n{p.stderr[-3000:]}")
    with open(out) as f:
        r = json.load(f)
    m = r["models"]["mean"]
    dev = r.get("devices", [{}])[0]
    disp = r["server"].get("dispatch", {})
    return {"goodput": r["goodput_rps"], "bad": r["bad_rate"], "p99": m["latency_ms"]["p99"],
            "batch": m["mean_batch"], "busy": dev.get("busy_fraction", 0.0),
            "d_ctrl": disp.get("d_ctrl_us", 0.0), "d_data": disp.get("d_data_us", 0.0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--symphony", default=os.path.join(ROOT, "build/release/symphony"))
    ap.add_argument("--rates", default="400,800,1600", help="offered requests/s, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="pairs (off, on) per rate")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--slo-ms", type=float, default=50)
    ap.add_argument("--max-batch", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="overlap-bench-") as d:
        make_model(os.path.join(d, "mean.pt"))
        print("| rate (r/s) | overlap | run | goodput (r/s) | bad | p99 (ms) | mean batch | busy | "
              "learned d_ctrl + d_data (us) |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
        summary = []
        for rate in [float(x) for x in args.rates.split(",")]:
            good = {"off": [], "on": []}
            for i in range(args.runs):
                for mode in ("off", "on"):
                    r = run(args.symphony, d, mode, rate, args)
                    good[mode].append(r["goodput"])
                    learned = f"{r['d_ctrl']:.0f} + {r['d_data']:.1f}/req" if mode == "on" else "-"
                    print(f"| {rate:.0f} | {mode} | {i + 1} | {r['goodput']:.1f} | {100 * r['bad']:.2f}% | "
                          f"{r['p99']:.2f} | {r['batch']:.2f} | {100 * r['busy']:.0f}% | {learned} |", flush=True)
            ratios = [b / a for a, b in zip(good["off"], good["on"]) if a > 0]
            summary.append((rate, good, statistics.median(ratios) if ratios else 0.0))
        print("\n| rate (r/s) | off: worst / median / best | on: worst / median / best | on / off (median of pairs) |")
        print("|---:|---|---|---:|")
        for rate, good, ratio in summary:
            f = lambda v: f"{min(v):.1f} / {statistics.median(v):.1f} / {max(v):.1f}"
            print(f"| {rate:.0f} | {f(good['off'])} | {f(good['on'])} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
