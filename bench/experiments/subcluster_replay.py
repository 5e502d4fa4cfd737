#!/usr/bin/env python3
"""The paper's "Large cluster and changing workload" experiment (§5, fig:replay).

512 emulated GPUs serve 24 models of the 1080Ti zoo (different batching
profiles and SLOs) whose request rates change over hours, once as one big
cluster (one scheduler over every GPU) and once split into 4 sub-clusters of
128 GPUs, re-partitioned every 5 minutes (symphony::partition, greedy, at most
two moves per epoch). Per minute: goodput and unserved requests per model, GPUs
in use, the autoscaling advice (cluster and per sub-cluster) and the bad rate.

The paper synthesizes its rates from 150 hours of videos, which we do not
have. The workload here is synthesized, seeded and written out in full in the
configs (every model's rate for every minute), so the configs alone reproduce
the runs. How (all draws from random.Random(SEED)):

  * Models: 24 of the 35 of data/profiles/1080ti.csv, evenly spaced in the
    table's order (descending beta/alpha): indices round(i * 34 / 23), i < 24.
    Each at its zoo SLO, Poisson arrivals.
  * Time: H hours of simulated time (--hours, default 4), one compressed
    "day": the diurnal cycle has period H hours (a day's shape sped up 24/H
    times, so that a run fits the CPU budget). Rates are piecewise constant
    per minute.
  * Popularity: each model's peak request rate is proportional to
    w_i / sqrt(c_i), w_i ~ lognormal(0, 0.5), c_i = l_i(b_i) / b_i its GPU
    time per request (b_i the staggered bound's batch on a sub-cluster of 128
    GPUs): cheap models get more requests, expensive ones more GPU time.
    On average no model needs more than a tenth of the cluster; a burst at
    a model's peak can take it past one sub-cluster (128 GPUs), and a model
    lives in one sub-cluster.
  * Diurnal shape: d_i(t) = m_i + (1 - m_i) (1 + cos(2 pi (t / T - p_i))) / 2,
    T the run's length, with its peak at p_i T, p_i ~ U(0.38, 0.62) (a model's
    peak hour varies by +-3 "hours" of the day), and a trough of m_i of the
    peak, m_i ~ U(0.15, 0.35).
  * Bursts: per model, Poisson(BURSTS) bursts, each starting at a uniform
    minute, lasting U{3..12} minutes, multiplying the rate by U(1.5, 2.5);
    overlapping bursts multiply.
  * Scale: the rates are scaled together so that the peak minute of the
    cluster's GPU demand, sum_i rate_i(t) x l_i(b_i) / b_i (b_i the staggered
    bound's batch of model i on 128 GPUs), equals PEAK_DEMAND x 512 GPUs: at
    the peak the work exceeds what the cluster can serve, in the trough it
    needs about a quarter of it.

Runs (configs/*.yaml, each `build/release/symphony simulate <config> --json -`):
  big          one scheduler over the 512 GPUs (as if every backend could hold
               all 24 models: they need 3800 MiB of weights plus 2580 MiB of
               activations, over the 4096 MiB a backend has here)
  partitioned  4 sub-clusters of 128 GPUs, memory cap 4096 MiB per backend
               (data/profiles/zoo_memory.csv), epochs of 5 minutes, greedy,
               C_max 4 (two moves), balance by GPU time
  rate         as partitioned, but balancing raw request rates (the paper's
               r_i), to show what that costs when models differ in cost

  /usr/bin/python3 bench/experiments/subcluster_replay.py [-j 3] [--hours 4]
"""
import argparse
import csv
import json
import math
import random
import subprocess
import sys
import time

from simlib import ROOT, Clock, binary, command_line, log, pmap, results_dir, save_json, write_config

SEED = 16
GPUS = 512
SUBCLUSTERS = 4
PIECE_S = 60
EPOCH_S = 300
PEAK_DEMAND = 1.0
BURSTS = 1.5


