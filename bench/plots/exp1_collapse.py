#!/usr/bin/env python3
"""Experiment 1 plot: the sliding-window collapse. Bad rate per 1 s window of
ResNet50 on 8 GPUs at 5100 r/s (Poisson), deferred, under both gathering
policies.

  exp1_collapse.py bench/results/exp1/collapse.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    data = json.load(open(src))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    for gather, c in data.items():
        a.plot([t for t, _ in c["windows"]], [100 * x for _, x in c["windows"]], label=gather)
        h = {int(k): v for k, v in c["batches_by_size"].items()}
        b.bar([x + (0.2 if gather == "target_batch" else -0.2) for x in h], list(h.values()), 0.4, label=gather)
    a.set_xlabel("time (s)")
    a.set_ylabel("bad rate in window (%)")
    a.set_title("ResNet50, 8 GPUs, 5100 r/s Poisson, deferred")
    a.legend()
    b.set_yscale("log")
    b.set_xlabel("batch size")
    b.set_ylabel("batches")
    b.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:3])
