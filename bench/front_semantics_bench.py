#!/usr/bin/env python3
"""Real clients' semantics on `symphony serve` (issue 36), over HTTP on loopback.

  /usr/bin/python3 bench/front_semantics_bench.py [--runs 5] [--json FILE]
      [--part semantics|budgets|closed]

A CPU TorchScript model (tests' linear.pt, float32[4], SLO 200 ms, max_batch 8,
policy deferred), a fresh `serve` process per run:

1. the first request after start, against the steady state (requests 2..);
2. lone requests (one at a time, 0.3 s apart) with no budget, a 1 s and a 10 s
   budget (the `timeout` parameter): a generous budget must add no waiting;
3. the same sample rate sent as requests of 1 sample and of 8 samples
   (open loop, paced): samples/s answered and p99 latency;
4. under load (open loop), half the requests drawn at random carry a 10 s
   budget: both halves must see the same latency distribution (--budgets);
5. closed loop, requests of 1 against 8 samples, alternated over rounds:
   samples/s and latency (--closed).

Needs build/release (symphony and tests/models/linear.pt).
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build/release/symphony")
MODEL = os.path.join(ROOT, "build/release/tests/models/linear.pt")


def start(d):
    cfg = os.path.join(d, "serve.yaml")
    with open(cfg, "w") as f:
        f.write("devices: cpu\npolicy: deferred\nprofiling: {max_batch: 8, repeats: 5}\n"
                "models:\n  - {name: linear, path: %s/linear.pt, input: \"float32[4]\", slo_ms: 200, max_batch: 8}\n"
                % d)
    ports = os.path.join(d, "ports.json")
    if os.path.exists(ports):
        os.remove(ports)
    p = subprocess.Popen([CLI, "serve", cfg, "--http", "127.0.0.1:0", "--port-file", ports, "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "serve.log"), "a"))
    t0 = time.monotonic()
    while not os.path.exists(ports):
        if p.poll() is not None or time.monotonic() - t0 > 300:
            raise RuntimeError("serve did not start; see " + os.path.join(d, "serve.log"))
        time.sleep(0.05)
    time.sleep(0.05)
    with open(ports) as f:
        host, port = json.load(f)["http"].rsplit(":", 1)
    return p, host, int(port)


def body(k, timeout_us=None):
    shape = [k, 4]
    b = {"inputs": [{"name": "input", "datatype": "FP32", "shape": shape, "data": [0.5] * (4 * k)}]}
    if timeout_us:
        b["parameters"] = {"timeout": timeout_us}
    return json.dumps(b).encode()


def infer(conn, payload):
    t0 = time.monotonic()
    conn.request("POST", "/v2/models/linear/infer", payload, {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    if r.status != 200:
        raise RuntimeError("HTTP %d" % r.status)
    return (time.monotonic() - t0) * 1000


def quantiles(xs):
    xs = sorted(xs)
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50_ms": xs[len(xs) // 2], "p90_ms": xs[int(len(xs) * 0.9)],
            "p99_ms": xs[min(len(xs) - 1, int(len(xs) * 0.99))], "max_ms": xs[-1]}


def paced(host, port, k, samples_per_s, seconds, clients=8, budget_of=None):
    """Open loop: requests of k samples at samples_per_s / k per second.
    budget_of(i): the `timeout` (us) of request i, or None; the answer keeps
    each budget's latencies apart (key "by_budget")."""
    rate = samples_per_s / k
    n = int(rate * seconds)
    lat, lock, t0 = [], threading.Lock(), time.monotonic() + 0.2
    by_budget = {}
    failures = [0]

    def worker(w):
        conn = http.client.HTTPConnection(host, port, timeout=30)
        for i in range(w, n, clients):
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            budget = budget_of(i) if budget_of else None
            try:
                ms = infer(conn, body(k, budget))
                with lock:
                    lat.append(ms)
                    by_budget.setdefault(str(budget), []).append(ms)
            except Exception:
                failures[0] += 1
                conn = http.client.HTTPConnection(host, port, timeout=30)
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    span = time.monotonic() - t0
    lat.sort()
    return {"k": k, "requests": n, "answered": len(lat), "failed": failures[0],
            "samples_per_s": len(lat) * k / span, "p50_ms": lat[len(lat) // 2],
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
            "by_budget": {b: quantiles(xs) for b, xs in by_budget.items()}}


def closed(host, port, k, clients, seconds):
    """Closed loop: `clients` connections each send requests of k samples back to back."""
    lat, lock, failures = [], threading.Lock(), [0]
    t0 = time.monotonic()
    end = t0 + seconds

    def worker():
        conn = http.client.HTTPConnection(host, port, timeout=30)
        while time.monotonic() < end:
            try:
                ms = infer(conn, body(k))
                with lock:
                    lat.append(ms)
            except Exception:
                failures[0] += 1
                conn = http.client.HTTPConnection(host, port, timeout=30)
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    span = time.monotonic() - t0
    rec = {"k": k, "clients": clients, "requests": len(lat), "failed": failures[0],
           "samples_per_s": len(lat) * k / span}
    rec.update(quantiles(lat))
    return rec


def on_fresh_servers(args, d, measure):
    """measure(host, port, run) on a fresh, warmed server per run; its answers, in order."""
    runs = []
    for run in range(args.runs):
        p, host, port = start(d)
        try:
            conn = http.client.HTTPConnection(host, port, timeout=30)
            for _ in range(20):  # past the first request and the warm-up of the connection
                infer(conn, body(1))
            runs.append(measure(host, port, run))
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)
    return runs


