#!/usr/bin/env python3
"""Loading a model while another serves (issue 37), over HTTP on loopback.

  /usr/bin/python3 bench/repository_load_bench.py [--runs 3] [--json FILE] [--log FILE]

`symphony serve examples/demo_repository.yaml --model-repository DIR
--model-control-mode explicit --load-model squeezenet1_1` (the demo's server
settings: devices auto, policy deferred), DIR a copy of the demo's repository
(scripts/export_demo_models.py) holding squeezenet1_1 and resnet18. One serve
process; per run, while squeezenet1_1 gets a steady open-loop load:

1. resnet18's profile removed (not cached): `POST /v2/repository/models/resnet18/load`
   (read, load, warm-up, profile), then unload;
2. the same with the profile it wrote (cached): load, then unload.

For each load: how long the POST took, and squeezenet1_1's latency p50/p99 and
bad requests (not 200, or later than its 60 ms SLO) among the requests sent in
the `--window` seconds before the load, during it, and in the window after.

Needs build/release/symphony and data/models (scripts/demo.sh, or
scripts/export_demo_models.py data/models).
"""
import argparse
import glob
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(ROOT, "build/release/symphony")
DEMO_REPO = os.path.join(ROOT, "data/models/repository")
SERVE_CONFIG = os.path.join(ROOT, "examples/demo_repository.yaml")
STEADY, LOADED = "squeezenet1_1", "resnet18"
SLO_MS = 60.0  # squeezenet1_1's, in its config.pbtxt


def make_repository(d):
    repo = os.path.join(d, "repository")
    for m in (STEADY, LOADED):
        os.makedirs(os.path.join(repo, m, "1"))
        shutil.copy(os.path.join(DEMO_REPO, m, "config.pbtxt"), os.path.join(repo, m, "config.pbtxt"))
        src = os.path.join(DEMO_REPO, m, "1", "model.pt")
        try:
            os.link(src, os.path.join(repo, m, "1", "model.pt"))
        except OSError:
            shutil.copy(src, os.path.join(repo, m, "1", "model.pt"))
        for p in glob.glob(os.path.join(DEMO_REPO, m, "1", "*.profile.yaml")):  # the steady model's, if any
            shutil.copy(p, os.path.join(repo, m, "1"))
    return repo


def start(d, repo):
    ports = os.path.join(d, "ports.json")
    p = subprocess.Popen([CLI, "serve", SERVE_CONFIG, "--model-repository", repo, "--model-control-mode", "explicit",
                          "--load-model", STEADY, "--http", "127.0.0.1:0", "--port-file", ports, "--quiet"],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "serve.log"), "a"))
    t0 = time.monotonic()
    while not os.path.exists(ports):
        if p.poll() is not None or time.monotonic() - t0 > 900:
            raise RuntimeError("serve did not start; see " + os.path.join(d, "serve.log"))
        time.sleep(0.05)
    time.sleep(0.05)
    with open(ports) as f:
        host, port = json.load(f)["http"].rsplit(":", 1)
    return p, host, int(port)


def post(host, port, path):
    conn = http.client.HTTPConnection(host, port, timeout=900)
    t0 = time.monotonic()
    conn.request("POST", path, b"", {"Content-Type": "application/json"})
    r = conn.getresponse()
    text = r.read()
    if r.status != 200:
        raise RuntimeError("POST %s: HTTP %d %s" % (path, r.status, text[:300]))
    return time.monotonic() - t0


