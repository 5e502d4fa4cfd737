#!/usr/bin/env python3
"""Baselines 2 plot: goodput of each system on the Mixed / Strong / Weak
zoos (1080Ti and A100, 64 GPUs), and Symphony's goodput as a multiple of it.

  baselines_zoo.py bench/results/baselines/zoo.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"symphony": "Symphony", "clockwork": "Clockwork", "nexus": "Nexus (1 FE)", "nexus_8fe": "Nexus (8 FE)",
          "shepherd": "Shepherd", "nexus_exact": "Nexus (exact plan)"}
ORDER = ["symphony", "clockwork", "nexus", "nexus_8fe", "shepherd"]
COLORS = {s: f"C{k}" for k, s in enumerate(ORDER)}


def main(src, dst):
    runs = json.load(open(src))["runs"]
    setups = list(dict.fromkeys((r["zoo"], r["subset"]) for r in runs))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    width = 0.8 / len(ORDER)
    for k, system in enumerate(ORDER):
        g = [next(r["goodput_rps"] for r in runs if (r["zoo"], r["subset"]) == s and r["system"] == system)
             for s in setups]
        ours = [next(r["goodput_rps"] for r in runs if (r["zoo"], r["subset"]) == s and r["system"] == "symphony")
                for s in setups]
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(setups))]
        axes[0].bar(xs, g, width, label=LABELS[system], color=COLORS[system])
        if system != "symphony":
            axes[1].bar(xs, [o / x if x else 0 for o, x in zip(ours, g)], width, label=LABELS[system],
                        color=COLORS[system])
    for ax in axes:
        ax.set_xticks(range(len(setups)))
        ax.set_xticklabels([f"{z}\n{s}" for z, s in setups])
        ax.legend(fontsize=7)
    axes[0].set_ylabel("goodput (r/s), 64 GPUs")
    axes[1].set_ylabel("Symphony goodput / system goodput")
    axes[1].axhline(1, color="k", lw=0.8)
    axes[0].set_title("Goodput on the model zoos")
    axes[1].set_title("Symphony's goodput as a multiple of each system's")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