def budgets_part(args, d):
    """Part 4: each fresh server under one open-loop load, half the requests with a 10 s budget."""
    def measure(host, port, run):
        rng = random.Random(1000 + run)
        draws = [rng.random() < 0.5 for _ in range(int(args.rate * args.seconds) + 1)]
        rec = paced(host, port, 1, args.rate, args.seconds, budget_of=lambda i: 10_000_000 if draws[i] else None)
        g = rec["by_budget"]
        print("run %d: %d requests, %d failed; no budget p50 %.1f p99 %.1f ms; 10 s budget p50 %.1f p99 %.1f ms"
              % (run + 1, rec["requests"], rec["failed"], g["None"]["p50_ms"], g["None"]["p99_ms"],
                 g["10000000"]["p50_ms"], g["10000000"]["p99_ms"]), flush=True)
        return rec
    runs = on_fresh_servers(args, d, measure)
    print("\n| budget | requests | p50 (ms) | p90 (ms) | p99 (ms) |\n|---|---:|---:|---:|---:|")
    for key, name in (("None", "none"), ("10000000", "10 s")):
        def spread(q):
            xs = [r["by_budget"][key][q] for r in runs]
            return "%.1f–%.1f" % (min(xs), max(xs))
        n = sum(r["by_budget"][key]["n"] for r in runs)
        print("| %s | %d | %s | %s | %s |" % (name, n, spread("p50_ms"), spread("p90_ms"), spread("p99_ms")))
    print("\nper run, p99 with a 10 s budget minus p99 without (ms): " + ", ".join(
        "%+.1f" % (r["by_budget"]["10000000"]["p99_ms"] - r["by_budget"]["None"]["p99_ms"]) for r in runs))
    return runs


