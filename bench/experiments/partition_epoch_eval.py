#!/usr/bin/python3
"""Re-partitioning at an epoch under a disruption bound (appendix
"Disruption Minimization"): how much balance each method recovers for a given
budget of moves when the rates have drifted since the current assignment.

Per instance (800 models, 20 sub-clusters, the zoo and caps of
partition_eval.py): the current assignment is greedy's partition of the old
rates; then every rate is multiplied by exp(N(0, 0.5)) (drift) and 10 new
models arrive. Each method re-partitions against the current assignment with
unit move costs (a move costs 2, loading a new model 1) and C_max in
{10, 30, 90, unlimited}: 10 only loads the new models, 30 adds up to 10 moves,
90 up to 40. Same CPU-time limit for every method.

Writes bench/results/partition/epoch.json; bench/plots/partition_cdf.py adds
its table and plot.

Usage: nice /usr/bin/python3 bench/experiments/partition_epoch_eval.py [--instances 5] [--time-limit 10]
"""
import argparse
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import partition_eval as pe  # noqa: E402

BUDGETS = [10, 30, 90, None]  # None: unlimited
METHODS = ["milp", "random", "greedy", "milp_warm"]
NEW_MODELS = 10
DRIFT_SIGMA = 0.5


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=5)
    ap.add_argument("--time-limit", type=float, default=10)
    ap.add_argument("--work", default=str(pe.ROOT / "build" / "partition_eval"))
    args = ap.parse_args()
    if not pe.binary().exists():
        sys.exit(f"{pe.binary()} not found: build it or set SYMPHONY_BIN")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    zoo = pe.zoo_memory()
    s = pe.SETTINGS["m800_l20"]
    L = s["subclusters"]
    results = []
    t0 = time.time()
    for k in range(args.instances):
        rng = random.Random(3000 + k)
        old = pe.make_instance(zoo, "m800_l20", 100 + k)
        old_csv = work / f"epoch_{k}_old.csv"
        pe.write_csv(old_csv, old)
        current = work / f"epoch_{k}_current.json"
        run(pe.command(old_csv, "m800_l20", old, "greedy", args.time_limit, 1, current))
        new = [dict(m, rate=round(m["rate"] * math.exp(rng.gauss(0, DRIFT_SIGMA)), 3)) for m in old]
        for v in range(NEW_MODELS):
            z = zoo[rng.randrange(len(zoo))]
            new.append(dict(name=f"{z['name']}#new{v}", rate=round(rng.expovariate(1 / pe.MEAN_RATE), 3),
                            static_mib=z["static_mib"], dynamic_mib=z["dynamic_mib"]))
        new_csv = work / f"epoch_{k}_new.csv"
        pe.write_csv(new_csv, new)
        for budget in BUDGETS:
            for method in METHODS:
                report = work / f"epoch_{k}_{budget}_{method}.json"
                cmd = pe.command(new_csv, "m800_l20", new, method, args.time_limit, k + 1, report)
                cmd += ["--current", str(current)]
                if budget is not None:
                    cmd += ["--max-disruption", str(budget)]
                run(cmd)
                r = json.loads(report.read_text())
                row = dict(instance=k, budget=budget, method=method, status=r["status"],
                           objective=r.get("objective"), cpu_seconds=r["cpu_seconds"],
                           rate_imbalance=r["imbalance"]["rate"] if "imbalance" in r else None,
                           memory_imbalance=r["imbalance"]["memory"] if "imbalance" in r else None,
                           moves=len(r["disruption"]["moves"]) if "disruption" in r else None,
                           disruption=r["disruption"]["cost"] if "disruption" in r else None)
                results.append(row)
                print(f"[{time.time() - t0:7.1f} s] #{k} C_max {str(budget):>4s} {method:6s} {row['status']:11s} "
                      f"rate {row['rate_imbalance']} memory {row['memory_imbalance']} moves {row['moves']} "
                      f"cost {row['disruption']} cpu {row['cpu_seconds']:.2f}", flush=True)
    doc = {"time_limit_cpu_s": args.time_limit, "drift_sigma": DRIFT_SIGMA, "new_models": NEW_MODELS,
           "budgets": BUDGETS, "instances": args.instances,
           "command": "nice /usr/bin/python3 bench/experiments/partition_epoch_eval.py " + " ".join(sys.argv[1:]),
           "results": results}
    (pe.OUT / "epoch.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {pe.OUT / 'epoch.json'} in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
