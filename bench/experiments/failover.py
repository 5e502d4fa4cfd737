#!/usr/bin/env python3
"""Losing the scheduler, measured: hot-spare schedulers against one scheduler.

The cluster demo's setup (two backends with 4 emulated GPUs each, the
ResNet50 profile at SLO 25 ms: examples/cluster/cluster.yaml, UCX over TCP on
loopback), one load generator at 0.8 x the goodput measured in
bench/results/cluster.md (5200 r/s -> 4160 r/s). For each mode, KILLS times:

  a load generator runs for a window of seconds (--windows: 2 with spares, 4
  with one scheduler, whose gap is longer); 1 s in, the primary is killed
  with SIGKILL; then
    spares: it is started again RESTART_S later, as a spare (2 schedulers
            listed in cluster.schedulers);
    single: it is started again RESTART_S later on the same port (one
            scheduler; what a supervisor restarting it does).
  Recorded per kill: the gap from the kill to the first batch the next
  primary dispatched (the scheduler's report: when it became primary and its
  first dispatch after that, on the system clock, against the kill's time),
  and the load generator's bad requests (late + dropped + errors) and errors
  in the window around the kill (a gap longer than the rest of the window is
  recorded as such: nothing was offered after it).

A baseline of --baseline windows with no kill gives the bad requests of an
undisturbed window. Every process runs under `nice -n 19`;
every load is bounded. Results: bench/results/failover/failover.json.

  /usr/bin/python3 bench/experiments/failover.py [--kills 20] [--modes spares,single] [--windows 2,4]
"""
import argparse
import json
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from simlib import ROOT, binary, log, results_dir, save_json

