#!/usr/bin/env python3
"""Baselines 1: the paper's staggered-execution table with all four systems.

ResNet50 (alpha 1.053 ms, beta 5.072 ms, SLO 25 ms) and InceptionResNetV2
(5.090 ms, 18.368 ms, SLO 70 ms), one model on 8 GPUs, Poisson arrivals
(examples/paper/stagger_*.yaml). For every system (Symphony, Clockwork,
Nexus with 1 and 8 frontends, Shepherd, and Nexus with the exact plan) and
seed, the goodput search of `symphony simulate --goodput`, with our engine's
eager and deferred:paper rules as control rows; at seed 1 the
run at the goodput is traced to get the queueing-delay distribution. Next
to the paper's measured goodput (Symphony / Clockwork / Nexus / Shepherd:
5264 / 1358 / 4027 / 4445 and 926 / 458 / 618 / 778) and median batch
sizes (1, 6, 9, 14 and 1, 2, 4, 8 for Clockwork, Nexus, Shepherd,
Symphony).

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_stagger.py [--seeds 5] [-j 2]
      [--conditions zero,reference] [--only KEY,...]

Writes bench/results/baselines/stagger.json and the plots
bench/results/baselines/stagger_batch_sizes.png, stagger_queueing.png; under
reference conditions (delays, baselines_lib.py) the same under
bench/results/baselines/reference/.
"""
import argparse
import csv
import os
import subprocess
import sys
import tempfile

from baselines_lib import ALL_SYSTEMS, add_arguments, conditions, config_under, flags, goodput, out_dir, save_runs, select
from simlib import ROOT, Clock, log, pmap, results_dir

MODELS = {
    "ResNet50": ROOT / "examples/paper/stagger_resnet50.yaml",
    "InceptionResNetV2": ROOT / "examples/paper/stagger_inceptionresnetv2.yaml",
}
PAPER_GOODPUT = {
    "ResNet50": {"symphony": 5264, "clockwork": 1358, "nexus": 4027, "shepherd": 4445},
    "InceptionResNetV2": {"symphony": 926, "clockwork": 458, "nexus": 618, "shepherd": 778},
}
PAPER_MEDIAN_BATCH = {
    "ResNet50": {"clockwork": 1, "nexus": 6, "shepherd": 9, "symphony": 14},
    "InceptionResNetV2": {"clockwork": 1, "nexus": 2, "shepherd": 4, "symphony": 8},
}


def queueing_cdf(config, flags):
    """Queueing delays (ms) of every request that ran in the measured window
    of the run at the goodput (seed 1), as 101 quantiles."""
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.csv")
        cmd = [os.environ.get("SYMPHONY_BIN", str(ROOT / "build/release/symphony")), "simulate", str(config),
               "--goodput", "-q", "--json", os.path.join(d, "r.json"), "--trace-out", trace, *map(str, flags)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        import json
        with open(os.path.join(d, "r.json")) as f:
            warmup_ms = 1e3 * json.load(f)["config"]["warmup_s"]
        q = []
        with open(trace) as f:
            for row in csv.DictReader(f):
                if row["kind"] == "request" and row["queueing_ms"] and float(row["arrival_ms"]) >= warmup_ms:
                    q.append(float(row["queueing_ms"]))
    q.sort()
    return [q[min(len(q) - 1, int(round(p / 100 * (len(q) - 1))))] for p in range(101)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    add_arguments(ap)
    args = ap.parse_args()
    systems = select(ALL_SYSTEMS, args.only)
    for condition in conditions(args.conditions):
        out = out_dir(results_dir("baselines"), condition)
        configs = {m: config_under(p, condition, out) for m, p in MODELS.items()}
        clock = Clock()
        runs = [(m, s, seed) for m in MODELS for s in systems for seed in range(1, args.seeds + 1)]

        def one(run):
            model, system, seed = run
            r = goodput(configs[model], system, ["--seed", seed])
            r.update(model=model, seed=seed, conditions=condition)
            if seed == 1:
                r["queueing_quantiles_ms"] = queueing_cdf(configs[model], [*flags(system), "--seed", seed])
            return r

        rows = pmap(one, runs, args.jobs)
        save_runs(out / "stagger.json", rows, systems, {"paper_goodput": PAPER_GOODPUT,
                                                         "paper_median_batch": PAPER_MEDIAN_BATCH,
                                                         "conditions": condition}, clock.cpu_seconds())
        subprocess.run([sys.executable, str(ROOT / "bench/plots/baselines_stagger.py"), str(out / "stagger.json"),
                        str(out)], check=True)
        log(f"baselines_stagger ({condition}): {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
