#!/usr/bin/env python3
"""Baselines 4 plot: goodput against the SLO for every system, one panel per
(popularity, arrival) setup (20 ResNet50-like models, 32 GPUs).

  baselines_sensitivity.py bench/results/baselines/sensitivity.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"symphony": "Symphony", "clockwork": "Clockwork", "nexus": "Nexus (1 FE)", "nexus_8fe": "Nexus (8 FE)",
          "shepherd": "Shepherd"}


def main(src, dst):
    runs = json.load(open(src))["runs"]
    setups = list(dict.fromkeys((r["popularity"], r["arrival"]) for r in runs))
    fig, axes = plt.subplots(1, len(setups), figsize=(4.2 * len(setups), 3.8), sharey=True)
    for ax, (pop, arr) in zip(axes, setups):
        for system in LABELS:
            rs = sorted((r for r in runs if (r["popularity"], r["arrival"]) == (pop, arr) and r["system"] == system),
                        key=lambda r: r["slo_ms"])
            ax.plot([r["slo_ms"] for r in rs], [r["goodput_rps"] for r in rs], marker="o", label=LABELS[system])
        ax.set_title(f"{pop} popularity, {arr}")
        ax.set_xlabel("SLO (ms)")
        ax.set_xscale("log")
        ax.minorticks_off()
        ax.set_xticks([15, 20, 30, 50, 100])
        ax.set_xticklabels(["15", "20", "30", "50", "100"])
    axes[0].set_ylabel("goodput (r/s), 32 GPUs")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
