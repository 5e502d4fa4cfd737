#!/usr/bin/python3
"""admission_backlog_share against goodput as the client sees it.

The device-bound model of bench/overload_bench.py (l(b) = 0.5 ms*b + 2 ms, max
batch 16, SLO 40 ms, one emulated GPU, about 1600 r/s) on `symphony serve`
pinned to CPU 0 (or, with --on cluster, on overload_bench's cluster: a
scheduler, a backend and a protocol frontend, not pinned), `symphony load`
pinned to CPU 1 with the SLO as budget (an answer later than that from its
scheduled send is late, whatever the server says), through overload_bench's
Serve, Cluster and load. For each share (and each --overload-hold asked for):
open loop at 1x, 2x and 10x and closed loops of 64 to 4096 connections over
HTTP, the same over gRPC (its floods to 512 connections, or --grpc-to); one
run per point.

  /usr/bin/python3 bench/experiments/backlog_share.py --out DIR [--shares 1 0.5 0.3] [--on cluster] \
      [--overload-holds 0.5 0] [--protocols http grpc] [--grpc-to 4096]

Writes DIR/backlog_share.json and prints a line per point. Bounded as
overload_bench's points are (serve's start 30 s, each load 4 s plus its drain).
"""
import argparse
import json
import os
import re
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import overload_bench as ob  # noqa: E402

CAPACITY = 1600.0
FLOODS = (64, 256, 512, 1024, 2048, 4096)


def points(protocols, grpc_to):
    return ([("http", "open", m) for m in (1, 2, 10) if "http" in protocols]
            + [("http", "closed", c) for c in FLOODS if "http" in protocols]
            + [("grpc", "open", m) for m in (1, 2, 10) if "grpc" in protocols]
            + [("grpc", "closed", c) for c in FLOODS if "grpc" in protocols and c <= grpc_to])


def held(s, proto):
    """symphony_front_<proto>_refusals_held_total of the server `s` (None where it has no /metrics)."""
    url = getattr(s, "metrics_url", None)
    if not url:
        return None
    text = urllib.request.urlopen(url, timeout=30).read().decode()
    m = re.search(rf"^symphony_front_{proto}_refusals_held_total (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--shares", type=float, nargs="+", default=[1, 0.5, 0.3])
    ap.add_argument("--on", choices=["serve", "cluster"], default="serve")
    ap.add_argument("--overload-holds", type=float, nargs="+", default=[None],
                    help="the front's --overload-hold values to run each share with (default: its default)")
    ap.add_argument("--protocols", nargs="+", choices=["http", "grpc"], default=["http", "grpc"])
    ap.add_argument("--grpc-budget", default="deadline", choices=["deadline", "timeout"],
                    help="how the gRPC client sends the budget (symphony load --grpc-budget)")
    ap.add_argument("--grpc-to", type=int, choices=FLOODS, default=512,
                    help="the largest gRPC flood, in connections (default 512)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for share in args.shares:
        for hold in args.overload_holds:
            a = ob.point_options(args.build_dir, backlog_share=share, overload_hold=hold,
                                 grpc_budget=args.grpc_budget)
            s = ob.Serve(a, args.out, "device-bound", "on") if args.on == "serve" else ob.Cluster(a, args.out)
            named = "" if hold is None else f" hold {hold:g}"
            try:
                for proto, loop, x in points(args.protocols, args.grpc_to):
                    url = f"{proto}://{s.ports[proto]}"
                    before = held(s, proto)
                    r = (ob.load(a, args.out, url, rate=x * CAPACITY) if loop == "open"
                         else ob.load(a, args.out, url, concurrency=x))
                    after = held(s, proto)
                    r.update(on=args.on, share=share, overload_hold=hold, protocol=proto, loop=loop, x=x,
                             refusals_held=None if before is None or after is None else after - before)
                    rows.append(r)
                    print(f"{args.on} share {share:g}{named} {proto} {loop} {x}: goodput {r['goodput_rps']:.0f} r/s, "
                          f"p50 {r['p50_ms']:.1f} p99 {r['p99_ms']:.1f} ms, late {r['late']} "
                          f"(ok at the server {r['late_server_ok']}), dropped {r['dropped_by_reason']}, "
                          f"refusals held {r['refusals_held']}", flush=True)
            finally:
                s.stop()
    with open(os.path.join(args.out, "backlog_share.json"), "w") as f:
        json.dump({"command": " ".join(["/usr/bin/python3", "bench/experiments/backlog_share.py"] + sys.argv[1:]),
                   "points": rows}, f, indent=1)


if __name__ == "__main__":
    main()