def closed_part(args, d):
    """Part 5: closed loop, requests of 1 and of 8 samples alternated on one server per run."""
    def measure(host, port, run):
        rounds = []
        for _ in range(args.rounds):
            for k in (1, 8):
                r = closed(host, port, k, args.clients, args.seconds)
                rounds.append(r)
                print("run %d: k=%d %.0f samples/s, p50 %.1f p99 %.1f ms, %d failed"
                      % (run + 1, k, r["samples_per_s"], r["p50_ms"], r["p99_ms"], r["failed"]), flush=True)
        return rounds
    runs = on_fresh_servers(args, d, measure)
    print("\n| samples per request | rounds | samples/s | p50 (ms) | p99 (ms) | failed |\n|---:|---:|---:|---:|---:|---:|")
    for k in (1, 8):
        rs = [r for rounds in runs for r in rounds if r["k"] == k]
        def spread(q, f="%.1f"):
            xs = [r[q] for r in rs]
            return (f + "–" + f) % (min(xs), max(xs))
        print("| %d | %d | %s | %s | %s | %d |" % (k, len(rs), spread("samples_per_s", "%.0f"), spread("p50_ms"),
                                                spread("p99_ms"), sum(r["failed"] for r in rs)))
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lone", type=int, default=15, help="lone requests per budget and run")
    ap.add_argument("--rate", type=float, default=400, help="samples/s in part 3")
    ap.add_argument("--seconds", type=float, default=8, help="seconds per load in part 3")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--part", choices=("semantics", "budgets", "closed"), default="semantics",
                    help="semantics: parts 1-3; budgets: part 4 (use --rate 200 --seconds 20); "
                         "closed: part 5")
    ap.add_argument("--clients", type=int, default=8, help="closed-loop connections in part 5")
    ap.add_argument("--rounds", type=int, default=3, help="k=1 / k=8 rounds per run in part 5")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="symphony-semantics-")
    shutil.copy(MODEL, os.path.join(d, "linear.pt"))
    if args.part != "semantics":
        runs = (budgets_part if args.part == "budgets" else closed_part)(args, d)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"runs": runs, "args": vars(args)}, f, indent=1)
        shutil.rmtree(d, ignore_errors=True)
        return 0
    runs = []
    for run in range(args.runs):
        p, host, port = start(d)
        try:
            conn = http.client.HTTPConnection(host, port, timeout=30)
            first = infer(conn, body(1))
            lone = {}
            for name, t in (("none", None), ("1s", 1_000_000), ("10s", 10_000_000)):
                xs = []
                for _ in range(args.lone):
                    time.sleep(0.3)
                    xs.append(infer(conn, body(1, t)))
                lone[name] = {"p50_ms": statistics.median(xs), "max_ms": max(xs)}
            steady = lone["none"]["p50_ms"]
            rec = {"first_ms": first, "steady_p50_ms": steady, "lone": lone}
            if run == 0:
                rec["batched"] = [paced(host, port, k, args.rate, args.seconds) for k in (1, 8)]
            runs.append(rec)
            print("run %d: first %.1f ms, steady %.1f ms; lone p50 none %.1f, 1 s %.1f, 10 s %.1f ms"
                  % (run + 1, first, steady, lone["none"]["p50_ms"], lone["1s"]["p50_ms"], lone["10s"]["p50_ms"]),
                  flush=True)
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=60)

    def spread(f):
        xs = [f(r) for r in runs]
        return "%.1f–%.1f" % (min(xs), max(xs))
    print("\n| lone request, budget | p50 (ms, min–max over %d runs) | max (ms) |" % len(runs))
    print("|---|---:|---:|")
    for name in ("none", "1s", "10s"):
        print("| %s | %s | %s |" % (name, spread(lambda r: r["lone"][name]["p50_ms"]),
                                    spread(lambda r: r["lone"][name]["max_ms"])))
    print("\n| fresh start | first request (ms) | steady p50 (ms) |\n|---|---:|---:|")
    print("| %d runs | %s | %s |" % (len(runs), spread(lambda r: r["first_ms"]), spread(lambda r: r["steady_p50_ms"])))
    print("\n| samples per request | samples/s offered | samples/s answered | p50 (ms) | p99 (ms) | failed |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b in runs[0]["batched"]:
        print("| %d | %.0f | %.0f | %.1f | %.1f | %d |" % (b["k"], args.rate, b["samples_per_s"], b["p50_ms"],
                                                        b["p99_ms"], b["failed"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "args": vars(args)}, f, indent=1)
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
