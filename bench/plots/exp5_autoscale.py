#!/usr/bin/env python3
"""Experiment 5b plot: per-window offered and ok rates, GPUs used, busy
fraction and autoscaling advice over a changing workload, deferred vs eager.

  exp5_autoscale.py bench/results/exp5/autoscale.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    data = json.load(open(src))
    fig, axes = plt.subplots(4, 1, figsize=(9, 9), sharex=True)
    for policy, style in (("deferred", "-"), ("eager", "--")):
        w = data["runs"][policy]["windows"]
        t = [x["begin_s"] for x in w]
        axes[0].plot(t, [x["arrived"] * (1 - x["bad_rate"]) for x in w], style, label=f"{policy}: ok r/s")
        axes[1].plot(t, [x["gpus_used"] for x in w], style, label=f"{policy}: GPUs used")
        axes[1].plot(t, [24 * x["busy_fraction"] for x in w], style, alpha=0.5, label=f"{policy}: busy GPU-equivalents")
        axes[2].step(t, [x["advice"] for x in w], style, where="post", label=policy)
        axes[3].plot(t, [100 * x["bad_rate"] for x in w], style, label=policy)
    w = data["runs"]["deferred"]["windows"]
    axes[0].plot([x["begin_s"] for x in w], [x["arrived"] for x in w], color="gray", lw=0.8, label="offered r/s")
    axes[0].set_ylabel("requests/s")
    axes[1].set_ylabel("GPUs (of 24)")
    axes[2].set_ylabel("advice (+add / -release)")
    axes[2].axhline(0, color="gray", lw=0.6)
    axes[3].set_ylabel("bad rate (%)")
    axes[3].set_xlabel("time (s), 1 s windows")
    for a in axes:
        a.legend(fontsize=7, loc="upper left")
    fig.suptitle("10 ResNet50-like models, 24 GPUs: load 0.3 / 0.8 / 1.3 / 0.5 x peak")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
