#!/usr/bin/env python3
"""Summarizes experiment 4 (bench/results/exp4/results.json) into summary.md
and the plots; run by exp4_sweep.py, or alone to redo the report."""
import json
import statistics
import subprocess
import sys
from collections import defaultdict

from simlib import ROOT, RESULTS


def quantiles(xs):
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]
    return f"min {xs[0]:.3f}, p5 {q(0.05):.3f}, p25 {q(0.25):.3f}, median {q(0.5):.3f}, p75 {q(0.75):.3f}, max {xs[-1]:.3f}"


def main():
    out = RESULTS / "exp4"
    data = json.load(open(out / "results.json"))
    rows = [r for r in data["configs"] if r["ratio_vs_best_eager"] is not None]
    ratios = [r["ratio_vs_best_eager"] for r in rows]
    n = len(rows)
    ok = sum(x >= 0.95 for x in ratios)
    extra = data.get("cpu_seconds_sliding_deferred", 0)
    text = [f"{n} configurations ({len(data['configs']) - n} where no policy passed at any rate), "
            f"{data['per_stratum']} per (model, SLO, shape) stratum plus all 42 Mixed; sample seed "
            f"{data['sample_seed']}; {data['cpu_seconds'] / 60:.1f} CPU-minutes"
            + (f" (+ {extra / 60:.1f} for deferred with sliding-window gathering)" if extra else "") + ".\n",
            *([f"Runs reused from an earlier sweep of the same sample ({data['reused']['from']}; renamed: "
               f"{', '.join(data['reused']['renamed']) or 'none'}); the CPU time counts only the runs made here.\n"]
              if data.get("reused") else []),
            f"**deferred (default rule, target batch) >= 0.95 x strongest eager in {ok} of {n} configurations "
            f"({100 * ok / n:.1f} %)**; >= 1.0 in {sum(x >= 1.0 for x in ratios)}, >= 1.5 in "
            f"{sum(x >= 1.5 for x in ratios)} ({100 * sum(x >= 1.5 for x in ratios) / n:.1f} %), >= 2 in "
            f"{sum(x >= 2 for x in ratios)}.\n",
            f"Ratio deferred / strongest eager: {quantiles(ratios)}.\n"]
    if all(r.get("paper_ratio_vs_best_eager") is not None for r in rows):
        pr = [r["paper_ratio_vs_best_eager"] for r in rows]
        text.append(f"The paper's exact rule (`deferred:paper`, target batch) >= 0.95 x strongest eager in "
                    f"{sum(x >= 0.95 for x in pr)} of {n} ({100 * sum(x >= 0.95 for x in pr) / n:.1f} %); "
                    f"{quantiles(pr)}. Default / paper's rule: {quantiles([r['ratio_vs_best_eager'] / x for r, x in zip(rows, pr)])}.\n")
    if all("deferred/sliding_window" in r for r in rows):
        sw = [r["deferred/sliding_window"]["goodput_rps"] / max(r["eager/target_batch"]["goodput_rps"],
                                                               r["eager/sliding_window"]["goodput_rps"]) for r in rows]
        text.append(f"Deferred with sliding-window gathering / strongest eager: >= 0.95 in "
                    f"{sum(x >= 0.95 for x in sw)} of {n} ({100 * sum(x >= 0.95 for x in sw) / n:.1f} %); "
                    f"{quantiles(sw)}.\n")
        best = [max(r["deferred/sliding_window"]["goodput_rps"], r["deferred/target_batch"]["goodput_rps"]) /
                max(r["eager/target_batch"]["goodput_rps"], r["eager/sliding_window"]["goodput_rps"]) for r in rows]
        text.append(f"Strongest deferred (better gathering policy per configuration) / strongest eager: >= 0.95 in "
                    f"{sum(x >= 0.95 for x in best)} of {n} ({100 * sum(x >= 0.95 for x in best) / n:.1f} %); "
                    f"{quantiles(best)}.\n")
        for m in sorted({r["model"] for r in rows}):
            g = [x for x, r in zip(best, rows) if r["model"] == m]
            text.append(f"- {m}: strongest deferred >= 0.95 x strongest eager in {sum(x >= 0.95 for x in g)} of {len(g)}")
        text.append("")
    for dim, label in (("model", "model"), ("shape", "Gamma shape"), ("slo", "SLO ms"), ("ratio", "GPUs per model"),
                       ("count", "models")):
        groups = defaultdict(list)
        for r in rows:
            groups[r[dim]].append(r["ratio_vs_best_eager"])
        text.append(f"| {label} | configs | >= 0.95 | median ratio | min ratio |")
        text.append("|---|---|---|---|---|")
        for k in sorted(groups, key=lambda x: (x is None, str(x) if isinstance(x, str) else x)):
            g = groups[k]
            text.append(f"| {k if k is not None else 'own'} | {len(g)} | {100 * sum(x >= 0.95 for x in g) / len(g):.0f} % | "
                        f"{statistics.median(g):.3f} | {min(g):.3f} |")
        text.append("")
    if all(r.get("paper_ratio_vs_best_eager") is not None for r in rows):
        groups = defaultdict(list)
        for r in rows:
            groups[r["model"]].append(r["paper_ratio_vs_best_eager"])
        text.append("The paper's exact rule, per model:\n")
        text.append("| model | configs | >= 0.95 | median ratio | min ratio |")
        text.append("|---|---|---|---|---|")
        for k in sorted(groups):
            g = groups[k]
            text.append(f"| {k} | {len(g)} | {100 * sum(x >= 0.95 for x in g) / len(g):.0f} % | "
                        f"{statistics.median(g):.3f} | {min(g):.3f} |")
        text.append("")
    losses = sorted((r for r in rows if r["ratio_vs_best_eager"] < 0.95), key=lambda r: r["ratio_vs_best_eager"])
    text.append(f"Configurations where deferred < 0.95 x strongest eager ({len(losses)}):\n")
    text.append("| configuration | deferred r/s | deferred:paper r/s | eager tb r/s | eager sw r/s | ratio | "
                "median batch d/e | GPU busy d/e at goodput |")
    text.append("|---|---|---|---|---|---|---|---|")
    for r in losses:
        d, et, es = r["deferred/target_batch"], r["eager/target_batch"], r["eager/sliding_window"]
        dp = r.get("deferred:paper/target_batch", {}).get("goodput_rps", float("nan"))
        e = et if et["goodput_rps"] >= es["goodput_rps"] else es
        text.append(f"| {r['key']} | {d['goodput_rps']:.0f} | {dp:.0f} | {et['goodput_rps']:.0f} | "
                    f"{es['goodput_rps']:.0f} | {r['ratio_vs_best_eager']:.3f} | {d['median_batch']}/{e['median_batch']} | "
                    f"{100 * d['busy_fraction']:.0f} %/{100 * e['busy_fraction']:.0f} % |")
    text.append("\nCommand per configuration and policy (configs in bench/results/exp4/configs/):\n\n"
                "    build/release/symphony simulate bench/results/exp4/configs/<configuration>.yaml --goodput "
                "--policy <deferred|deferred:paper|eager> --gather <target_batch|sliding_window>\n")
    (out / "summary.md").write_text("\n".join(text))
    subprocess.run([sys.executable, str(ROOT / "bench/plots/exp4_ratios.py"), str(out / "results.json"),
                    str(out / "exp4_ratios.png")], check=True)


if __name__ == "__main__":
    main()
