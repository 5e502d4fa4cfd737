#!/usr/bin/env python3
"""Experiment 3 plot: timeout batching's goodput as a percentage of deferred's,
against the timeout as a percentage of the SLO, per setup and gathering.

  exp3_timeout.py bench/results/exp3/results.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    data = json.load(open(src))
    runs, fractions = data["runs"], data["fractions"]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for setup in dict.fromkeys(r["setup"] for r in runs):
        for gather, style in (("target_batch", "o-"), ("sliding_window", "s--")):
            rs = [r for r in runs if r["setup"] == setup and r["gather"] == gather]
            if not rs:
                continue
            d = next(r["goodput_rps"] for r in rs if r["policy"] == "deferred")
            ys = [100 * next(r["goodput_rps"] for r in rs if r["policy"] == f"timeout:{f:g}slo") / d for f in fractions]
            paper = [r["goodput_rps"] for r in rs if r["policy"] == "deferred:paper"]
            note = f", deferred:paper {100 * paper[0] / d:.1f} %" if paper else ""
            ax.plot([100 * f for f in fractions], ys, style, label=f"{setup} ({gather}{note})")
    ax.axhline(100, color="gray", lw=0.8)
    ax.set_xlabel("timeout, % of SLO")
    ax.set_ylabel("goodput, % of deferred")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:3])
