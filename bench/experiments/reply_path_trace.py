#!/usr/bin/python3
"""Where a served request's time goes under a closed-loop HTTP flood.

The device-bound model of bench/overload_bench.py on `symphony serve` (pinned
to CPU 0) with the front's trace on (SYMPHONY_FRONT_TRACE, trace.hpp), one
closed loop of `symphony load` per --connections value (pinned to CPU 1, the
SLO as budget), then the trace's stages of the requests served ok: from the
kernel's stamp (socket) to the write's end (since_arrival), against the 40 ms
budget the client judges them by.

  /usr/bin/python3 bench/experiments/reply_path_trace.py --out DIR [--connections 4096] [--build-dir DIR]

Writes DIR/trace.json (every transport and outcome) and DIR/reply_path_trace.json
(the client's figures per point). Bounded as overload_bench's points are.
"""
import argparse
import json
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import overload_bench as ob  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--connections", type=int, nargs="+", default=[4096])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    trace = os.path.join(args.out, "trace.json")
    os.environ["SYMPHONY_FRONT_TRACE"] = trace  # serve inherits it
    a = types.SimpleNamespace(symphony=os.path.join(args.build_dir, "symphony"), seconds=4.0, pin_server="0",
                              pin_client="1", client_budget="slo", backlog_share=1, overload_hold=None)
    s = ob.Serve(a, args.out, "device-bound", "on")
    points = []
    try:
        for c in args.connections:
            r = ob.load(a, args.out, "http://" + s.ports["http"], concurrency=c)
            points.append(dict(r, connections=c))
            print(f"{c} connections: {r['goodput_rps']:.0f} good r/s, served p99 {r['p99_ms']:.1f} ms, "
                  f"late {r['late']} (ok at the server {r['late_server_ok']})", flush=True)
    finally:
        s.stop()
    with open(os.path.join(args.out, "reply_path_trace.json"), "w") as f:
        json.dump({"command": " ".join(sys.argv), "points": points}, f, indent=1)
    with open(trace) as f:
        t = json.load(f)
    for key in ("http ok", "http late"):
        if key not in t:
            continue
        print(f"{key}: {t[key]['requests']} requests (µs)")
        for stage, h in t[key]["stages_us"].items():
            print(f"  {stage:15} p50 {h['p50']:9.1f}  p90 {h['p90']:9.1f}  p99 {h['p99']:9.1f}")


if __name__ == "__main__":
    main()
