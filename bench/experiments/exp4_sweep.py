#!/usr/bin/env python3
"""Experiment 4: the synthetic sweep of the paper's configuration table.

Dimensions (paper §3.4, "Synthetic workload"; 1080Ti profiles, appendix):
  model   DenseNet121, InceptionV3, ResNet50V2, VGG16, Xception, BERT
          (homogeneous: `count` copies of one model), or Mixed (the whole
          35-model 1080Ti zoo, each model at its own SLO)
  count   8, 16, 24, 32, 48, 64 models (homogeneous only; Mixed has 35)
  ratio   GPUs per model 1.0, 1.5, ..., 4.0 (GPUs = round(ratio * models))
  SLO     20, 25, 30, 40, 50 ms (homogeneous only)
  shape   Gamma(0.1, 0.2, 0.3, 0.5, 0.7, 1.0) arrivals (1.0 = Poisson)
All models equally popular. 6*6*7*5*6 = 7560 homogeneous + 7*6 = 42 mixed
configurations: far more than 30 CPU-minutes, so this runs a stratified
sample: every (model, SLO, shape) stratum of the homogeneous space gets
--per-stratum configurations with (count, ratio) drawn at random (fixed
seed), and all 42 mixed configurations are included.

For each configuration: the goodput (search, <= 1 % bad per model, seed 1) of
deferred with target-batch gathering (the default rule, and the paper's exact
rule `deferred:paper`), and of the strongest eager: the same engine with
exec = earliest, under both gathering policies, taking the better
(--with-sliding-deferred adds deferred with sliding-window gathering).

  /usr/bin/python3 bench/experiments/exp4_sweep.py [--per-stratum 2] [-j 2]
"""
import argparse
import json
import os
import random
import subprocess
import sys

from simlib import ROOT, Clock, log, pmap, results_dir, save_json, simulate, write_config

MODELS = ["DenseNet121", "InceptionV3", "ResNet50V2", "VGG16", "Xception", "BERT"]
COUNTS = [8, 16, 24, 32, 48, 64]
RATIOS = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
SLOS = [20, 25, 30, 40, 50]
SHAPES = [0.1, 0.2, 0.3, 0.5, 0.7, 1.0]
RUNS = [("deferred", "target_batch"), ("deferred:paper", "target_batch"), ("eager", "target_batch"),
        ("eager", "sliding_window")]
# Simulated time per run: long enough for ~REQS_PER_MODEL requests per model at
# the capacity estimate, within [MIN_S, MAX_S]; the first WARMUP_S are not measured.
REQS_PER_MODEL, MIN_S, MAX_S, WARMUP_S = 6000, 8, 60, 1


def zoo():
    rows = {}
    for line in (ROOT / "data/profiles/1080ti.csv").read_text().splitlines():
        if line.startswith("#") or line.startswith("name,") or not line.strip():
            continue
        name, a, b, slo, mb = line.split(",")
        rows[name] = (float(a), float(b), float(slo), int(mb))
    return rows


def capacity(models, gpus):
    """Fluid capacity (r/s) with every model at its staggered batch: as in bounds.hpp."""
    per_req = 0
    for a, b, slo, mb in models:
        budget = slo * gpus / (gpus + 1)
        bs = max(1, min(mb, int((budget - b) / a)))
        per_req += (a * bs + b) / 1000 / bs / len(models)
    return gpus / per_req


def sample(per_stratum, seed):
    rng = random.Random(seed)
    configs = []
    for model in MODELS:
        for slo in SLOS:
            for shape in SHAPES:
                combos = [(c, r) for c in COUNTS for r in RATIOS]
                for count, ratio in rng.sample(combos, per_stratum):
                    configs.append({"model": model, "count": count, "ratio": ratio, "slo": slo, "shape": shape})
    for ratio in RATIOS:
        for shape in SHAPES:
            configs.append({"model": "Mixed", "count": 35, "ratio": ratio, "slo": None, "shape": shape})
    return configs


def make_config(c, profiles):
    gpus = max(1, round(c["ratio"] * c["count"]))
    if c["model"] == "Mixed":
        models = [{"zoo": "1080ti"}]
        prof = list(profiles.values())
    else:
        models = [{"zoo": "1080ti", "model": c["model"], "count": c["count"], "slo_ms": c["slo"]}]
        a, b, _, mb = profiles[c["model"]]
        prof = [(a, b, c["slo"], mb)] * c["count"]
    cap = capacity(prof, gpus)
    duration = min(MAX_S, max(MIN_S, REQS_PER_MODEL * c["count"] / cap))
    return {
        "name": key(c), "seed": 1, "gpus": gpus, "duration_s": round(duration + WARMUP_S, 1), "warmup_s": WARMUP_S,
        "workload": {"rate": round(cap, 1), "arrival": f"gamma:{c['shape']:g}", "popularity": "equal"},
        "models": models,
        "search": {"goodput": {"start_rps": round(cap, 1)}},
    }


def key(c):
    slo = f"slo{c['slo']}" if c["slo"] else "own_slo"
    return f"{c['model']}_n{c['count']}_r{c['ratio']:g}_{slo}_g{c['shape']:g}"


