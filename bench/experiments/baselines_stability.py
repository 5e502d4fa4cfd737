#!/usr/bin/env python3
"""Baselines 6: stability and GPU use against offered load, every system
(the paper's stability and utilisation figure, our experiment 5's workload).

10 equally popular ResNet-like models (alpha 1.053 ms, beta 5.072 ms, the
staggered-execution table's ResNet50), SLO 100 ms, 24 GPUs, Poisson, 30 s
runs, seed 1. First each system's goodput (search); then plain runs of every
system at the same offered loads, 0.1 to 2.0 x Symphony's goodput: goodput
at that load (ok requests/s in the measured window), bad rate, GPU busy
fraction (busy GPU-seconds / all GPU-seconds), GPUs used, mean batch.

Systems: baselines_lib.SYSTEMS (Symphony = deferred; eager and
deferred:paper on our engine; Clockwork, Nexus 1 and 8 frontends, Shepherd).

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_stability.py [-j 2]
      [--conditions zero] [--only KEY,...]

Writes bench/results/baselines/stability.json (reference conditions:
reference/stability.json), its config under configs/, and stability.png
when matplotlib is available.
"""
import argparse

from baselines_lib import (LABELS, SYSTEMS, add_arguments, conditions, flags, goodput, out_dir, save_runs, select,
                           summarize, with_delays)
from simlib import Clock, command_line, log, pmap, results_dir, simulate, write_config

CONFIG = {
    "name": "stability_10x_resnet50_24gpu", "seed": 1, "gpus": 24, "duration_s": 30, "warmup_s": 2,
    "workload": {"rate": 20000, "arrival": "poisson", "popularity": "equal"},
    "models": [{"name": "ResNet50", "alpha_ms": 1.053, "beta_ms": 5.072, "slo_ms": 100, "max_batch": 64,
                "count": 10}],
}
LOADS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6, 1.8, 2.0]


def plot(data, path):
    try:
        import matplotlib
    except ImportError:
        log("matplotlib not available: no plot")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    peak = data["symphony_goodput_rps"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4))
    keys = list(dict.fromkeys(r["system"] for r in data["runs"] if r["kind"] == "load"))
    for k, key in enumerate(keys):
        rs = sorted((r for r in data["runs"] if r["kind"] == "load" and r["system"] == key), key=lambda r: r["load"])
        style = "-" if key in ("symphony", "eager", "deferred_paper") else "--"
        axes[0].plot([r["offered_rps"] for r in rs], [r["ok_rps"] for r in rs], style, marker="o", ms=3,
                     color=f"C{k}", label=LABELS[key])
        axes[1].plot([r["offered_rps"] for r in rs], [100 * r["gpu_busy_fraction"] for r in rs], style, marker="o",
                     ms=3, color=f"C{k}", label=LABELS[key])
    top = max(r["offered_rps"] for r in data["runs"] if r["kind"] == "load")
    axes[0].plot([0, top], [0, top], ":", color="grey", lw=0.8, label="goodput = offered")
    axes[1].plot([0, peak, top], [0, 100, 100], ":", color="grey", lw=0.8, label="offered / Symphony's goodput")
    axes[0].set_ylabel("goodput at that load (ok r/s)")
    axes[1].set_ylabel("GPU busy (%)")
    for ax in axes:
        ax.set_xlabel("offered load (r/s)")
        ax.axvline(peak, color="k", lw=0.5)
        ax.legend(fontsize=7)
    axes[0].set_title("10 ResNet50-like models, SLO 100 ms, 24 GPUs: goodput")
    axes[1].set_title("GPU busy fraction")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    add_arguments(ap)
    ap.set_defaults(conditions="zero")
    args = ap.parse_args()
    systems = select(SYSTEMS, args.only)
    for condition in conditions(args.conditions):
        out = out_dir(results_dir("baselines"), condition)
        clock = Clock()
        path = write_config(out / "configs" / "stability.yaml", with_delays(CONFIG, condition))
        # Symphony's goodput sets the loads (rerun when Symphony is not among --only: it is deterministic).
        peak = simulate(path, "--goodput", "--policy", "deferred")["goodput_rps"]
        log(f"stability ({condition}): Symphony's goodput {peak:.0f} r/s")

        def one(run):
            system, load = run
            if load is None:
                r = goodput(path, system)
                r.update(kind="goodput", conditions=condition)
                return r
            rate = round(load * peak, 1)
            args_ = ["--rate", rate, *flags(system)]
            r = summarize(simulate(path, *args_))
            r.update(kind="load", system=system.key, policy=system.policy, load=load, offered_rps=rate,
                     conditions=condition, command=command_line(path, *args_))
            log(f"  {system.key} at {load} x: ok {r['ok_rps']:.0f} r/s, busy {r['gpu_busy_fraction']:.3f}")
            return r

        runs = [(s, None) for s in systems] + [(s, l) for s in systems for l in LOADS]
        rows = pmap(one, runs, args.jobs)
        for r in rows:  # the per-size histograms are long and not needed here
            r.pop("requests_by_size", None)
            r.pop("batches_by_size", None)
        save_runs(out / "stability.json", rows, systems,
                  {"symphony_goodput_rps": peak, "loads": LOADS, "conditions": condition,
                   "peak_command": command_line(path, "--goodput", "--policy", "deferred")}, clock.cpu_seconds())
        import json
        plot(json.load(open(out / "stability.json")), out / "stability.png")
        log(f"baselines_stability ({condition}): {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
