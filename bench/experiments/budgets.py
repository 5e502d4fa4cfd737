#!/usr/bin/env python3
"""Clients' budgets against goodput (issue 36: a request's target and deadline).

Every request of the workload carries a budget of ten times its SLO (the
client's upper limit, `budgets: [{fraction: 1, x_slo: 10}]`), against the same
workload without budgets: the goodput search of `symphony simulate --goodput`
on the paper's two staggered-execution configs and the A100 zoo (37 models),
for several seeds. Requests are planned against their target (the shorter of
SLO and budget), so goodput must not move.

  /usr/bin/python3 bench/experiments/budgets.py [--seeds 3] [-j 2]

Writes bench/results/budgets/{configs/,results.json,summary.md}.
"""
import argparse
import copy

import yaml

from simlib import ROOT, Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

CONFIGS = {
    "ResNet50 (stagger)": "examples/paper/stagger_resnet50.yaml",
    "InceptionResNetV2 (stagger)": "examples/paper/stagger_inceptionresnetv2.yaml",
    "A100 zoo, 37 models": "bench/results/exp6/configs/a100_zoo.yaml",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=20, help="simulated seconds per run")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    out = results_dir("budgets")
    clock = Clock()
    runs = []
    for name, path in CONFIGS.items():
        with open(ROOT / path) as f:
            base = yaml.safe_load(f)
        base.pop("search", None)
        base["duration_s"] = args.duration
        stem = (ROOT / path).stem
        for budgets in (False, True):
            c = copy.deepcopy(base)
            if budgets:
                c["workload"]["budgets"] = [{"fraction": 1.0, "x_slo": 10}]
            cfg = write_config(out / "configs" / f"{stem}{'_budgets' if budgets else ''}.yaml", c)
            for seed in range(1, args.seeds + 1):
                runs.append((name, budgets, seed, cfg))

    def run(item):
        name, budgets, seed, cfg = item
        r = simulate(cfg, "--goodput", "--seed", seed)
        log(f"{name} budgets={budgets} seed={seed}: {r['goodput_rps']:.1f} r/s")
        return {"config": name, "budgets": budgets, "seed": seed, "goodput_rps": r["goodput_rps"],
                "command": command_line(cfg, "--goodput", "--seed", seed)}

    results = pmap(run, runs, args.jobs)
    save_json(out / "results.json", {"runs": results, "wall_s": round(clock.wall_seconds(), 1),
                                     "cpu_s": round(clock.cpu_seconds(), 1)})
    lines = ["| config | seed | goodput, no budgets (r/s) | goodput, budgets 10 x SLO (r/s) | change |",
             "|---|---:|---:|---:|---:|"]
    for name in CONFIGS:
        for seed in range(1, args.seeds + 1):
            a = next(r for r in results if r["config"] == name and r["seed"] == seed and not r["budgets"])
            b = next(r for r in results if r["config"] == name and r["seed"] == seed and r["budgets"])
            change = (b["goodput_rps"] - a["goodput_rps"]) / a["goodput_rps"] * 100
            lines.append(f"| {name} | {seed} | {a['goodput_rps']:.1f} | {b['goodput_rps']:.1f} | {change:+.2f} % |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
