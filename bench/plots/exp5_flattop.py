#!/usr/bin/env python3
"""Experiment 5 plot: goodput (left) and GPU-busy fraction (right) against
offered load, both relative to deferred's peak goodput.

  exp5_flattop.py bench/results/exp5/results.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    data = json.load(open(src))
    peak, runs = data["peak_rps"], data["runs"]
    loads = sorted({r["load"] for r in runs})
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for (policy, gather), style in ((("deferred", "target_batch"), "o-"), (("eager", "target_batch"), "s-"),
                                    (("deferred", "sliding_window"), "o--"), (("eager", "sliding_window"), "s--"),
                                    (("deferred:paper", "target_batch"), "^:")):
        rs = [next((r for r in runs if r["load"] == l and r["policy"] == policy and r["gather"] == gather), None)
              for l in loads]
        if None in rs:
            continue
        a.plot(loads, [r["ok_rps"] / peak for r in rs], style, label=f"{policy}/{gather}", ms=4)
        b.plot(loads, [100 * r["busy_fraction"] for r in rs], style, label=f"{policy}/{gather}", ms=4)
    a.plot([0, 1, 2], [0, 1, 1], color="gray", lw=0.8, ls=":", label="ideal flat top")
    a.set_xlabel("offered load / deferred peak goodput")
    a.set_ylabel("goodput / deferred peak")
    a.legend(fontsize=8)
    b.plot([0, 1, 2], [0, 100, 100], color="gray", lw=0.8, ls=":", label="load-proportional")
    b.fill_between([0, 1], [-15, 85], [15, 115], color="gray", alpha=0.15, label="+-15 points")
    b.set_xlabel("offered load / deferred peak goodput")
    b.set_ylabel("GPU busy (%)")
    b.set_ylim(0, 105)
    b.legend(fontsize=8)
    fig.suptitle(f"10 ResNet50-like models, SLO 100 ms, 24 GPUs, Poisson; deferred peak {peak:.0f} r/s")
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:3])