def zoo_models():
    rows = [r for r in csv.reader(line for line in open(ROOT / "data/profiles/1080ti.csv") if not line.startswith("#"))]
    header, rows = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    picked = [rows[round(i * 34 / 23)] for i in range(24)]
    out = []
    for r in picked:
        a, b, slo = float(r[col["alpha_ms"]]), float(r[col["beta_ms"]]), float(r[col["slo_ms"]])
        n = GPUS // SUBCLUSTERS
        batch = min(64, int((slo * n / (n + 1) - b) // a))  # staggered bound on a sub-cluster
        out.append({"name": r[col["name"]], "alpha_ms": a, "beta_ms": b, "slo_ms": slo,
                    "gpu_ms_per_request": (a * batch + b) / batch})
    return out


def workload(models, hours):
    rng = random.Random(SEED)
    duration = hours * 3600
    pieces = duration // PIECE_S
    shapes = []
    for m in models:
        w = rng.lognormvariate(0, 0.5) / math.sqrt(m["gpu_ms_per_request"])
        peak = rng.uniform(0.38, 0.62)
        trough = rng.uniform(0.15, 0.35)
        bursts = []
        # Poisson(BURSTS) by inversion, then the bursts.
        k, p, u = 0, math.exp(-BURSTS), rng.random()
        cdf = p
        while u > cdf:
            k += 1
            p *= BURSTS / k
            cdf += p
        for _ in range(k):
            start = rng.randrange(pieces)
            bursts.append((start, start + rng.randint(3, 12), rng.uniform(1.5, 2.5)))
        scale = []
        for j in range(pieces):
            t = (j + 0.5) / pieces
            d = trough + (1 - trough) * (1 + math.cos(2 * math.pi * (t - peak))) / 2
            for (s, e, f) in bursts:
                if s <= j < e:
                    d *= f
            scale.append(d)
        shapes.append({"weight": w, "peak": peak, "trough": trough, "bursts": bursts, "scale": scale})
    demand = [sum(s["weight"] * s["scale"][j] * m["gpu_ms_per_request"] / 1000 for s, m in zip(shapes, models))
              for j in range(pieces)]
    k = PEAK_DEMAND * GPUS / max(demand)
    for s in shapes:
        s["peak_rps"] = s["weight"] * k
    return shapes, [d * k for d in demand]


def config(name, models, shapes, hours, subclusters):
    entries = []
    for m, s in zip(models, shapes):
        entries.append({"zoo": "1080ti", "model": m["name"], "rate": round(s["peak_rps"], 3),
                        "rate_changes": [{"at_s": j * PIECE_S, "scale": round(x, 5)} for j, x in enumerate(s["scale"])]})
    c = {"name": name, "seed": 1, "gpus": GPUS, "duration_s": hours * 3600, "warmup_s": PIECE_S,
         "autoscale_window_s": PIECE_S, "max_bad_rate": 0.01, "workload": {"arrival": "poisson"},
         "models": entries, "subclusters": subclusters}
    return c


def run(args):
    path, name = args
    t0 = time.time()
    c0 = time.process_time()
    out = REPORTS / f"{name}.report.json"
    cmd = [str(binary()), "simulate", str(path), "-q", "--json", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {p.stderr}")
    wall = time.time() - t0
    log(f"{name}: {wall:.0f} s wall")
    return name, json.load(open(out)), wall


def summarize(name, r, models):
    """What the plots and the tables need from one report."""
    w = r["autoscale"]["windows"]
    sc = r.get("subclusters", {})
    out = {
        "command": None,
        "ok_rps": r["ok_rps"], "offered_rps": r["offered_rps"], "bad_rate": r["bad_rate"],
        "worst_model_bad_rate": r["worst_model_bad_rate"], "gpu_busy_fraction": r["gpu_busy_fraction"],
        "simulated_requests": r["simulated_requests"], "events": r["events"],
        "windows": [{k: x[k] for k in ("begin_s", "arrived", "bad_rate", "busy_fraction", "gpus_used", "advice",
                                       "add_gpus", "release_gpus")} for x in w],
        "models": [{"name": m["name"], "slo_ms": m["slo_ms"], "offered_rps": m["offered_rps"], "ok_rps": m["ok_rps"],
                    "bad_rate": m["bad_rate"], "median_batch": m["median_batch"]} for m in r["models"]],
        "series": r["series"],
    }
    if sc.get("count", 1) > 1:
        out["subclusters"] = {
            "gpus": sc["gpus"], "moves": sc["moves"],
            "epochs": [{"time_s": e["time_s"], "status": e["status"], "stats": e["stats"],
                        "moves": e["moves"], "assignment": e["assignment"]} for e in sc["epochs"]],
            "per_subcluster": [{"gpus": s["gpus"], "offered_rps": s["offered_rps"], "goodput_rps": s["goodput_rps"],
                                "bad_rate": s["bad_rate"], "gpu_busy_fraction": s["gpu_busy_fraction"],
                                "advice": [x["advice"] for x in s["autoscale"]["windows"]],
                                "bad_rates": [x["bad_rate"] for x in s["autoscale"]["windows"]],
                                "gpus_used": [x["gpus_used"] for x in s["autoscale"]["windows"]],
                                "busy": [x["busy_fraction"] for x in s["autoscale"]["windows"]]}
                               for s in sc["per_subcluster"]],
        }
    return out


def main():
    global RESULTS, REPORTS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-j", type=int, default=1, help="simulator processes at once")
    ap.add_argument("--hours", type=int, default=4, help="simulated hours (one compressed day)")
    ap.add_argument("--runs", default="big,partitioned,rate", help="which runs")
    args = ap.parse_args()
    RESULTS = results_dir("subcluster")
    REPORTS = ROOT / "build" / "subcluster_replay"  # the full reports (large; rebuilt by the configs)
    REPORTS.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    models = zoo_models()
    shapes, demand = workload(models, args.hours)
    partitioned = {"count": SUBCLUSTERS, "epoch_s": EPOCH_S, "method": "greedy", "max_disruption": 4,
                   "balance": "gpu_time", "model_memory": "zoo_memory", "memory_cap_mib": 4096,
                   "series_step_s": PIECE_S}
    setups = {
        "big": {"count": 1, "series_step_s": PIECE_S},
        "partitioned": partitioned,
        "rate": dict(partitioned, balance="rate"),
    }
    names = [n for n in args.runs.split(",") if n]
    paths = []
    for n in names:
        p = write_config(RESULTS / "configs" / f"{n}.yaml", config(f"replay_{n}", models, shapes, args.hours, setups[n]))
        paths.append((p, n))
    results = pmap(run, paths, args.j)
    data = {"seed": SEED, "gpus": GPUS, "hours": args.hours, "piece_s": PIECE_S, "epoch_s": EPOCH_S,
            "peak_demand": PEAK_DEMAND, "demand_gpus": demand,
            "workload": [{"name": m["name"], "slo_ms": m["slo_ms"], "alpha_ms": m["alpha_ms"], "beta_ms": m["beta_ms"],
                          "gpu_ms_per_request": m["gpu_ms_per_request"], "peak_rps": s["peak_rps"],
                          "peak_at": s["peak"], "trough": s["trough"], "bursts": s["bursts"]}
                         for m, s in zip(models, shapes)],
            "runs": {}, "wall_s": {}}
    for (path, n), (_, report, wall) in zip(paths, results):
        data["runs"][n] = summarize(n, report, models)
        data["runs"][n]["command"] = command_line(path, "--json", "-")
        data["wall_s"][n] = round(wall)
    data["cpu_s_total"] = round(clock.cpu_seconds())
    save_json(RESULTS / "results.json", data)
    log(f"subcluster replay: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")
    subprocess.run([sys.executable, str(ROOT / "bench/plots/subcluster_replay.py"), str(RESULTS / "results.json"),
                    str(RESULTS)], check=True)


if __name__ == "__main__":
    main()
