#!/usr/bin/env python3
"""Experiment 5: flat top and load-proportional GPU use (paper §3.5, §5.4).

10 equally popular ResNet-like models (alpha 1.053 ms, beta 5.072 ms, the
ResNet50 of experiment 1), 100 ms SLO, 24 GPUs, Poisson arrivals. First the
peak: deferred's goodput (search). Then plain runs at offered loads of
0.1, 0.2, ..., 2.0 x peak under deferred and eager (both gathering policies):
goodput (ok requests per second), GPU-busy fraction, GPUs used, and the
autoscaling advice.

Bars: below the peak, deferred's busy fraction is within 15 points of
load/peak; above it, deferred's goodput stays within 5 % of the peak.

  /usr/bin/python3 bench/experiments/exp5_flattop.py [-j 2]
"""
import argparse
import subprocess
import sys

from simlib import ROOT, Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

CONFIG = {
    "name": "flattop_10x_resnet50_24gpu", "seed": 1, "gpus": 24, "duration_s": 30, "warmup_s": 2,
    "workload": {"rate": 20000, "arrival": "poisson", "popularity": "equal"},
    "models": [{"name": "ResNet50", "alpha_ms": 1.053, "beta_ms": 5.072, "slo_ms": 100, "max_batch": 64, "count": 10}],
}
COMBOS = [("deferred", "target_batch"), ("eager", "target_batch"), ("deferred", "sliding_window"),
          ("eager", "sliding_window"), ("deferred:paper", "target_batch")]
LOADS = [round(0.1 * i, 1) for i in range(1, 21)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    out = results_dir("exp5")
    clock = Clock()
    path = write_config(out / "configs" / "flattop.yaml", CONFIG)

    peaks = {}
    for policy, gather in COMBOS:
        r = simulate(path, "--goodput", "--policy", policy, "--gather", gather)
        peaks[f"{policy}/{gather}"] = {"goodput_rps": r["goodput_rps"],
                                       "command": command_line(path, "--goodput", "--policy", policy, "--gather", gather)}
        log(f"peak {policy}/{gather}: {r['goodput_rps']:.0f} r/s")
    peak = peaks["deferred/target_batch"]["goodput_rps"]

    def one(run):
        load, policy, gather = run
        rate = round(load * peak, 1)
        flags = ["--rate", rate, "--policy", policy, "--gather", gather]
        r = simulate(path, *flags)
        return {"load": load, "rate": rate, "policy": policy, "gather": gather, "command": command_line(path, *flags),
                "ok_rps": r["ok_rps"], "bad_rate": r["bad_rate"], "busy_fraction": r["gpu_busy_fraction"],
                "gpus_used": r["gpus_used"], "median_batch": r["median_batch"],
                "advice": [w["advice"] for w in r["autoscale"]["windows"][2:]]}

    rows = pmap(one, [(l, p, g) for l in LOADS for p, g in COMBOS], args.jobs)
    save_json(out / "results.json", {"peak_rps": peak, "peaks": peaks, "runs": rows,
                                     "cpu_seconds": round(clock.cpu_seconds(), 1)})

    def get(load, policy, gather):
        return next(r for r in rows if r["load"] == load and r["policy"] == policy and r["gather"] == gather)

    text = ["Peaks (goodput search): " + ", ".join(f"{k} {v['goodput_rps']:.0f} r/s" for k, v in peaks.items()) + "\n",
            "| load / deferred peak | offered r/s | deferred goodput / peak | deferred busy | busy - load (points) | "
            "deferred GPUs used | deferred median autoscale advice | eager goodput / peak | eager busy | "
            "deferred (sliding) goodput / peak | eager (sliding) goodput / peak | deferred:paper goodput / peak | "
            "deferred:paper busy |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    worst_below, worst_above = 0.0, 1e9
    for l in LOADS:
        d, e = get(l, "deferred", "target_batch"), get(l, "eager", "target_batch")
        ds, es = get(l, "deferred", "sliding_window"), get(l, "eager", "sliding_window")
        dp = get(l, "deferred:paper", "target_batch")
        gap = 100 * (d["busy_fraction"] - min(l, 1.0))
        if l < 1:
            worst_below = max(worst_below, abs(gap))
        if l > 1:
            worst_above = min(worst_above, d["ok_rps"] / peak)
        adv = sorted(d["advice"])[len(d["advice"]) // 2] if d["advice"] else 0
        text.append(f"| {l:.1f} | {d['rate']:.0f} | {d['ok_rps'] / peak:.3f} | {100 * d['busy_fraction']:.1f} % | "
                    f"{gap:+.1f} | {d['gpus_used']} | {adv:+d} | {e['ok_rps'] / peak:.3f} | "
                    f"{100 * e['busy_fraction']:.1f} % | {ds['ok_rps'] / peak:.3f} | {es['ok_rps'] / peak:.3f} | "
                    f"{dp['ok_rps'] / peak:.3f} | {100 * dp['busy_fraction']:.1f} % |")
    text.append(f"\nBelow the peak, deferred's busy fraction is at most {worst_below:.1f} points from load/peak "
                f"(bar: 15). Above it, deferred's goodput is at least {100 * worst_above:.1f} % of the peak (bar: 95 %).\n")
    text.append("Commands:\n\n    " + peaks["deferred/target_batch"]["command"] + "\n    " +
                get(1.5, "deferred", "target_batch")["command"] + "   # one load point; --rate = load x peak\n")
    (out / "summary.md").write_text("\n".join(text))
    subprocess.run([sys.executable, str(ROOT / "bench/plots/exp5_flattop.py"), str(out / "results.json"),
                    str(out / "exp5_flattop.png")], check=True)
    log(f"exp5: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
