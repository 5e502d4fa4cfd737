#!/usr/bin/env python3
"""Baselines 5: scheduling cost per request of each system as the number of
models grows, from bench_peers (bench/peers_benchmark.cc): simulated
requests per CPU second of each system, and Symphony's as a multiple of it,
measured in the same run. Wall-clock speed depends on the machine: run it on
a quiet one; nothing is recorded by this script.

  /usr/bin/python3 bench/experiments/baselines_cost.py [--bench build/release/bench/bench_peers] [--min-time 1]
"""
import argparse
import json
import re
import subprocess

from simlib import ROOT


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=str(ROOT / "build/release/bench/bench_peers"))
    ap.add_argument("--min-time", default="1")
    args = ap.parse_args()
    out = subprocess.run([args.bench, f"--benchmark_min_time={args.min_time}", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    rate = {}
    for b in json.loads(out)["benchmarks"]:
        m = re.match(r"BM_(\w+)/models:(\d+)", b["name"])
        if m:
            rate[(m.group(1), int(m.group(2)))] = b["items_per_second"]
    systems = [s for s in ("Symphony", "Clockwork", "Nexus", "Nexus8", "Shepherd", "Workload")
               if any(k[0] == s for k in rate)]
    models = sorted({k[1] for k in rate})
    print("simulated requests per CPU second (and Symphony's rate / the system's: > 1 means the system costs more)")
    print("| models | " + " | ".join(systems) + " |")
    print("|---|" + "---|" * len(systems))
    for m in models:
        ours = rate.get(("Symphony", m))
        cells = []
        for s in systems:
            r = rate.get((s, m))
            cells.append("-" if r is None else f"{r / 1e6:.2f} M/s" + ("" if s == "Symphony" or not ours else
                                                                      f" ({ours / r:.2f}x)"))
        print(f"| {m} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
