#!/usr/bin/env python3
"""Baselines 4: workload sensitivity (paper §5.3, "Varying the workload
characteristics"). 20 ResNet50-like models (alpha 1.053 ms, beta 5.072 ms,
the staggered-execution table's ResNet50), all at one SLO from 15 to 100 ms,
equally popular or Zipf(0.9), Poisson or Gamma(shape 0.05) arrivals, 32
GPUs, 40 s runs; the goodput search of every system (our engine's eager and
deferred:paper rules as controls; not Nexus's exact plan). The paper: Symphony's
advantage is largest at tight SLOs in all four setups; Nexus does badly with
bursty arrivals (static partitioning, no statistical multiplexing); at loose
SLOs all systems do well.

The SLOs are subsampled to 15, 20, 30, 50 and 100 ms to keep the CPU time
reasonable (--slos changes them).

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_sensitivity.py [-j 2]
      [--conditions zero,reference] [--only KEY,...]

Writes bench/results/baselines/sensitivity.json, the configs under
bench/results/baselines/configs/ and the plot sensitivity.png; under
reference conditions the same under bench/results/baselines/reference/.
"""
import argparse
import subprocess
import sys

from baselines_lib import SYSTEMS, add_arguments, conditions, goodput, out_dir, save_runs, select, with_delays
from simlib import ROOT, Clock, log, pmap, results_dir, write_config

POPULARITY = {"equal": "equal", "zipf0.9": "zipf:0.9"}
ARRIVAL = {"poisson": "poisson", "gamma0.05": "gamma:0.05"}


def config(slo, pop, arr):
    return {
        "name": f"sens_slo{slo}_{pop}_{arr}", "seed": 1, "gpus": 32, "duration_s": 40, "warmup_s": 2,
        "workload": {"rate": 10000, "arrival": ARRIVAL[arr], "popularity": POPULARITY[pop]},
        "models": [{"name": "ResNet50", "alpha_ms": 1.053, "beta_ms": 5.072, "slo_ms": slo, "max_batch": 64,
                    "count": 20}],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--slos", default="15,20,30,50,100")
    add_arguments(ap)
    args = ap.parse_args()
    systems = select(SYSTEMS, args.only)
    slos = [int(s) for s in args.slos.split(",")]
    setups = [(s, p, a) for p in POPULARITY for a in ARRIVAL for s in slos]
    for condition in conditions(args.conditions):
        out = out_dir(results_dir("baselines"), condition)
        clock = Clock()
        paths = {s: write_config(out / "configs" / f"sens_slo{s[0]}_{s[1]}_{s[2]}.yaml",
                                 with_delays(config(*s), condition)) for s in setups}
        runs = [(s, sys_) for s in setups for sys_ in systems]

        def one(run):
            setup, system = run
            r = goodput(paths[setup], system)
            r.update(slo_ms=setup[0], popularity=setup[1], arrival=setup[2], conditions=condition)
            return r

        rows = pmap(one, runs, args.jobs)
        save_runs(out / "sensitivity.json", rows, systems, {"conditions": condition}, clock.cpu_seconds())
        subprocess.run([sys.executable, str(ROOT / "bench/plots/baselines_sensitivity.py"),
                        str(out / "sensitivity.json"), str(out / "sensitivity.png")], check=True)
        log(f"baselines_sensitivity ({condition}): {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
