#!/usr/bin/python3
"""The paper's evaluation of sub-cluster partitioning (appendix "Effectiveness
of Cluster Partitioning"): many random instances of models drawn from the
model zoo, exponentially distributed rates, partitioned by the MILP (CBC),
the paper's random-search baseline and the greedy heuristic under the same
CPU-time limit; the imbalance factors (max - min) / avg of rate and static
memory across sub-clusters of each.

Two settings: 800 models across 20 sub-clusters (the paper's figure) and 400
models across 4 (the paper's "m = 400, l = 4 at 10 s" remark).

Every solve runs the real CLI (`symphony partition <instance.csv> --json FILE`),
so the numbers come from the code path a user runs. Instances are generated
from the seed (instance k of a setting uses seed base + k) and written to
--work (default build/partition_eval); results go to
bench/results/partition/results.json. Plot: bench/plots/partition_cdf.py.

Model memory (documented in bench/results/partition.md):
  static_mib  = the Keras Applications weight size in MB (ImageNet, with top),
                BERT-base 420 MiB (110 M fp32 parameters), SSD-MobileNet 27 MiB
                (6.8 M parameters), MobileNetV3Small/Large 10/21 MiB.
  dynamic_mib = batch x per-sample activation memory, where batch is the
                largest batch (<= 64) the A100 profile runs within the SLO and
                the per-sample activation memory is 8 MiB per ms of the
                model's per-request cost alpha on the 1080Ti (a proxy for its
                FLOPs; EfficientNetB6/B7, not in the 1080Ti table, scale
                EfficientNetB5's alpha by their A100 alphas).
A variant (name#k) of a zoo model is a specialised copy (fine-tuned
weights): same sizes, its own rate.

Usage:
  nice /usr/bin/python3 bench/experiments/partition_eval.py [--instances 20] [--small-instances 15]
      [--time-limit 10] [-j 1]
"""
import argparse
import concurrent.futures
import csv
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "results" / "partition"

# Weight sizes in MB: Keras Applications (keras.io/api/applications), except
# where noted.
STATIC_MIB = {
    "Xception": 88, "VGG16": 528, "VGG19": 549, "ResNet50": 98, "ResNet50V2": 98, "ResNet101": 171,
    "ResNet101V2": 171, "ResNet152": 232, "ResNet152V2": 232, "InceptionV3": 92, "InceptionResNetV2": 215,
    "MobileNet": 16, "MobileNetV2": 14, "DenseNet121": 33, "DenseNet169": 57, "DenseNet201": 80,
    "NASNetMobile": 23, "NASNetLarge": 343, "EfficientNetB0": 29, "EfficientNetB1": 31, "EfficientNetB2": 36,
    "EfficientNetB3": 48, "EfficientNetB4": 75, "EfficientNetB5": 118, "EfficientNetB6": 166,
    "EfficientNetB7": 256, "EfficientNetV2B0": 29, "EfficientNetV2B1": 34, "EfficientNetV2B2": 42,
    "EfficientNetV2B3": 59, "EfficientNetV2S": 88, "EfficientNetV2M": 220, "EfficientNetV2L": 479,
    "MobileNetV3Small": 10,   # 2.6 M parameters (not in the Keras table's size column)
    "MobileNetV3Large": 21,   # 5.5 M parameters
    "SSDMobilenet": 27,       # SSD MobileNet v1 (COCO), 6.8 M parameters
    "BERT": 420,              # BERT-base, 110 M parameters, fp32
}
ACT_MIB_PER_MS = 8.0  # per-sample activation memory per ms of 1080Ti alpha
MAX_BATCH = 64

SETTINGS = {
    # name: models, sub-clusters, memory cap (MiB per backend), rate cap (x the average)
    "m800_l20": dict(models=800, subclusters=20, memory_cap_mib=11264, rate_cap_factor=1.5, seed_base=1000),
    "m400_l4": dict(models=400, subclusters=4, memory_cap_mib=40960, rate_cap_factor=1.5, seed_base=2000),
}
MEAN_RATE = 100.0  # r/s; only the ratios matter for the imbalance factors
# milp_warm: the MILP started from the greedy solution (--warm-start).
METHODS = ["milp", "random", "greedy", "milp_warm"]


def binary():
    return Path(os.environ.get("SYMPHONY_BIN", ROOT / "build" / "release" / "symphony"))


def read_profiles(name):
    rows = {}
    with open(ROOT / "data" / "profiles" / f"{name}.csv") as f:
        lines = [l for l in f if not l.startswith("#") and l.strip()]
    for r in csv.DictReader(lines):
        rows[r["name"]] = {k: float(v) for k, v in r.items() if k != "name"}
    return rows


def zoo_memory():
    """The zoo's models with static and dynamic memory (MiB), as documented above."""
    a100 = read_profiles("a100")
    gtx = read_profiles("1080ti")
    zoo = []
    for name, p in a100.items():
        if name in gtx:
            alpha_1080 = gtx[name]["alpha_ms"]
        else:  # EfficientNetB6/B7: scale B5's 1080Ti alpha by the A100 alphas
            alpha_1080 = gtx["EfficientNetB5"]["alpha_ms"] * p["alpha_ms"] / a100["EfficientNetB5"]["alpha_ms"]
        batch = max(1, min(MAX_BATCH, int((p["slo_ms"] - p["beta_ms"]) / p["alpha_ms"])))
        dynamic = batch * ACT_MIB_PER_MS * alpha_1080
        zoo.append(dict(name=name, static_mib=float(STATIC_MIB[name]), dynamic_mib=round(dynamic, 1),
                        batch=batch, alpha_1080ti_ms=round(alpha_1080, 3)))
    return zoo


