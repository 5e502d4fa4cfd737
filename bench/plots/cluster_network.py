#!/usr/bin/env python3
"""Plots bench/cluster/network.sh's JSON: end-to-end goodput next to the
simulator's, against the one-way network delay, one panel per SLO (the
paper's "Impact of network" figure).

    /usr/bin/python3 bench/plots/cluster_network.py network.json -o cluster_network.png
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("-o", "--out", default="cluster_network.png")
    a = ap.parse_args()
    rows = json.load(open(a.json))
    slos = sorted({r["slo_ms"] for r in rows})
    fig, axes = plt.subplots(1, len(slos), figsize=(4 * len(slos), 3.5), squeeze=False)
    for ax, slo in zip(axes[0], slos):
        rs = [r for r in rows if r["slo_ms"] == slo]
        labels = [r["delay"] for r in rs]
        x = range(len(rs))
        ax.plot(x, [r["sim_goodput_rps"] for r in rs], "o--", label="simulator (learned delays)")
        ax.plot(x, [r["e2e_goodput_rps"] for r in rs], "s-", label="end to end")
        ax.set_xticks(list(x))
        ax.set_xticklabels([lab.replace(":", "±") + " ms" for lab in labels], rotation=30)
        ax.set_title(f"SLO {slo:g} ms")
        ax.set_ylabel("goodput (req/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("20 models, 32 emulated GPUs: goodput vs one-way network delay")
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
