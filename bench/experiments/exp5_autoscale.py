#!/usr/bin/env python3
"""Experiment 5b: the autoscaling signals over a changing workload.

The setup of experiment 5 (10 ResNet50-like models, SLO 100 ms, 24 GPUs,
Poisson) with a piecewise rate: 0.3, 0.8, 1.3, 0.5 x deferred's peak goodput
(bench/results/exp5), 15 s each. Per 1 s window: offered rate, ok rate, bad
rate, GPUs used, busy fraction and the advice of docs/architecture.md#autoscaling (+k: add k GPUs
for bad rate r, N r / (1 - r); -k: release floor(N f) idle GPUs), for
deferred and eager (target-batch gathering).

  /usr/bin/python3 bench/experiments/exp5_autoscale.py   (after exp5_flattop.py)
"""
import json
import subprocess
import sys

from simlib import ROOT, Clock, command_line, log, results_dir, save_json, simulate, write_config

SCALES = [0.3, 0.8, 1.3, 0.5]
PIECE_S = 15


def main():
    out = results_dir("exp5")
    clock = Clock()
    peak = json.load(open(out / "results.json"))["peak_rps"]
    config = {
        "name": "autoscale_10x_resnet50_24gpu", "seed": 1, "gpus": 24, "duration_s": PIECE_S * len(SCALES),
        "warmup_s": 1, "autoscale_window_s": 1,
        "workload": {"rate": round(peak * SCALES[0], 1), "arrival": "poisson", "popularity": "equal",
                     "rate_changes": [{"at_s": PIECE_S * i, "scale": round(s / SCALES[0], 4)}
                                      for i, s in enumerate(SCALES) if i > 0]},
        "models": [{"name": "ResNet50", "alpha_ms": 1.053, "beta_ms": 5.072, "slo_ms": 100, "max_batch": 64,
                    "count": 10}],
    }
    path = write_config(out / "configs" / "autoscale.yaml", config)
    runs = {}
    for policy in ("deferred", "eager"):
        flags = ["--policy", policy, "--gather", "target_batch"]
        r = simulate(path, *flags)
        runs[policy] = {"command": command_line(path, *flags), "windows": r["autoscale"]["windows"]}
        log(f"autoscale {policy}: bad rate {r['bad_rate']:.4f}")
    save_json(out / "autoscale.json", {"peak_rps": peak, "scales": SCALES, "piece_s": PIECE_S, "runs": runs})
    lines = ["| time s | offered / peak | deferred: GPUs used | busy | bad rate | advice | eager: GPUs used | busy | "
             "bad rate | advice |", "|---|---|---|---|---|---|---|---|---|---|"]
    for i in range(PIECE_S // 2, PIECE_S * len(SCALES), PIECE_S):
        d, e = runs["deferred"]["windows"][i], runs["eager"]["windows"][i]
        lines.append(f"| {d['begin_s']:g} | {SCALES[i // PIECE_S]} | {d['gpus_used']} | {100 * d['busy_fraction']:.0f} % | "
                     f"{100 * d['bad_rate']:.2f} % | {d['advice']:+d} | {e['gpus_used']} | "
                     f"{100 * e['busy_fraction']:.0f} % | {100 * e['bad_rate']:.2f} % | {e['advice']:+d} |")
    (out / "autoscale.md").write_text("Mid-piece windows (1 s):\n\n" + "\n".join(lines) + "\n\nCommands:\n\n    " +
                                      "\n    ".join(v["command"] for v in runs.values()) + "\n")
    subprocess.run([sys.executable, str(ROOT / "bench/plots/exp5_autoscale.py"), str(out / "autoscale.json"),
                    str(out / "exp5_autoscale.png")], check=True)
    log(f"exp5b: {clock.cpu_seconds():.0f} CPU s")


if __name__ == "__main__":
    main()
