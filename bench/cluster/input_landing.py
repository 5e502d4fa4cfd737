#!/usr/bin/python3
"""The protocol frontend's CPU per request with inputs decoded into the
registered pool (issue 53) against inputs copied there at submit.

Runs a scheduler, one emulated backend and, round after round, a fresh
`symphony frontend` of each binary in turn (the order alternating), each
driven by `symphony load` at the same rate with 588 KiB inputs
(float32[150528]: a 3x224x224 image). Prints each run's frontend CPU
(user + system, from /proc) per request and the paired differences.

  bench/cluster/input_landing.py --in-place build/release/symphony --copied /tmp/symphony-copied

`--copied` is a binary built from the same tree with
ClusterService::input_landing returning nullptr (every request then takes
the copying path; the report's `inputs` says which path ran)."""
import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request

p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
p.add_argument("--in-place", required=True, help="symphony binary that decodes into the pool")
p.add_argument("--copied", required=True, help="symphony binary whose input_landing returns nullptr")
p.add_argument("--rounds", type=int, default=6)
p.add_argument("--rate", default="150")
p.add_argument("--duration", default="8")
p.add_argument("--http-format", default="binary")
a = p.parse_args()
bins = {"in place": a.in_place, "copied": a.copied}
d = tempfile.mkdtemp(prefix="symphony-input-landing-")
cfg = os.path.join(d, "cluster.yaml")
with open(cfg, "w") as f:
    f.write("""gpus: 1
policy: deferred
workload: {rate: 10}
models:
  - {name: big, alpha_ms: 0.05, beta_ms: 1, slo_ms: 300, max_batch: 16}
cluster:
  token: "bench"
  max_input_bytes: 1000000
  models:
    big: {input: "float32[150528]", output: "uint8[16]"}
""")


def start(args, log):
    return subprocess.Popen(args, stdout=open(os.path.join(d, log), "w"), stderr=subprocess.STDOUT)


def wait(pred, what, timeout=60):
    end = time.time() + timeout
    while not pred():
        if time.time() > end:
            raise SystemExit("timed out waiting for " + what + " (logs in " + d + ")")
        time.sleep(0.05)


def cpu_seconds(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def ready(url):
    try:
        return urllib.request.urlopen(url + "/v2/health/ready", timeout=2).status == 200
    except OSError:
        return False


port_file = os.path.join(d, "scheduler.port")
procs = [start([a.in_place, "scheduler", "--listen", "127.0.0.1:0", "--config", cfg, "--port-file", port_file],
               "scheduler.log")]
try:
    wait(lambda: os.path.exists(port_file) and open(port_file).read().strip(), "the scheduler")
    addr = "127.0.0.1:" + open(port_file).read().strip()
    procs.append(start([a.in_place, "backend", "--scheduler", addr, "--devices", "emulated:1", "--config", cfg,
                        "--name", "b1"], "b1.log"))
    time.sleep(2)
    us = {k: [] for k in bins}
    for r in range(a.rounds):
        for kind in (("in place", "copied") if r % 2 == 0 else ("copied", "in place")):
            tag = "%d-%s" % (r, kind.replace(" ", "-"))
            ports, report = os.path.join(d, tag + ".ports"), os.path.join(d, tag + ".json")
            fe = start([bins[kind], "frontend", "--config", cfg, "--scheduler", addr, "--http", "127.0.0.1:0",
                        "--port-file", ports, "--json", report, "--max-inflight", "256", "--quiet"], tag + ".log")
            wait(lambda: os.path.exists(ports) and os.path.getsize(ports) > 0, "the frontend's ports")
            url = "http://" + json.load(open(ports))["http"]
            wait(lambda: ready(url), "the frontend to be ready")
            c0 = cpu_seconds(fe.pid)
            subprocess.run([a.in_place, "load", "--url", url, "--model", "big", "--rate", a.rate, "--duration",
                            a.duration, "--warmup", "1", "--http-format", a.http_format, "--quiet", "--json",
                            os.path.join(d, tag + "-load.json")], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)
            c1 = cpu_seconds(fe.pid)
            fe.send_signal(signal.SIGINT)
            fe.wait(timeout=60)
            rep = json.load(open(report))
            n = rep["models"]["big"]["sent"]
            us[kind].append((c1 - c0) / n * 1e6)
            print("round %d %-8s: %d requests, frontend CPU %.2f s, %.0f us/request, inputs %s"
                  % (r, kind, n, c1 - c0, us[kind][-1], json.dumps(rep["inputs"])), flush=True)
    for kind, xs in us.items():
        print("%-8s: median %.0f us/request (min %.0f, max %.0f, %d runs)"
              % (kind, statistics.median(xs), min(xs), max(xs), len(xs)))
    diffs = sorted(c - i for c, i in zip(us["copied"], us["in place"]))
    print("copied - in place, by round: median %.0f us (min %.0f, max %.0f); in place cheaper in %d of %d"
          % (statistics.median(diffs), diffs[0], diffs[-1], sum(x > 0 for x in diffs), len(diffs)))
finally:
    for proc in reversed(procs):
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