class SteadyLoad:
    """Open loop on the steady model: `rate` requests/s, evenly spaced, from
    `clients` connections; records (sent at, latency ms, HTTP status)."""

    def __init__(self, host, port, rate, clients=8):
        self.host, self.port, self.rate, self.clients = host, port, rate, clients
        self.records, self.lock, self.stop = [], threading.Lock(), threading.Event()
        x = [0.5] * (3 * 64 * 64)
        self.body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 64, 64],
                                            "data": x}]}).encode()
        self.threads = [threading.Thread(target=self.worker, args=(w,)) for w in range(clients)]
        self.t0 = time.monotonic() + 0.2
        for t in self.threads:
            t.start()

    def worker(self, w):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        i = w
        while not self.stop.is_set():
            at = self.t0 + i / self.rate
            i += self.clients
            delay = at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent = time.monotonic()
            try:
                conn.request("POST", "/v2/models/%s/infer" % STEADY, self.body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                status = r.status
            except Exception:
                status = 0
                conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            with self.lock:
                self.records.append((sent, (time.monotonic() - sent) * 1000, status))

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def window(self, a, b):
        with self.lock:
            xs = [r for r in self.records if a <= r[0] < b]
        lat = sorted(ms for _, ms, s in xs if s == 200)
        bad = sum(1 for _, ms, s in xs if s != 200 or ms > SLO_MS)
        if not lat:
            return {"requests": len(xs), "bad": bad, "p50_ms": float("nan"), "p99_ms": float("nan")}
        return {"requests": len(xs), "bad": bad, "p50_ms": lat[len(lat) // 2],
                "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


def measure(host, port, load, window, cached, repo):
    if not cached:
        for p in glob.glob(os.path.join(repo, LOADED, "1", "*.profile.yaml")):
            os.remove(p)
    time.sleep(window)
    a = time.monotonic()
    seconds = post(host, port, "/v2/repository/models/%s/load" % LOADED)
    b = time.monotonic()
    time.sleep(window)
    rec = {"cached": cached, "load_s": seconds, "before": load.window(a - window, a), "during": load.window(a, b),
           "after": load.window(b, b + window)}
    rec["unload_s"] = post(host, port, "/v2/repository/models/%s/unload" % LOADED)
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=100, help="requests/s to the steady model")
    ap.add_argument("--window", type=float, default=5, help="seconds measured before and after each load")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--log", help="copy the server's log here (how the loads' runs were leased)")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(DEMO_REPO, LOADED, "1", "model.pt")):
        sys.exit("no %s: run scripts/export_demo_models.py data/models first" % DEMO_REPO)
    d = tempfile.mkdtemp(prefix="symphony-repoload-")
    repo = make_repository(d)
    p, host, port = start(d, repo)
    runs = []
    try:
        load = SteadyLoad(host, port, args.rate)
        try:
            for run in range(args.runs):
                for cached in (False, True):
                    rec = measure(host, port, load, args.window, cached, repo)
                    rec["run"] = run + 1
                    runs.append(rec)
                    print("run %d, profile %s: load %.2f s, unload %.2f s; %s p99 before %.1f, during %.1f, after "
                          "%.1f ms; bad %d/%d, %d/%d, %d/%d"
                          % (run + 1, "cached" if cached else "not cached", rec["load_s"], rec["unload_s"], STEADY,
                             rec["before"]["p99_ms"], rec["during"]["p99_ms"], rec["after"]["p99_ms"],
                             rec["before"]["bad"], rec["before"]["requests"], rec["during"]["bad"],
                             rec["during"]["requests"], rec["after"]["bad"], rec["after"]["requests"]), flush=True)
        finally:
            load.close()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=120)

    def spread(xs, fmt="%.1f"):
        return (fmt + "–" + fmt) % (min(xs), max(xs))
    print("\n| %s's profile | load (s, min–max over %d runs) | unload (s) |" % (LOADED, args.runs))
    print("|---|---:|---:|")
    for cached in (False, True):
        rs = [r for r in runs if r["cached"] == cached]
        print("| %s | %s | %s |" % ("cached" if cached else "not cached", spread([r["load_s"] for r in rs], "%.2f"),
                                    spread([r["unload_s"] for r in rs], "%.2f")))
    print("\n| %s at %.0f req/s (SLO %.0f ms), %s's profile | window | p50 (ms) | p99 (ms) | bad / sent |"
          % (STEADY, args.rate, SLO_MS, LOADED))
    print("|---|---|---:|---:|---:|")
    for cached in (False, True):
        rs = [r for r in runs if r["cached"] == cached]
        for w in ("before", "during", "after"):
            print("| %s | %s | %s | %s | %d / %d |"
                  % ("cached" if cached else "not cached", w, spread([r[w]["p50_ms"] for r in rs]),
                     spread([r[w]["p99_ms"] for r in rs]), sum(r[w]["bad"] for r in rs),
                     sum(r[w]["requests"] for r in rs)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "args": vars(args)}, f, indent=1)
    if args.log:
        shutil.copy(os.path.join(d, "serve.log"), args.log)
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
