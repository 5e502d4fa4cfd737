#!/usr/bin/python3
"""Plots and tabulates bench/results/partition/results.json (written by
bench/experiments/partition_eval.py): CDFs of the rate and memory imbalance
factors per method, one row of plots per setting, as in the paper's figure
"Evaluating the effectiveness of MILP search for the partitioning problem";
and bench/results/partition/summary.md with the quantiles per method.

Usage: /usr/bin/python3 bench/plots/partition_cdf.py [results.json]
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "results" / "partition"
LABELS = {"milp": "MILP (CBC)", "random": "random search (paper's baseline)", "greedy": "greedy + local search",
          "milp_warm": "MILP started from greedy"}
STYLE = {"milp": "-", "random": ":", "greedy": "--", "milp_warm": "-."}
TITLES = {"m800_l20": "800 models, 20 sub-clusters", "m400_l4": "400 models, 4 sub-clusters"}
FLOOR = 1e-5  # imbalance factors below this are drawn at it (log axis)


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = q * (len(xs) - 1)
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main():
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT / "results.json"
    doc = json.loads(path.read_text())
    settings = [s for s in doc["results"] if any(doc["results"][s].values())]
    fig, axes = plt.subplots(len(settings), 2, figsize=(11, 3.6 * len(settings)), squeeze=False)
    lines = [f"# Partitioning: imbalance factors per method ({doc['time_limit_cpu_s']:g} CPU s per solve)", "",
             f"From `{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}`, made by `{doc['command']}`.",
             "Imbalance factor: (max - min) / avg across sub-clusters. Quantiles over the instances that have a "
             "solution.", ""]
    for row, setting in enumerate(settings):
        res = doc["results"][setting]
        lines += [f"## {TITLES.get(setting, setting)} ({doc['settings'][setting]['instances']} instances)", "",
                  "| method | solved | rate: median | p90 | max | memory: median | p90 | max | CPU s (mean, max) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for method, runs in res.items():
            ok = [r for r in runs if r["rate_imbalance"] is not None]
            rate = [r["rate_imbalance"] for r in ok]
            mem = [r["memory_imbalance"] for r in ok]
            cpu = [r["cpu_seconds"] for r in runs]
            lines.append(f"| {method} | {len(ok)}/{len(runs)} | " +
                         " | ".join(f"{quantile(v, q):.2g}" for v in (rate, mem) for q in (0.5, 0.9, 1.0)) +
                         f" | {sum(cpu) / len(cpu):.2f}, {max(cpu):.2f} |")
            for col, values in enumerate((rate, mem)):
                xs = sorted(max(FLOOR, v) for v in values)
                ys = [(k + 1) / len(runs) for k in range(len(xs))]
                if xs:  # start the staircase at 0
                    xs, ys = [xs[0]] + xs, [0.0] + ys
                ax = axes[row][col]
                ax.step(xs, ys, where="post", linestyle=STYLE.get(method, "-"), label=LABELS.get(method, method))
        # Per-instance comparison: how often the MILP is better than random search.
        if "milp" in res and "random" in res:
            by = {r["instance"]: r for r in res["random"]}
            pairs = [(m, by[m["instance"]]) for m in res["milp"] if m["instance"] in by]
            better = sum(1 for m, r in pairs if m["objective"] is not None and
                         (r["objective"] is None or m["objective"] < r["objective"]))
            lines += ["", f"MILP objective below random search's on {better} of {len(pairs)} instances."]
        if "milp" in res and "greedy" in res:
            by = {r["instance"]: r for r in res["greedy"]}
            pairs = [(m, by[m["instance"]]) for m in res["milp"] if m["instance"] in by]
            better = sum(1 for m, g in pairs if m["objective"] is not None and
                         (g["objective"] is None or m["objective"] < g["objective"]))
            lines += [f"MILP objective below greedy's on {better} of {len(pairs)} instances."]
        if "milp_warm" in res and "greedy" in res:
            by = {r["instance"]: r for r in res["greedy"]}
            count = {"below": 0, "equal to": 0, "above": 0}
            for m in res["milp_warm"]:
                g = by.get(m["instance"])
                if g is None or m["objective"] is None or g["objective"] is None:
                    continue
                d = m["objective"] - g["objective"]
                count["below" if d < -1e-12 else "above" if d > 1e-12 else "equal to"] += 1
            lines += ["MILP started from greedy: objective " +
                      ", ".join(f"{k} greedy's on {v}" for k, v in count.items()) + " instances."]
        lines.append("")
        for col, what in enumerate(("rate", "memory")):
            ax = axes[row][col]
            ax.set_xscale("log")
            ax.set_ylim(0, 1.02)
            ax.set_xlabel(f"{what} imbalance factor (max - min) / avg")
            ax.set_ylabel("CDF over instances")
            ax.set_title(f"{TITLES.get(setting, setting)}: {what}")
            ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9)
    fig.suptitle(f"Partitioning under a {doc['time_limit_cpu_s']:g} CPU s limit (values < {FLOOR:g} drawn at it)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(OUT / "partition_cdf.png", dpi=120)
    epoch = OUT / "epoch.json"
    if epoch.exists():
        lines += epoch_report(json.loads(epoch.read_text()))
    (OUT / "summary.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT / 'partition_cdf.png'} and {OUT / 'summary.md'}")


def epoch_report(doc):
    """Table and plot of bench/experiments/partition_epoch_eval.py's results."""
    rows = doc["results"]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    budgets = doc["budgets"]
    name = lambda b: "unlimited" if b is None else f"{b:g}"  # noqa: E731
    lines = [f"## Re-partitioning at an epoch ({doc['instances']} instances, 800 models + {doc['new_models']} new, "
             f"20 sub-clusters, rates drifted by exp(N(0, {doc['drift_sigma']:g})))", "",
             f"From `bench/results/partition/epoch.json`, made by `{doc['command']}`. Unit move costs: a move "
             f"costs 2, loading a new model 1; C_max = {doc['new_models']} only loads the new models.", "",
             "| C_max | method | solved | rate imbalance: median | max | memory: median | max | moves: median | "
             "disruption: max |",
             "|---|---|---|---|---|---|---|---|---|"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for method in methods:
        med = {"rate": [], "memory": []}
        for b in budgets:
            sel = [r for r in rows if r["method"] == method and r["budget"] == b]
            ok = [r for r in sel if r["rate_imbalance"] is not None]
            rate = [r["rate_imbalance"] for r in ok]
            mem = [r["memory_imbalance"] for r in ok]
            moves = [r["moves"] for r in ok]
            cost = [r["disruption"] for r in ok]
            lines.append(f"| {name(b)} | {method} | {len(ok)}/{len(sel)} | {quantile(rate, 0.5):.2g} | "
                         f"{quantile(rate, 1):.2g} | {quantile(mem, 0.5):.2g} | {quantile(mem, 1):.2g} | "
                         f"{quantile(moves, 0.5):.0f} | {max(cost) if cost else float('nan'):g} |")
            med["rate"].append(max(FLOOR, quantile(rate, 0.5)))
            med["memory"].append(max(FLOOR, quantile(mem, 0.5)))
        for col, what in enumerate(("rate", "memory")):
            axes[col].plot(range(len(budgets)), med[what], marker="o", linestyle=STYLE.get(method, "-"),
                           label=LABELS.get(method, method))
    for col, what in enumerate(("rate", "memory")):
        ax = axes[col]
        ax.set_yscale("log")
        ax.set_xticks(range(len(budgets)), [name(b) for b in budgets])
        ax.set_xlabel("disruption bound C_max (unit costs; a move costs 2)")
        ax.set_ylabel(f"median {what} imbalance factor")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Re-partitioning after drift under a disruption bound ({doc['time_limit_cpu_s']:g} CPU s)")
    fig.tight_layout()
    fig.savefig(OUT / "partition_epoch.png", dpi=120)
    return lines + [""]


if __name__ == "__main__":
    main()
