#!/usr/bin/env python3
"""Experiment 1: the paper's table of staggered execution.

ResNet50 (alpha 1.053 ms, beta 5.072 ms, SLO 25 ms) and InceptionResNetV2
(5.090 ms, 18.368 ms, SLO 70 ms), one model on 8 GPUs, Poisson arrivals
(examples/paper/stagger_*.yaml). For each model, exec policy (deferred,
eager) and gathering policy (target_batch, sliding_window) and several seeds,
the goodput search of `symphony simulate --goodput`; next to the analytical
staggered and no-coordination bounds and the paper's measured goodput.

  /usr/bin/python3 bench/experiments/exp1_stagger.py [--seeds 5] [-j 2]

Also: the sliding-window collapse at 5100 r/s (collapse.json, plot), and
robustness to profile error (log-normal noise on batch times) with and
without a safety margin (noise.json).

Writes bench/results/exp1/{results.json,summary.md} and the plots.
"""
import argparse
import statistics
import subprocess
import sys

import yaml

from simlib import ROOT, Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

MODELS = {
    "ResNet50": ("examples/paper/stagger_resnet50.yaml", 5264),
    "InceptionResNetV2": ("examples/paper/stagger_inceptionresnetv2.yaml", 926),
}
COMBOS = [("deferred", "target_batch"), ("deferred", "sliding_window"), ("eager", "target_batch"),
          ("eager", "sliding_window"), ("deferred:paper", "target_batch")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    out = results_dir("exp1")
    clock = Clock()

    runs = [(m, p, g, s) for m in MODELS for p, g in COMBOS for s in range(1, args.seeds + 1)]

    def one(run):
        model, policy, gather, seed = run
        cfg = ROOT / MODELS[model][0]
        flags = ["--goodput", "--policy", policy, "--gather", gather, "--seed", seed]
        r = simulate(cfg, *flags)
        m = r["models"][0]
        log(f"{model} {policy}/{gather} seed {seed}: goodput {r['goodput_rps']:.1f} r/s, median batch {m['median_batch']}")
        return {
            "model": model, "policy": policy, "gather": gather, "seed": seed,
            "command": command_line(cfg, *flags),
            "goodput_rps": r["goodput_rps"], "lowest_failing_rps": r["search"]["lowest_failing_rps"],
            "median_batch": m["median_batch"], "mean_batch": m["mean_batch"],
            "busy_fraction": r["gpu_busy_fraction"], "bad_rate": m["bad_rate"],
            "queueing_ms": m["queueing_ms"], "latency_ms": m["latency_ms"],
            "requests_by_size": m["requests_by_size"], "bounds": m["bounds"],
            "dropped_by_reason": m["outcomes"]["dropped_by_reason"],
        }

    rows = pmap(one, runs, args.jobs)
    save_json(out / "results.json", {"runs": rows, "cpu_seconds": round(clock.cpu_seconds(), 1)})

    lines = [f"| model | policy | gathering | goodput r/s (mean over {args.seeds} seeds) | min..max | "
             "% of staggered bound | % of paper's measured | median batch | mean batch | GPU busy | p99 queueing ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, (_, paper) in MODELS.items():
        for policy, gather in COMBOS:
            rs = [r for r in rows if r["model"] == model and r["policy"] == policy and r["gather"] == gather]
            g = [r["goodput_rps"] for r in rs]
            bound = rs[0]["bounds"]["staggered"]["throughput_rps"]
            mean = statistics.mean(g)
            lines.append(
                f"| {model} | {policy} | {gather} | {mean:.1f} | {min(g):.1f}..{max(g):.1f} | "
                f"{100 * mean / bound:.1f} % (min {100 * min(g) / bound:.1f} %) | {100 * mean / paper:.1f} % | "
                f"{statistics.median(r['median_batch'] for r in rs):g} | "
                f"{statistics.mean(r['mean_batch'] for r in rs):.2f} | "
                f"{100 * statistics.mean(r['busy_fraction'] for r in rs):.1f} % | "
                f"{statistics.mean(r['queueing_ms']['p99'] for r in rs):.2f} |")
    bounds = ["| model | staggered b | staggered r/s | no-coordination b | no-coordination r/s | paper measured |",
              "|---|---|---|---|---|---|"]
    for model, (_, paper) in MODELS.items():
        b = next(r for r in rows if r["model"] == model)["bounds"]
        bounds.append(f"| {model} | {b['staggered']['batch']} | {b['staggered']['throughput_rps']:.1f} | "
                      f"{b['no_coordination']['batch']} | {b['no_coordination']['throughput_rps']:.1f} | {paper} |")
    # The sliding-window collapse: both gatherings at 5100 r/s (87 % of the
    # ResNet50 bound) for 60 s, bad rate per 1 s window.
    collapse = {}
    for gather in ("sliding_window", "target_batch"):
        cfg = ROOT / MODELS["ResNet50"][0]
        flags = ["--rate", 5100, "--policy", "deferred", "--gather", gather]
        r = simulate(cfg, *flags)
        collapse[gather] = {"command": command_line(cfg, *flags), "bad_rate": r["bad_rate"],
                            "windows": [(w["begin_s"], w["bad_rate"]) for w in r["autoscale"]["windows"]],
                            "batches_by_size": r["batches_by_size"]}
        log(f"ResNet50 at 5100 r/s, deferred/{gather}: bad rate {r['bad_rate']:.4f}")
    save_json(out / "collapse.json", collapse)
    subprocess.run([sys.executable, str(ROOT / "bench/plots/exp1_collapse.py"), str(out / "collapse.json"),
                    str(out / "exp1_collapse.png")], check=True)
    lines.append("\nResNet50 at 5100 r/s for 60 s, deferred: bad rate " + ", ".join(
        f"{g} {100 * c['bad_rate']:.2f} % (first window with > 10 % bad: "
        f"{next((f'{t:g} s' for t, b in c['windows'] if b > 0.1), 'none')})" for g, c in collapse.items()) + ".")
    # Robustness: batches run l(b) * exp(N(0, sigma)) while the scheduler plans
    # with l(b); a safety margin (subtracted from every deadline) absorbs it.
    base = yaml.safe_load((ROOT / MODELS["ResNet50"][0]).read_text())
    noise_rows = []
    for sigma in (0.0, 0.02, 0.05):
        for margin in (0, 1, 2):
            cfg = dict(base, name=f"stagger_resnet50_noise{sigma:g}_margin{margin}",
                       delays={"safety_margin_ms": margin})
            if sigma:
                cfg["noise"] = {"kind": "lognormal", "sigma": sigma}
            path = write_config(out / "configs" / f"noise{sigma:g}_margin{margin}.yaml", cfg)
            for policy in ("deferred", "eager", "deferred:paper"):
                flags = ["--goodput", "--policy", policy]
                r = simulate(path, *flags)
                noise_rows.append({"sigma": sigma, "margin_ms": margin, "policy": policy,
                                   "command": command_line(path, *flags), "goodput_rps": r["goodput_rps"],
                                   "median_batch": r["median_batch"], "late": r["outcomes"]["late"]})
                log(f"noise {sigma} margin {margin} {policy}: {r['goodput_rps']:.0f} r/s")
    save_json(out / "noise.json", noise_rows)
    lines.append("\nRobustness, ResNet50, target batch: goodput r/s (median batch) when batches run l(b) x "
                 "exp(N(0, sigma)) and deadlines carry a safety margin:\n")
    lines.append("| sigma | margin ms | deferred | eager | deferred:paper |")
    lines.append("|---|---|---|---|---|")
    for sigma in (0.0, 0.02, 0.05):
        for margin in (0, 1, 2):
            d, e, p = (next(x for x in noise_rows if x["sigma"] == sigma and x["margin_ms"] == margin and x["policy"] == q)
                       for q in ("deferred", "eager", "deferred:paper"))
            lines.append(f"| {sigma:g} | {margin} | {d['goodput_rps']:.0f} ({d['median_batch']:g}) | "
                         f"{e['goodput_rps']:.0f} ({e['median_batch']:g}) | {p['goodput_rps']:.0f} ({p['median_batch']:g}) |")
    cmds = sorted({r["command"] for r in rows if r["seed"] == 1} | {c["command"] for c in collapse.values()} |
                  {x["command"] for x in noise_rows if x["sigma"] == 0.05})
    (out / "summary.md").write_text("\n".join(bounds) + "\n\n" + "\n".join(lines) + "\n\nCommands (seed 1; "
                                    "other seeds add `--seed N`):\n\n" + "\n".join(f"    {c}" for c in cmds) + "\n")
    subprocess.run([sys.executable, str(ROOT / "bench/plots/exp1_batch_sizes.py"), str(out / "results.json"),
                    str(out / "exp1_batch_sizes.png")], check=True)
    log(f"exp1: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
