#!/usr/bin/env python3
"""Baselines 1 plots: at each system's goodput (seed 1), the share of
requests by the size of the batch they ran in (stagger_batch_sizes.png) and
the distribution of queueing delays (stagger_queueing.png), per model.

  baselines_stagger.py bench/results/baselines/stagger.json bench/results/baselines/
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"symphony": "Symphony", "clockwork": "Clockwork", "nexus": "Nexus (1 FE)", "nexus_8fe": "Nexus (8 FE)",
          "shepherd": "Shepherd", "nexus_exact": "Nexus (exact plan)"}
SHOWN = ["symphony", "clockwork", "nexus", "nexus_8fe", "shepherd"]


def main(src, dst):
    dst = Path(dst)
    runs = [r for r in json.load(open(src))["runs"] if r["seed"] == 1 and r["system"] in SHOWN]
    models = list(dict.fromkeys(r["model"] for r in runs))

    fig, axes = plt.subplots(len(models), 1, figsize=(9, 3.4 * len(models)))
    for ax, model in zip(axes, models):
        rs = sorted((r for r in runs if r["model"] == model), key=lambda r: SHOWN.index(r["system"]))
        width = 0.8 / len(rs)
        top = 0
        for k, r in enumerate(rs):
            h = {int(b): n for b, n in r["requests_by_size"].items()}
            total = sum(h.values())
            xs = sorted(h)
            top = max(top, max(xs))
            ax.bar([x - 0.4 + width * (k + 0.5) for x in xs], [h[x] / total for x in xs], width,
                   label=f"{LABELS[r['system']]} ({r['goodput_rps']:.0f} r/s, median {r['median_batch']:g})")
        ax.set_xlim(0.3, min(top, 40) + 0.7)
        ax.set_title(f"{model}, 8 GPUs: requests by batch size at each system's goodput")
        ax.set_xlabel("batch size")
        ax.set_ylabel("share of requests")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst / "stagger_batch_sizes.png", dpi=110)

    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 3.8))
    for ax, model in zip(axes, models):
        for r in sorted((r for r in runs if r["model"] == model), key=lambda r: SHOWN.index(r["system"])):
            q = r["queueing_quantiles_ms"]
            ax.plot(q, [p / 100 for p in range(len(q))], label=f"{LABELS[r['system']]} (p99 {q[99]:.1f} ms)")
        ax.set_title(f"{model}: queueing delay at each system's goodput")
        ax.set_xlabel("queueing delay (ms): batch start - arrival")
        ax.set_ylabel("share of requests")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dst / "stagger_queueing.png", dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
