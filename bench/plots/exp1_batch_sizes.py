#!/usr/bin/env python3
"""Experiment 1 plot: share of requests by the size of the batch they ran in,
at each policy's goodput (seed 1), per model.

  exp1_batch_sizes.py bench/results/exp1/results.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    runs = [r for r in json.load(open(src))["runs"] if r["seed"] == 1]
    models = list(dict.fromkeys(r["model"] for r in runs))
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 3.8))
    for ax, model in zip(axes, models):
        rs = [r for r in runs if r["model"] == model]
        width = 0.8 / len(rs)
        for k, r in enumerate(rs):
            h = {int(b): n for b, n in r["requests_by_size"].items()}
            total = sum(h.values())
            xs = sorted(h)
            ax.bar([x - 0.4 + width * (k + 0.5) for x in xs], [h[x] / total for x in xs], width,
                   label=f"{r['policy']}/{r['gather']} ({r['goodput_rps']:.0f} r/s)")
        b = rs[0]["bounds"]
        ax.axvline(b["staggered"]["batch"], color="k", ls="--", lw=1, label="staggered bound b")
        ax.axvline(b["no_coordination"]["batch"], color="gray", ls=":", lw=1, label="no-coordination b")
        ax.set_title(f"{model}, 8 GPUs, at each policy's goodput")
        ax.set_xlabel("batch size")
        ax.set_ylabel("share of requests")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:3])
