#!/usr/bin/env python3
"""Experiment 4 plots: the distribution (CDF) of deferred / strongest-eager
goodput ratios, overall (also for the paper's exact rule) and per model
(left), and the median ratio per model and Gamma shape (right).

  exp4_ratios.py bench/results/exp4/results.json out.png
"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    rows = [r for r in json.load(open(src))["configs"] if r["ratio_vs_best_eager"] is not None]
    models = list(dict.fromkeys(r["model"] for r in rows))
    shapes = sorted({r["shape"] for r in rows})
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.2))
    def cdf(ax, xs, **kw):
        xs = sorted(xs)
        ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", **kw)
    cdf(a, [r["ratio_vs_best_eager"] for r in rows], color="k", lw=2, label=f"all ({len(rows)})")
    if all(r.get("paper_ratio_vs_best_eager") is not None for r in rows):
        cdf(a, [r["paper_ratio_vs_best_eager"] for r in rows], color="gray", lw=2, ls=":",
            label="all, deferred:paper")
    for m in models:
        cdf(a, [r["ratio_vs_best_eager"] for r in rows if r["model"] == m], lw=1, label=m)
    a.axvline(0.95, color="r", ls="--", lw=0.8)
    a.axvline(1.0, color="gray", lw=0.8)
    a.set_xlim(0.6, 1.9)
    a.set_xlabel("goodput deferred / strongest eager")
    a.set_ylabel("fraction of configurations")
    a.legend(fontsize=7)
    grid = [[statistics.median([r["ratio_vs_best_eager"] for r in rows if r["model"] == m and r["shape"] == s] or [float("nan")])
             for s in shapes] for m in models]
    norm = matplotlib.colors.TwoSlopeNorm(vmin=0.85, vcenter=1.0, vmax=1.15)
    im = b.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto")
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            b.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
    b.set_xticks(range(len(shapes)), [f"{s:g}" for s in shapes])
    b.set_yticks(range(len(models)), models)
    b.set_xlabel("Gamma shape (burstier to the left)")
    b.set_title("median ratio deferred / strongest eager")
    fig.colorbar(im, ax=b)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:3])