def make_instance(zoo, setting, k):
    """Instance k of a setting: models drawn uniformly from the zoo (variants
    named name#v), rates exponential with mean MEAN_RATE."""
    s = SETTINGS[setting]
    rng = random.Random(s["seed_base"] + k)
    count = {}
    models = []
    for _ in range(s["models"]):
        z = zoo[rng.randrange(len(zoo))]
        v = count.get(z["name"], 0)
        count[z["name"]] = v + 1
        models.append(dict(name=f"{z['name']}#{v}", rate=round(rng.expovariate(1 / MEAN_RATE), 3),
                           static_mib=z["static_mib"], dynamic_mib=z["dynamic_mib"]))
    return models


def write_csv(path, models):
    with open(path, "w") as f:
        f.write("name,rate,static_mib,dynamic_mib\n")
        for m in models:
            f.write(f"{m['name']},{m['rate']},{m['static_mib']},{m['dynamic_mib']}\n")


def command(path, setting, models, method, time_limit, seed, report):
    s = SETTINGS[setting]
    rate_cap = s["rate_cap_factor"] * sum(m["rate"] for m in models) / s["subclusters"]
    extra = ["--warm-start"] if method == "milp_warm" else []
    return [str(binary()), "partition", str(path), "--subclusters", str(s["subclusters"]),
            "--time-limit", str(time_limit), "--method", method.split("_")[0], *extra, "--seed", str(seed),
            "--rate-cap", f"{rate_cap:.3f}", "--memory-cap", str(s["memory_cap_mib"]),
            "--json", str(report), "-q"]


def run_one(job):
    cmd, report = job
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if out.returncode not in (0, 1) or not Path(report).exists():
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    r = json.loads(Path(report).read_text())
    keep = {k: r.get(k) for k in ("status", "objective", "bound", "gap", "cpu_seconds", "time_limit_hit",
                                  "work")}
    keep["rate_imbalance"] = r["imbalance"]["rate"] if "imbalance" in r else None
    keep["memory_imbalance"] = r["imbalance"]["memory"] if "imbalance" in r else None
    keep["wall_seconds"] = round(wall, 2)
    return keep


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=20, help="instances of 800 models / 20 sub-clusters")
    ap.add_argument("--small-instances", type=int, default=15, help="instances of 400 models / 4 sub-clusters")
    ap.add_argument("--time-limit", type=float, default=10, help="CPU seconds per solve (the paper: 10)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--work", default=str(ROOT / "build" / "partition_eval"), help="instances and raw reports")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="concurrent solves (CPU-time limits: safe to raise)")
    args = ap.parse_args()
    if not binary().exists():
        sys.exit(f"{binary()} not found: build it (cmake --build build/release --target symphony_cli) "
                 "or set SYMPHONY_BIN")
    methods = args.methods.split(",")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)

    zoo = zoo_memory()
    with open(OUT / "zoo_memory.csv", "w") as f:
        f.write("# Model memory derived by bench/experiments/partition_eval.py (see its docstring)\n")
        f.write("name,static_mib,dynamic_mib,batch,alpha_1080ti_ms\n")
        for z in zoo:
            f.write(f"{z['name']},{z['static_mib']},{z['dynamic_mib']},{z['batch']},{z['alpha_1080ti_ms']}\n")

    jobs, keys = [], []
    counts = {"m800_l20": args.instances, "m400_l4": args.small_instances}
    for setting, n in counts.items():
        for k in range(n):
            models = make_instance(zoo, setting, k)
            path = work / f"{setting}_{k}.csv"
            write_csv(path, models)
            for method in methods:
                report = work / f"{setting}_{k}_{method}.json"
                jobs.append((command(path, setting, models, method, args.time_limit, k + 1, report), report))
                keys.append((setting, k, method))
    t0 = time.time()
    results = {s: {m: [] for m in methods} for s in counts}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for (setting, k, method), r in zip(keys, ex.map(run_one, jobs)):
            r["instance"] = k
            r["method"] = method
            results[setting][method].append(r)
            print(f"[{time.time() - t0:7.1f} s] {setting} #{k} {method:9s} {r['status']:11s} "
                  f"rate {r['rate_imbalance']} memory {r['memory_imbalance']} cpu {r['cpu_seconds']:.2f}",
                  flush=True)
    example = {s: " ".join(os.path.relpath(c, ROOT) if os.path.isabs(c) else c
                           for c in jobs[keys.index((s, 0, methods[0]))][0]) for s in counts if counts[s]}
    doc = {
        "time_limit_cpu_s": args.time_limit,
        "mean_rate": MEAN_RATE,
        "settings": {s: dict(SETTINGS[s], instances=counts[s]) for s in counts},
        "command": "nice /usr/bin/python3 bench/experiments/partition_eval.py " + " ".join(sys.argv[1:]),
        "example_solve": example,
        "results": results,
    }
    (OUT / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT / 'results.json'} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
