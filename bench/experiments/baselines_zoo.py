#!/usr/bin/env python3
"""Baselines 2: goodput of every system on the paper's model zoos, 64 GPUs.

Mixed (every model of the zoo), Strong (beta/alpha > 2) and Weak (beta/alpha
< 2) subsets of the 1080Ti (35 models) and A100 (37 models) zoos
(data/profiles), each model at its own SLO, equally popular, Poisson, 64
GPUs, 30 s runs; the goodput search of each system (Symphony, our engine's
eager and deferred:paper rules as controls, Clockwork, Nexus with 1 and 8
frontends, Shepherd, and Nexus with the exact plan), and
Symphony's goodput as a ratio to each. The paper: Symphony 2.0-2.4x the
baselines on Mixed, 3.5x (1080Ti) and 5.7x (A100) on Strong, 1.23x and 1.10x
on Weak; Nexus loses 11-45 % from 1 to 8 frontends.

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_zoo.py [-j 2]
      [--conditions zero,reference] [--only KEY,...]

Writes bench/results/baselines/zoo.json, the configs under
bench/results/baselines/configs/ and the plot zoo_ratios.png; under reference
conditions the same under bench/results/baselines/reference/.
"""
import argparse
import csv
import subprocess
import sys

from baselines_lib import ALL_SYSTEMS, add_arguments, conditions, goodput, out_dir, save_runs, select, with_delays
from simlib import ROOT, Clock, log, pmap, results_dir, write_config

PAPER_RATIO = {  # Symphony / each baseline, as the paper states it
    ("1080ti", "mixed"): "2.0-2.4x", ("a100", "mixed"): "2.0-2.4x",
    ("1080ti", "strong"): "3.5x", ("a100", "strong"): "5.7x",
    ("1080ti", "weak"): "1.23x", ("a100", "weak"): "1.10x",
}


def zoo_models(zoo):
    rows = [r for r in csv.reader(l for l in open(ROOT / "data/profiles" / f"{zoo}.csv") if not l.startswith("#"))]
    header, rows = rows[0], rows[1:]
    return [dict(zip(header, r)) for r in rows if r]


def subset(zoo, kind):
    ms = zoo_models(zoo)
    ratio = {m["name"]: float(m["beta_ms"]) / float(m["alpha_ms"]) for m in ms}
    if kind == "strong":
        ms = [m for m in ms if ratio[m["name"]] > 2]
    elif kind == "weak":
        ms = [m for m in ms if ratio[m["name"]] < 2]
    return [m["name"] for m in ms]


def config(zoo, kind):
    names = subset(zoo, kind)
    return {
        "name": f"zoo_{zoo}_{kind}", "seed": 1, "gpus": 64, "duration_s": 30, "warmup_s": 2,
        "workload": {"rate": 10000, "arrival": "poisson", "popularity": "equal"},
        "models": [{"zoo": zoo, "model": n} for n in names],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    add_arguments(ap)
    args = ap.parse_args()
    systems = select(ALL_SYSTEMS, args.only)
    setups = [(z, k) for z in ("1080ti", "a100") for k in ("mixed", "strong", "weak")]
    for condition in conditions(args.conditions):
        out = out_dir(results_dir("baselines"), condition)
        clock = Clock()
        paths = {s: write_config(out / "configs" / f"zoo_{s[0]}_{s[1]}.yaml", with_delays(config(*s), condition))
                 for s in setups}
        runs = [(s, sys_) for s in setups for sys_ in systems]

        def one(run):
            setup, system = run
            r = goodput(paths[setup], system)
            r.update(zoo=setup[0], subset=setup[1], models=len(subset(*setup)), conditions=condition)
            return r

        rows = pmap(one, runs, args.jobs)
        save_runs(out / "zoo.json", rows, systems,
                  {"paper_ratio": {f"{z}/{k}": v for (z, k), v in PAPER_RATIO.items()}, "conditions": condition},
                  clock.cpu_seconds())
        subprocess.run([sys.executable, str(ROOT / "bench/plots/baselines_zoo.py"), str(out / "zoo.json"),
                        str(out / "zoo_ratios.png")], check=True)
        log(f"baselines_zoo ({condition}): {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
