#!/usr/bin/python3
"""serve's admission_backlog_share against goodput as the client sees it.

The device-bound model of bench/overload_bench.py (l(b) = 0.5 ms*b + 2 ms, max
batch 16, SLO 40 ms, one emulated GPU, about 1600 r/s) on `symphony serve`
pinned to CPU 0, `symphony load` pinned to CPU 1 with a 40 ms budget (an
answer later than that from its scheduled send is late, whatever the server
says). For each share: open loop at 1x, 2x and 10x, closed loops of 64 to
1024 connections over HTTP, 64 to 512 over gRPC; one run per point.

  /usr/bin/python3 bench/experiments/backlog_share.py --out DIR [--shares 1 0.5 0.3]

Writes DIR/backlog_share.json and prints a table. Bounded: each load 5 s plus
its drain (at most 60 s), serve's start 30 s.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = '{name: m, input: "float32[4]", slo_ms: 40, max_batch: 16, alpha_ms: 0.5, beta_ms: 2}'
CAPACITY = 1600.0
POINTS = ([("http", "open", m) for m in (1, 2, 10)] + [("http", "closed", c) for c in (64, 256, 512, 1024)]
          + [("grpc", "closed", c) for c in (64, 256, 512)])


def serve(a, share, work):
    cfg = os.path.join(work, "serve.yaml")
    with open(cfg, "w") as f:
        f.write(f"devices: emulated:1\nadmission: true\nadmission_backlog_share: {share:g}\nmodels:\n  - {MODEL}\n")
    pf = os.path.join(work, "ports.json")
    if os.path.exists(pf):
        os.unlink(pf)
    log = open(os.path.join(work, "serve.log"), "w")
    p = subprocess.Popen(["taskset", "-c", "0", a.symphony, "serve", cfg, "--http", "127.0.0.1:0", "--grpc",
                          "127.0.0.1:0", "--port-file", pf, "--quiet"], stdout=log, stderr=subprocess.STDOUT)
    until = time.time() + 30
    while not os.path.exists(pf):
        if p.poll() is not None or time.time() > until:
            p.kill()
            sys.exit("serve did not start; see " + log.name)
        time.sleep(0.05)
    time.sleep(0.2)
    with open(pf) as f:
        return p, json.load(f)


def load(a, url, loop, x, work):
    out = os.path.join(work, "load.json")
    cmd = ["taskset", "-c", "1", a.symphony, "load", "--url", url, "--model", "m", "--duration", "5", "--warmup",
           "1", "--budget", "40", "--drain", "5", "--quiet", "--json", out]
    cmd += ["--rate", f"{x * CAPACITY:.0f}"] if loop == "open" else ["--concurrency", str(x), "--connections", str(x)]
    subprocess.run(cmd, check=True, timeout=60, stdout=subprocess.DEVNULL)
    with open(out) as f:
        j = json.load(f)
    return {"goodput_rps": j["goodput_rps"], "p50_ms": j["latency_ms"]["p50"], "p99_ms": j["latency_ms"]["p99"],
            "sent": j["sent"], "ok": j["ok"], "late": j["late"], "late_server_ok": j["client"]["late_server_ok"],
            "dropped_by_reason": j["dropped_by_reason"], "client_sent_late": j["client"]["sent_late"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--shares", type=float, nargs="+", default=[1, 0.5, 0.3])
    a = ap.parse_args()
    a.symphony = os.path.join(a.build_dir, "symphony")
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for share in a.shares:
        p, ports = serve(a, share, a.out)
        try:
            for proto, loop, x in POINTS:
                r = load(a, f"{proto}://{ports[proto]}", loop, x, a.out)
                r.update(share=share, protocol=proto, loop=loop, x=x)
                rows.append(r)
                print(f"share {share:g} {proto} {loop} {x}: goodput {r['goodput_rps']:.0f} r/s, p50 {r['p50_ms']:.1f} "
                      f"p99 {r['p99_ms']:.1f} ms, late {r['late']} (ok at the server {r['late_server_ok']}), "
                      f"dropped {r['dropped_by_reason']}", flush=True)
        finally:
            p.terminate()
            p.wait(timeout=30)
    with open(os.path.join(a.out, "backlog_share.json"), "w") as f:
        json.dump({"command": " ".join(["/usr/bin/python3", "bench/experiments/backlog_share.py"] + sys.argv[1:]),
                   "points": rows}, f, indent=1)


if __name__ == "__main__":
    main()