def add_sliding_deferred(out, jobs, clock):
    """Runs the deferred/sliding_window search for every configuration of an
    existing results.json and stores it there (the other searches are kept)."""
    data = json.load(open(out / "results.json"))

    def one(res):
        if "deferred/sliding_window" not in res:
            r = simulate(out / "configs" / f"{res['key']}.yaml", "--goodput", "--policy", "deferred", "--gather",
                         "sliding_window")
            res["deferred/sliding_window"] = {"goodput_rps": r["goodput_rps"], "median_batch": r.get("median_batch"),
                                              "busy_fraction": r.get("gpu_busy_fraction"),
                                              "runs": len(r["search"]["steps"])}
            log(f"{res['key']}: deferred/sliding_window {r['goodput_rps']:.0f}")
        return res

    data["configs"] = pmap(one, data["configs"], jobs)
    data["cpu_seconds_sliding_deferred"] = round(clock.cpu_seconds(), 1)
    save_json(out / "results.json", data)
    subprocess.run([sys.executable, str(ROOT / "bench/experiments/exp4_report.py")], check=True)
    log(f"exp4 (deferred/sliding_window added): {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-stratum", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2024, help="seed of the sample (not of the simulations)")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="run only the first N configurations (smoke test)")
    ap.add_argument("--only", default="", help="run only configurations whose key contains this")
    ap.add_argument("--with-sliding-deferred", action="store_true")
    ap.add_argument("--add-sliding-deferred", action="store_true",
                    help="add deferred/sliding_window to an existing results.json (same configs)")
    ap.add_argument("--reuse", metavar="RESULTS_JSON",
                    help="take the runs an earlier results.json of the same sample holds (by configuration key) "
                         "instead of running them again")
    ap.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                    help="with --reuse: the earlier file's run OLD is this sweep's run NEW (e.g. "
                         "deferred/target_batch=deferred:paper/target_batch for a file written while the paper's "
                         "rule was the default); runs of the earlier file that are not renamed keep their names")
    args = ap.parse_args()
    out = results_dir("exp4")
    clock = Clock()
    if args.add_sliding_deferred:
        add_sliding_deferred(out, args.jobs, clock)
        return
    profiles = zoo()
    configs = sample(args.per_stratum, args.seed)
    if args.only:
        configs = [c for c in configs if args.only in key(c)]
    if args.limit:
        configs = configs[:args.limit]
    runs = RUNS + ([("deferred", "sliding_window")] if args.with_sliding_deferred else [])
    paths = {key(c): write_config(out / "configs" / f"{key(c)}.yaml", make_config(c, profiles)) for c in configs}
    log(f"exp4: {len(configs)} configurations, {len(runs)} goodput searches each")
    reused = {}
    if args.reuse:
        renames = dict(r.split("=", 1) for r in args.rename)
        run_names = {f"{p}/{g}" for p, g in runs}
        for row in json.load(open(args.reuse))["configs"]:
            reused[row["key"]] = {renames.get(k, k): v for k, v in row.items()
                                  if "/" in k and renames.get(k, k) in run_names and k not in renames.values()}
        log(f"exp4: reusing runs from {args.reuse} for {sum(1 for c in configs if key(c) in reused)} configurations")

    def one(c):
        res = dict(c, key=key(c))
        t0 = os.times()
        for policy, gather in runs:
            if f"{policy}/{gather}" in reused.get(key(c), {}):
                res[f"{policy}/{gather}"] = reused[key(c)][f"{policy}/{gather}"]
                continue
            r = simulate(paths[key(c)], "--goodput", "--policy", policy, "--gather", gather)
            res[f"{policy}/{gather}"] = {"goodput_rps": r["goodput_rps"], "median_batch": r.get("median_batch"),
                                          "busy_fraction": r.get("gpu_busy_fraction"), "runs": len(r["search"]["steps"])}
        d = res["deferred/target_batch"]["goodput_rps"]
        e = max(res["eager/target_batch"]["goodput_rps"], res["eager/sliding_window"]["goodput_rps"])
        res["ratio_vs_best_eager"] = d / e if e > 0 else None
        dp = res["deferred:paper/target_batch"]["goodput_rps"]
        res["paper_ratio_vs_best_eager"] = dp / e if e > 0 else None
        t1 = os.times()
        res["cpu_seconds"] = round(t1.children_user - t0.children_user + t1.children_system - t0.children_system, 2)
        log(f"{key(c)}: deferred {d:.0f}, paper {dp:.0f}, best eager {e:.0f}, ratio {res['ratio_vs_best_eager']:.3f} "
            f"({res['cpu_seconds']:.1f} CPU s)")
        return res

    rows = pmap(one, configs, args.jobs)
    save_json(out / "results.json", {"configs": rows, "per_stratum": args.per_stratum, "sample_seed": args.seed,
                                     "cpu_seconds": round(clock.cpu_seconds(), 1),
                                     "reused": {"from": args.reuse, "renamed": args.rename} if args.reuse else None})
    subprocess.run([sys.executable, str(ROOT / "bench/experiments/exp4_report.py")], check=True)
    log(f"exp4: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