NICE = ["nice", "-n", "19"]
RATE = 4160
RESTART_S = 0.5


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_for(pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


class Cluster:
    def __init__(self, work, n_schedulers):
        self.work = Path(work)
        self.addrs = ["127.0.0.1:%d" % free_port() for _ in range(n_schedulers)]
        cfg = yaml.safe_load((ROOT / "examples" / "cluster" / "cluster.yaml").read_text())
        if n_schedulers > 1:
            cfg["cluster"]["schedulers"] = self.addrs
        self.cfg = self.work / "cluster.yaml"
        self.cfg.write_text(yaml.safe_dump(cfg))
        self.scheds = [None] * n_schedulers
        self.starts = [0] * n_schedulers
        self.backends = []

    def start_scheduler(self, i):
        self.starts[i] += 1
        tag = "s%d-%d" % (i, self.starts[i])
        self.scheds[i] = (subprocess.Popen(
            NICE + [str(binary()), "scheduler", "--listen", self.addrs[i], "--config", str(self.cfg),
                    "--json", str(self.work / (tag + ".json"))],
            stdout=open(self.work / (tag + ".log"), "w"), stderr=subprocess.STDOUT), tag)

    def log_of(self, i):
        return (self.work / (self.scheds[i][1] + ".log")).read_text()

    def report_of(self, i):
        return read_json(self.work / (self.scheds[i][1] + ".json"))

    def primary(self):
        """The live scheduler with the highest term (the one frontends and backends follow)."""
        best, term = None, 0
        for i, (p, tag) in enumerate(self.scheds):
            if p is None or p.poll() is not None:
                continue
            r = self.report_of(i)
            if r and r["primary"]["term"] > term and not r.get("standby", {}).get("deposed"):
                best, term = i, r["primary"]["term"]
        return best

    def start(self):
        for i in range(len(self.scheds)):
            self.start_scheduler(i)
        time.sleep(2.0)  # the election (a startup grace of one heartbeat timeout) and a first report
        for name in ("b1", "b2"):
            self.backends.append(subprocess.Popen(
                NICE + [str(binary()), "backend", "--scheduler", self.addrs[0], "--config", str(self.cfg),
                        "--devices", "emulated:4", "--name", name],
                stdout=open(self.work / (name + ".log"), "w"), stderr=subprocess.STDOUT))
        if not wait_for(lambda: self.log_of(self.primary() or 0).count(" registered ") >= 2, 30):
            raise RuntimeError("the backends did not register:\n" + self.log_of(0))

    def loadgen(self, tag, duration):
        return subprocess.Popen(
            NICE + [str(binary()), "loadgen", "--quiet", "--scheduler", self.addrs[0], "--config", str(self.cfg),
                    "--name", tag, "--rate", str(RATE), "--duration", str(duration), "--warmup", "0",
                    "--json", str(self.work / (tag + ".json"))],
            stdout=open(self.work / (tag + ".log"), "w"), stderr=subprocess.STDOUT)

    def stop(self):
        for p in self.backends + [p for p, _ in self.scheds if p]:
            if p.poll() is None:
                p.terminate()
        for p in self.backends + [p for p, _ in self.scheds if p]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def bad_of(r):
    return r["late"] + r["dropped"] + r["errors"]


def run_mode(mode, kills, baseline, window):
    work = Path(tempfile.mkdtemp(prefix="symphony-failover-%s-" % mode))
    c = Cluster(work, 2 if mode == "spares" else 1)
    c.start()
    out = {"mode": mode, "rate": RATE, "window_s": window, "kill_at_s": 1.0, "restart_s": RESTART_S,
           "baseline": [], "kills": []}
    for k in range(baseline):
        lg = c.loadgen("base%d" % k, window)
        lg.wait(60)
        r = read_json(work / ("base%d.json" % k))
        out["baseline"].append({"sent": r["sent"], "bad": bad_of(r), "errors": r["errors"]})
    for k in range(kills):
        victim = c.primary()
        tag = "lg%d" % k
        lg = c.loadgen(tag, window)
        time.sleep(1.0 + 0.05)  # 1 s into the window (the load generator starts 50 ms after its process)
        c.scheds[victim][0].kill()
        killed_ms = time.time() * 1000
        c.scheds[victim][0].wait()
        time.sleep(RESTART_S)
        c.start_scheduler(victim)
        lg.wait(60)
        # The new primary's report (rewritten every second) once it has dispatched.
        gap, new = None, None

        def dispatched():
            nonlocal gap, new
            new = c.primary()
            rep = c.report_of(new) if new is not None else None
            if rep and rep["primary"]["since_unix_ms"] > killed_ms - 1 and rep["primary"]["first_dispatch_after_ms"] >= 0:
                gap = rep["primary"]["since_unix_ms"] + rep["primary"]["first_dispatch_after_ms"] - killed_ms
            return gap is not None
        wait_for(dispatched, 8)
        r = read_json(work / (tag + ".json"))
        # No dispatch before the window's load ended: the gap is longer than what is left of it.
        row = {"gap_over_ms": None if gap is not None else (window - 1.0) * 1000, "kill": k, "victim": victim, "new_primary": new, "gap_ms": gap, "sent": r["sent"], "bad": bad_of(r),
               "errors": r["errors"], "late": r["late"], "dropped": r["dropped"],
               "resubmitted": r["client"].get("resubmitted", 0)}
        out["kills"].append(row)
        log("%s kill %d: gap %s ms, bad %d of %d (errors %d)" % (
            mode, k, "?" if gap is None else "%.1f" % gap, row["bad"], row["sent"], row["errors"]))
        time.sleep(1.0)  # the restarted spare links up before the next kill
    c.stop()
    gaps = sorted(g["gap_ms"] for g in out["kills"] if g["gap_ms"] is not None)

    def pct(p):
        return gaps[min(len(gaps) - 1, int(round(p * (len(gaps) - 1))))] if gaps else None
    out["summary"] = {
        "gap_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": gaps[-1] if gaps else None, "n": len(gaps)},
        "bad_per_kill_window": {"mean": statistics.mean(g["bad"] for g in out["kills"]),
                                "max": max(g["bad"] for g in out["kills"])},
        "errors_per_kill_window": {"mean": statistics.mean(g["errors"] for g in out["kills"]),
                                   "total": sum(g["errors"] for g in out["kills"])},
        "bad_per_baseline_window": {"mean": statistics.mean(b["bad"] for b in out["baseline"]) if out["baseline"] else None},
        "sent_per_window": statistics.mean(g["sent"] for g in out["kills"]),
    }
    out["work_dir"] = str(work)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--baseline", type=int, default=5)
    ap.add_argument("--modes", default="spares,single")
    ap.add_argument("--windows", default="2,4", help="the load window (s) of each mode, in --modes order; the kill is 1 s in")
    a = ap.parse_args()
    d = results_dir("failover")
    res = json.loads((d / "failover.json").read_text()) if (d / "failover.json").exists() else {"modes": {}}
    res["date"] = time.strftime("%Y-%m-%d")
    for mode, window in zip(a.modes.split(","), [float(w) for w in a.windows.split(",")]):
        res["modes"][mode] = run_mode(mode, a.kills, a.baseline, window)
        res["modes"][mode]["command"] = ("/usr/bin/python3 bench/experiments/failover.py --kills %d --baseline %d "
                                         "--modes %s --windows %g" % (a.kills, a.baseline, mode, window))
        log(json.dumps(res["modes"][mode]["summary"]))
    save_json(d / "failover.json", res)
    log("wrote " + str(d / "failover.json"))


if __name__ == "__main__":
    main()
