#!/usr/bin/env python3
"""Baselines 2: goodput of every system on the paper's model zoos, 64 GPUs.

Mixed (every model of the zoo), Strong (beta/alpha > 2) and Weak (beta/alpha
< 2) subsets of the 1080Ti (35 models) and A100 (37 models) zoos
(data/profiles), each model at its own SLO, equally popular, Poisson, 64
GPUs, 30 s runs; the goodput search of each system (Symphony, Clockwork,
Nexus with 1 and 8 frontends, Shepherd, and Nexus with the exact plan), and
Symphony's goodput as a ratio to each. The paper: Symphony 2.0-2.4x the
baselines on Mixed, 3.5x (1080Ti) and 5.7x (A100) on Strong, 1.23x and 1.10x
on Weak; Nexus loses 11-45 % from 1 to 8 frontends.

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_zoo.py [-j 2]

Writes bench/results/baselines/zoo.json, the configs under
bench/results/baselines/configs/ and the plot zoo_ratios.png.
"""
import argparse
import csv
import subprocess
import sys

from baselines_lib import NEXUS_EXACT, SYSTEMS, goodput
from simlib import ROOT, Clock, log, pmap, results_dir, save_json, write_config

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
    args = ap.parse_args()
    out = results_dir("baselines")
    clock = Clock()
    setups = [(z, k) for z in ("1080ti", "a100") for k in ("mixed", "strong", "weak")]
    paths = {s: write_config(out / "configs" / f"zoo_{s[0]}_{s[1]}.yaml", config(*s)) for s in setups}
    runs = [(s, sys_, f) for s in setups for sys_, f in SYSTEMS + [NEXUS_EXACT]]

    def one(run):
        setup, system, flags = run
        r = goodput(paths[setup], system, flags)
        r.update(zoo=setup[0], subset=setup[1], models=len(subset(*setup)))
        return r

    rows = pmap(one, runs, args.jobs)
    save_json(out / "zoo.json", {"runs": rows, "paper_ratio": {f"{z}/{k}": v for (z, k), v in PAPER_RATIO.items()},
                                 "cpu_seconds": round(clock.cpu_seconds(), 1)})
    subprocess.run([sys.executable, str(ROOT / "bench/plots/baselines_zoo.py"), str(out / "zoo.json"),
                    str(out / "zoo_ratios.png")], check=True)
    log(f"baselines_zoo: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
