#!/usr/bin/python3
"""A/B of two `symphony` binaries under the cluster's gRPC flood, beside an
artificial CPU load (bench/results/overload.md, "The cluster").

  bench/cluster/flood_ab.py --a BIN --b BIN [--busy 2] [--rounds 3] [--json out.json]

Each round starts, for A then B, overload_bench.py's cluster (a scheduler, one
backend with one emulated GPU, one protocol frontend; the device-bound model,
about 1600 r/s) and floods its gRPC endpoint with `symphony load` at 64, 2048
and 4096 connections, 3 s each, while --busy Python busy loops run at nice 0.
Prints one JSON line per point (goodput, ok, drops by reason, load average)
and whether the scheduler capped a delay. Every run is bounded.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import overload_bench as ob  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="the first symphony binary")
    ap.add_argument("--b", required=True, help="the second symphony binary")
    ap.add_argument("--busy", type=int, default=2, help="busy loops beside the cluster")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write every point here")
    a = ap.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    points = []
    try:
        for r in range(a.rounds):
            for name, binary in (("a", a.a), ("b", a.b)):
                run = types.SimpleNamespace(symphony=binary, seconds=3)
                with tempfile.TemporaryDirectory(prefix="flood-ab-") as tmp:
                    c = ob.Cluster(run, tmp, frontend_admission=True)
                    try:
                        for conc in (64, 2048, 4096):
                            p = ob.load(run, tmp, f"grpc://{c.ports['grpc']}", concurrency=conc)
                            p.update(binary=name, round=r, concurrency=conc)
                            print(json.dumps({k: p[k] for k in ("binary", "round", "concurrency", "goodput_rps",
                                                                "ok", "dropped", "errors", "loadavg",
                                                                "dropped_by_reason")}), flush=True)
                            points.append(p)
                    finally:
                        c.stop()
                        with open(os.path.join(tmp, "scheduler.log")) as f:
                            print("  scheduler:", [line.strip() for line in f if "capped" in line][:3], flush=True)
    finally:
        for p in burners:
            p.kill()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(points, f, indent=1)


if __name__ == "__main__":
    main()
