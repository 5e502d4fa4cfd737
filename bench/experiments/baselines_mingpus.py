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

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_mingpus.py [-j 2]

Writes bench/results/baselines/mingpus.json.
"""
import argparse

from baselines_lib import NEXUS_EXACT, SYSTEMS, min_gpus
from simlib import ROOT, Clock, log, pmap, results_dir, save_json

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
    args = ap.parse_args()
    out = results_dir("baselines")
    clock = Clock()
    runs = [(s, sys_, f) for s in SETUPS for sys_, f in SYSTEMS + [NEXUS_EXACT]]

    def one(run):
        setup, system, flags = run
        r = min_gpus(SETUPS[setup], system, flags, 15000)
        r["setup"] = setup
        return r

    rows = pmap(one, runs, args.jobs)
    save_json(out / "mingpus.json", {"runs": rows, "paper": PAPER, "cpu_seconds": round(clock.cpu_seconds(), 1)})
    log(f"baselines_mingpus: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
