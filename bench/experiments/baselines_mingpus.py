#!/usr/bin/env python3
"""Baselines 3: the minimum number of GPUs that serves 15 k requests/s with
every model's bad rate <= 1 % (paper §5.2), A100 profiles, Poisson: one
ResNet50 (alpha 0.268 ms, beta 5.172 ms) at a 25 ms SLO, and the 37-model
A100 zoo (each model at its own SLO, equally popular); the same configs as
experiment 6 (bench/results/exp6/configs/). Every system: `symphony simulate
--min-gpus 15000 [--policy <peer>]`. The paper: for ResNet50 Symphony saves 2 to
6 GPUs against Shepherd and Nexus and Clockwork needs more than twice the
GPUs of the other three; for the zoo Nexus needs 166 % and Shepherd 90 %
more GPUs than Symphony, and Clockwork cannot deliver 15 k r/s (its
scheduler is too slow).

Our engine's eager and deferred:paper rules run beside them as controls.

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_mingpus.py [-j 2]
      [--conditions zero,reference] [--only KEY,...]

Writes bench/results/baselines/mingpus.json; under reference conditions
bench/results/baselines/reference/mingpus.json (and the configs with delays
under reference/configs/).
"""
import argparse

from baselines_lib import ALL_SYSTEMS, add_arguments, conditions, config_under, min_gpus, out_dir, save_runs, select
from simlib import ROOT, Clock, log, pmap, results_dir

SETUPS = {
    "resnet50_a100_slo25": ROOT / "bench/results/exp6/configs/resnet50_a100_slo25.yaml",
    "a100_zoo": ROOT / "bench/results/exp6/configs/a100_zoo.yaml",
}
PAPER = {
    "resnet50_a100_slo25": "Symphony saves 2-6 GPUs vs Shepherd and Nexus; Clockwork > 2x the others",
    "a100_zoo": "Nexus +166 %, Shepherd +90 % GPUs vs Symphony; Clockwork cannot deliver",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    add_arguments(ap)
    args = ap.parse_args()
    systems = select(ALL_SYSTEMS, args.only)
    for condition in conditions(args.conditions):
        out = out_dir(results_dir("baselines"), condition)
        clock = Clock()
        configs = {s: config_under(p, condition, out) for s, p in SETUPS.items()}
        runs = [(s, sys_) for s in SETUPS for sys_ in systems]

        def one(run):
            setup, system = run
            r = min_gpus(configs[setup], system, 15000)
            r.update(setup=setup, conditions=condition)
            return r

        rows = pmap(one, runs, args.jobs)
        save_runs(out / "mingpus.json", rows, systems, {"paper": PAPER, "conditions": condition},
                  clock.cpu_seconds())
        log(f"baselines_mingpus ({condition}): {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
