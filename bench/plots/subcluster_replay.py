#!/usr/bin/env python3
"""Plots of the changing-workload experiment (bench/experiments/subcluster_replay.py),
after the paper's fig:replay: per minute, (1) goodput per model, stacked, with
the unserved requests in grey on top, (2) GPUs in use, (3) the autoscaling
advice, (4) the bad rate; one column per run (one big cluster, sub-clusters).
A second figure shows the sub-clusters: each one's busy GPUs against its 128,
its advice and bad rate, and the epochs' moves.

  subcluster_replay.py bench/results/subcluster/results.json bench/results/subcluster/
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TITLES = {"big": "one big cluster (512 GPUs, one scheduler)",
          "partitioned": "4 sub-clusters of 128 (balance: GPU time)",
          "rate": "4 sub-clusters of 128 (balance: request rate)"}


def minutes(n, step):
    return [(k * step) / 60 for k in range(n)]


def replay(data, dst):
    runs = [r for r in ("big", "partitioned", "rate") if r in data["runs"]]
    fig, axes = plt.subplots(4, len(runs), figsize=(6 * len(runs), 11), sharex=True, sharey="row", squeeze=False)
    cmap = plt.get_cmap("tab20b")
    for c, name in enumerate(runs):
        run = data["runs"][name]
        series = run["series"]
        step = series["step_s"]
        models = series["models"]
        t = minutes(len(models[0]["ok"]), step)
        ok = [[x / step / 1000 for x in m["ok"]] for m in models]
        bad = [sum(m["bad"][k] for m in models) / step / 1000 for k in range(len(t))]
        ax = axes[0][c]
        ax.stackplot(t, *ok, colors=[cmap(i % 20) for i in range(len(ok))], linewidth=0)
        top = [sum(o[k] for o in ok) for k in range(len(t))]
        ax.fill_between(t, top, [a + b for a, b in zip(top, bad)], color="0.55", linewidth=0, label="unserved")
        ax.set_title(TITLES.get(name, name), fontsize=10)
        if c == 0:
            ax.set_ylabel("goodput per model\n(k requests/s)")
        ax.legend(loc="upper left", fontsize=8)
        w = run["windows"]
        tw = [x["begin_s"] / 60 for x in w]
        ax = axes[1][c]
        ax.plot(tw, [x["gpus_used"] for x in w], label="GPUs used (busy at all in the minute)")
        ax.plot(tw, [data["gpus"] * x["busy_fraction"] for x in w], label="busy GPU-equivalents")
        ax.plot([k * data["piece_s"] / 60 for k in range(len(data["demand_gpus"]))], data["demand_gpus"], color="0.5",
                lw=0.8, label="offered work (GPUs at the staggered bound)")
        ax.axhline(data["gpus"], color="k", lw=0.5)
        if c == 0:
            ax.set_ylabel("GPUs")
        ax.legend(loc="upper left", fontsize=8)
        ax = axes[2][c]
        ax.step(tw, [x["advice"] for x in w], where="post", label="cluster (rule on its totals)")
        if "subclusters" in run:
            subs = run["subclusters"]["per_subcluster"]
            total = [sum(s["advice"][k] for s in subs) for k in range(len(w))]
            ax.step(tw, total, where="post", lw=0.8, label="sum over sub-clusters")
        ax.axhline(0, color="k", lw=0.5)
        if c == 0:
            ax.set_ylabel("autoscaling advice\n(+add / -release GPUs)")
        ax.legend(loc="lower left", fontsize=8)
        ax = axes[3][c]
        ax.plot(tw, [100 * x["bad_rate"] for x in w], label="cluster")
        if "subclusters" in run:
            for j, s in enumerate(run["subclusters"]["per_subcluster"]):
                ax.plot(tw, [100 * x for x in s["bad_rates"]], lw=0.6, alpha=0.7, label=f"sub-cluster {j}")
        ax.axhline(1, color="k", lw=0.5, ls=":")
        ax.set_yscale("symlog", linthresh=1)
        if c == 0:
            ax.set_ylabel("bad rate (%)")
        ax.set_xlabel("time (simulated minutes)")
        ax.legend(loc="upper left", fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


def subclusters(data, dst):
    runs = [r for r in ("partitioned", "rate") if r in data["runs"]]
    if not runs:
        return
    fig, axes = plt.subplots(3, len(runs), figsize=(6 * len(runs), 8), sharex=True, squeeze=False)
    for c, name in enumerate(runs):
        run = data["runs"][name]
        sc = run["subclusters"]
        tw = [x["begin_s"] / 60 for x in run["windows"]]
        ax = axes[0][c]
        for j, s in enumerate(sc["per_subcluster"]):
            ax.plot(tw, [s["gpus"] * b for b in s["busy"]], lw=0.9, label=f"sub-cluster {j}")
        ax.axhline(sc["per_subcluster"][0]["gpus"], color="k", lw=0.5)
        for e in sc["epochs"][1:]:
            if e["moves"]:
                ax.axvline(e["time_s"] / 60, color="0.7", lw=0.6, ls="--")
        ax.set_title(TITLES.get(name, name) + f": {sc['moves']} moves", fontsize=10)
        if c == 0:
            ax.set_ylabel("busy GPU-equivalents\n(dashed: an epoch that moved)")
        ax.legend(loc="upper left", fontsize=8)
        ax = axes[1][c]
        for j, s in enumerate(sc["per_subcluster"]):
            ax.step(tw, s["advice"], where="post", lw=0.9, label=f"sub-cluster {j}")
        ax.axhline(0, color="k", lw=0.5)
        if c == 0:
            ax.set_ylabel("advice (GPUs)")
        ax = axes[2][c]
        te = [e["time_s"] / 60 for e in sc["epochs"]]
        ax.plot(te, [e["stats"].get("rate_imbalance", float("nan")) for e in sc["epochs"]], "o-", ms=3,
                label="imbalance (max-min)/avg of what is balanced")
        ax.set_xlabel("time (simulated minutes)")
        if c == 0:
            ax.set_ylabel("partition at each epoch")
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


def main(src, out_dir):
    data = json.load(open(src))
    out = Path(out_dir)
    replay(data, out / "subcluster_replay.png")
    subclusters(data, out / "subcluster_partitions.png")


if __name__ == "__main__":
    main(*sys.argv[1:3])
