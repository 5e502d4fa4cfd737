#!/usr/bin/env python3
"""Overload: goodput and the served requests' p99 against offered load, with
admission on and off in the same run (bench/results/overload.md).

  /usr/bin/python3 bench/overload_bench.py [--build-dir build/release] [--out bench/results/overload]
                                  [--only runtime serve] [--seconds 3]

Three parts, each a sweep of offered load over multiples of a capacity that
the sweep itself measures (the best goodput at or below it, with admission
on), each point run with admission off and on back to back:

  runtime  `symphony stress`, 1 shard: 64 models on 64 emulated GPUs with the
           default profile (short of the shard's CPU, 0.5-6 M r/s offered), and
           one model on one GPU, l(b) = 0.1 ms*b + 5 ms, SLO 50 ms (short of GPU,
           0.5x-10x its capacity); then two priorities at 3x on the latter,
           the high one at half the capacity.
  serve    `symphony serve` with one emulated device, driven through HTTP and
           gRPC by `symphony load`: open loop (--rate) and a closed-loop flood
           (--concurrency 64..4096), for a device-bound model (l(b) = 0.5 ms*b
           + 2 ms, max batch 16, SLO 40 ms: about 1600 r/s) and a CPU-bound one
           (a few us per batch: the front is the bottleneck).

  cluster  (only with --only cluster) the device-bound model on a scheduler, one
           backend and one protocol frontend on loopback: `symphony loadgen` at
           0.5x-10x, and the closed-loop flood through the frontend, --runs times.
  cluster-priorities  (only with --only cluster-priorities) the same cluster,
           its model with two priority levels, offered 3x its capacity with
           the high priority at half the capacity (1:1/6, 2:5/6): by loadgen,
           and through the frontend in open loop over HTTP and gRPC, --runs
           times; what each priority lost.
  flood    (only with --only flood) the closed-loop flood of the device-bound
           model over HTTP and gRPC, 64 to 4096 connections, with the
           scheduler's threads at nice 0 and -10 (scheduler_nice, --nice) and at
           SCHED_FIFO priority 10 (scheduler_realtime, --realtime; opt-in on
           serve), --runs times; each point with the time the server took to refuse (its
           /metrics symphony_refusal_latency_seconds before and after).

Writes OUT/overload.json and OUT/overload.png (OUT/flood.*, OUT/cluster.*,
OUT/cluster_priorities.json). Every run is bounded; the
whole takes about 15 minutes on 2 cores with the defaults. Measure on a quiet
machine: the load average is recorded with each point.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import types
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def pinned(cpus):
    """The prefix that runs a command on `cpus` only (taskset's list, e.g. "1"), or none."""
    return ["taskset", "-c", cpus] if cpus else []


def client_budget(text):
    """--client-budget: slo, none or a positive number of milliseconds."""
    try:
        if text in ("slo", "none") or float(text) > 0:
            return text
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be slo, none or a positive number of milliseconds, not {text!r}")


def run_json(cmd, out, timeout):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
    with open(out) as f:
        return json.load(f)


# ---- the runtime ---------------------------------------------------------------------------

GPU_BOUND = ["--models", "1", "--gpus", "1", "--alpha", "0.1", "--beta", "5", "--slo", "50"]
CPU_BOUND = ["--models", "64", "--gpus", "64"]


def stress(a, tmp, rate, admission, shape, low_share=0.0):
    out = os.path.join(tmp, "stress.json")
    cmd = [a.symphony, "stress"] + shape + ["--shards", "1", "--clients", "1", "--rate", f"{rate:.0f}",
                                            "--duration", f"{a.seconds:g}", "--admission", admission, "--json", out]
    if low_share:
        cmd += ["--low-priority-share", f"{low_share:g}"]
    j = run_json(cmd, out, timeout=a.seconds * 10 + 60)
    j["loadavg"] = loadavg()
    return j


def runtime_part(a, tmp):
    res = {}
    for name, shape, rates in (("runtime, CPU-bound (64 models, 64 GPUs)", CPU_BOUND,
                                [0.5e6, 1e6, 2e6, 3e6, 4e6, 6e6]),
                               ("runtime, GPU-bound (1 model, 1 GPU)", GPU_BOUND,
                                [4e3, 8e3, 16e3, 40e3, 80e3])):
        pts = []
        for r in rates:
            for adm in ("off", "on"):
                j = stress(a, tmp, r, adm, shape)
                log(f"{name}: offered {j['offered_rps']:.0f} admission {adm}: goodput {j['goodput_rps']:.0f}, "
                    f"mean batch {j['mean_batch']:.1f}, overload {j['overload']}, cpu gen {j['generator_cpu_s']:.2f} "
                    f"runtime {j['runtime_cpu_s']:.2f} s")
                pts.append({"admission": adm, "offered_rps": j["offered_rps"], "goodput_rps": j["goodput_rps"],
                            "p99_ms": None, "mean_batch": j["mean_batch"], "overload": j["overload"],
                            "bad_rate": j["bad_rate"], "generator_cpu_s": j["generator_cpu_s"],
                            "runtime_cpu_s": j["runtime_cpu_s"], "loadavg": j["loadavg"]})
        res[name] = pts
    # Two priorities at 3x the GPU-bound capacity, the high one at half of it.
    peak = max(p["goodput_rps"] for p in res["runtime, GPU-bound (1 model, 1 GPU)"] if p["admission"] == "on")
    prio = []
    for adm in ("off", "on"):
        j = stress(a, tmp, 3 * peak, adm, GPU_BOUND, low_share=5 / 6)
        lost = [1 - j["ok_by_priority"][k] / max(1, j["sent_by_priority"][k]) for k in (0, 1)]
        log(f"priorities at 3x ({3 * peak:.0f} r/s) admission {adm}: high loses {100 * lost[0]:.2f} %, "
            f"low {100 * lost[1]:.2f} %")
        prio.append({"admission": adm, "offered_rps": j["offered_rps"], "sent": j["sent_by_priority"],
                     "ok": j["ok_by_priority"], "lost": lost})
    return res, prio


# ---- serve ---------------------------------------------------------------------------------

SERVE_SLO_MS = 40  # every serve and cluster model below
MODELS = {
    "device-bound": f'{{name: m, input: "float32[4]", slo_ms: {SERVE_SLO_MS}, max_batch: 16, alpha_ms: 0.5, beta_ms: 2}}',
    "CPU-bound": f'{{name: m, input: "float32[4]", slo_ms: {SERVE_SLO_MS}, max_batch: 32, alpha_ms: 0.001, '
                 'beta_ms: 0.01}',
}


def hold_args(a):
    """--overload-hold when `a` names one (None: the front's default)."""
    h = getattr(a, "overload_hold", None)
    return [] if h is None else ["--overload-hold", f"{h:g}"]


def point_options(build_dir, **over):
    """The options Serve and load() take for backlog_share.py's points (`serve` on CPU 0, the client on
    CPU 1, 4 s a point, each request's budget the 40 ms SLO), with `over` replacing any of them."""
    opts = dict(symphony=os.path.join(build_dir, "symphony"), seconds=4.0, pin_server="0", pin_client="1",
                client_budget="slo", backlog_share=1, overload_hold=0.5)
    opts.update(over)
    return types.SimpleNamespace(**opts)


class Serve:
    def __init__(self, a, tmp, model, admission, scheduler_nice=None, scheduler_realtime=None):
        cfg = os.path.join(tmp, "serve.yaml")
        with open(cfg, "w") as f:
            f.write(f"devices: emulated:1\nadmission: {'true' if admission == 'on' else 'false'}\n"
                    + (f"admission_backlog_share: {share:g}\n" if (share := getattr(a, "backlog_share", 1)) != 1 else "")
                    + (f"scheduler_nice: {scheduler_nice}\n" if scheduler_nice is not None else "")
                    + (f"scheduler_realtime: {scheduler_realtime}\n" if scheduler_realtime is not None else "")
                    + f"models:\n  - {MODELS[model]}\n")
        pf = os.path.join(tmp, "ports.json")
        if os.path.exists(pf):
            os.unlink(pf)
        self.log = open(os.path.join(tmp, "serve.log"), "w")
        self.p = subprocess.Popen(pinned(getattr(a, "pin_server", None))
                                  + [a.symphony, "serve", cfg, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
                                     "--metrics", "127.0.0.1:0", "--port-file", pf, "--quiet"] + hold_args(a),
                                  stdout=self.log, stderr=subprocess.STDOUT)
        until = time.time() + 30
        while not os.path.exists(pf):
            if self.p.poll() is not None or time.time() > until:
                self.stop()
                raise RuntimeError("serve did not start; see " + self.log.name)
            time.sleep(0.05)
        time.sleep(0.1)
        with open(pf) as f:
            self.ports = json.load(f)
        with open(self.log.name) as f:
            m = re.search(r"metrics: listening on (http://\S+/metrics)", f.read())
        self.metrics_url = m.group(1) if m else None

    def refusal_buckets(self):
        """{le (s): cumulative count} of symphony_refusal_latency_seconds, and
        under "at_submit" symphony_refusals_at_submit_total."""
        text = urllib.request.urlopen(self.metrics_url, timeout=30).read().decode()
        out = {"at_submit": sum(float(v) for v in re.findall(
            r'^symphony_refusals_at_submit_total\{[^}]*\} (\S+)$', text, re.M))}
        for le, v in re.findall(r'^symphony_refusal_latency_seconds_bucket\{[^}]*le="([^"]+)"\} (\S+)$', text, re.M):
            bound = float("inf") if le == "+Inf" else float(le)
            out[bound] = out.get(bound, 0) + float(v)
        return out

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def load(a, tmp, url, rate=None, concurrency=None, priority=None):
    out = os.path.join(tmp, "load.json")
    cmd = pinned(getattr(a, "pin_client", None)) + [
        a.symphony, "load", "--url", url, "--model", "m", "--duration", f"{a.seconds + 1:g}", "--warmup", "1",
        "--json", out, "--quiet", "--drain", "5"]
    if priority:
        cmd += ["--priority", priority]
    if getattr(a, "client_budget", "none") != "none":
        # Sent as each request's timeout / gRPC deadline; the client judges its answers by it too.
        cmd += ["--budget", str(SERVE_SLO_MS if a.client_budget == "slo" else a.client_budget)]
    if url.startswith("grpc:") and getattr(a, "grpc_budget", "deadline") != "deadline":
        cmd += ["--grpc-budget", a.grpc_budget]
    if rate:
        cmd += ["--rate", f"{rate:.0f}"]
    else:
        cmd += ["--concurrency", str(concurrency), "--connections", str(min(concurrency, 16384))]
    j = run_json(cmd, out, timeout=a.seconds * 10 + 60)
    m = j["models"]["m"]
    return {"offered_rps": m.get("offered_rps", j.get("offered_rps")), "goodput_rps": j["goodput_rps"],
            "p50_ms": m["latency_ms"]["p50"] if "latency_ms" in m else None,
            "p99_ms": m["latency_ms"]["p99"] if "latency_ms" in m else None, "sent": j["sent"], "ok": j["ok"],
            "dropped": j["dropped"], "late": j["late"], "errors": j["errors"], "loadavg": loadavg(),
            "dropped_by_reason": m.get("dropped_by_reason"), "by_priority": m.get("by_priority"),
            # the client's own lag: requests sent over its late threshold behind schedule, its CPU
            "client_sent_late": j.get("client", {}).get("sent_late"), "client_cpu_s": j.get("client", {}).get("cpu_s"),
            # late as the client saw them though ok by the server's clock (with a client budget)
            "budget_ms": m.get("budget_ms"), "late_server_ok": j.get("client", {}).get("late_server_ok")}


def refusal_latency(before, after):
    """The refusals between two refusal_buckets(): their count, the share
    answered within 1 ms, the bucket bound that holds their p99, and the share
    refused on the submitting thread."""
    d = {le: after[le] - before.get(le, 0) for le in after if le != "at_submit"}
    n = d.get(float("inf"), 0)
    if n == 0:
        return {"count": 0}
    p99 = next(le for le in sorted(d) if d[le] >= 0.99 * n)
    at_submit = after.get("at_submit", 0) - before.get("at_submit", 0)
    return {"count": int(n), "within_1ms": d.get(0.001, 0) / n, "p99_at_most_ms": p99 * 1e3,
            "at_submit": at_submit / n}


def serve_part(a, tmp):
    res = {}
    for model, nominal in (("device-bound", 1600.0), ("CPU-bound", None)):
        if model not in a.serve_models:
            continue
        for proto in a.protocols:
            capacity = nominal
            name = f"serve {proto}, {model}"
            pts = []
            if capacity is None:  # the front's own capacity: the closed loop at 64 shows it
                s = Serve(a, tmp, model, "on")
                try:
                    capacity = load(a, tmp, f"{proto}://{s.ports[proto]}", concurrency=64)["goodput_rps"]
                finally:
                    s.stop()
                log(f"{model}: capacity {capacity:.0f} r/s (closed loop, 64 outstanding)")
            for adm in a.admission:
                s = Serve(a, tmp, model, adm)
                url = f"{proto}://{s.ports[proto]}"
                try:
                    for mult in (0.5, 1, 2, 5, 10) if "open" in a.loops else ():
                        p = load(a, tmp, url, rate=mult * capacity)
                        p.update(admission=adm, loop="open", multiple=mult)
                        log(f"{name} open {mult}x admission {adm}: goodput {p['goodput_rps']:.0f} p99 {p['p99_ms']}")
                        pts.append(p)
                    for conc in (64, 512, 2048, 4096) if "closed" in a.loops else ():
                        p = load(a, tmp, url, concurrency=conc)
                        p.update(admission=adm, loop="closed", concurrency=conc)
                        log(f"{name} closed {conc} admission {adm}: goodput {p['goodput_rps']:.0f} p99 {p['p99_ms']}")
                        pts.append(p)
                finally:
                    s.stop()
            res[name] = {"capacity_rps": capacity, "points": pts}
    return res


def flood_part(a, tmp):
    """The closed-loop flood on the device-bound model, the scheduler's threads
    at the process's priority (scheduler_nice 0), above the front's (-10) and at
    real-time priority (--realtime: SCHED_FIFO, serve's scheduler_realtime), back to
    back, `a.runs` times."""
    pts = []
    variants = [(nice, 0) for nice in a.nice] + [(-10, rt) for rt in a.realtime]
    for run in range(a.runs):
        for proto in ("http", "grpc"):
            for nice, rt in variants:
                s = Serve(a, tmp, "device-bound", "on", scheduler_nice=nice, scheduler_realtime=rt)
                try:
                    for conc in (64, 512, 2048, 4096):
                        before = s.refusal_buckets()
                        p = load(a, tmp, f"{proto}://{s.ports[proto]}", concurrency=conc)
                        p.update(run=run, proto=proto, scheduler_nice=nice, scheduler_realtime=rt,
                                 concurrency=conc, refusal_latency=refusal_latency(before, s.refusal_buckets()))
                        log(f"flood {proto} {conc} nice {nice} realtime {rt} run {run}: goodput {p['goodput_rps']:.0f} "
                            f"errors {p['errors']} {p['dropped_by_reason']} refusals {p['refusal_latency']} "
                            f"load {p['loadavg']}")
                        pts.append(p)
                finally:
                    s.stop()
    return {"capacity_rps": 1600.0, "points": pts}


CLUSTER_CONFIG = """name: overload_cluster
seed: 1
gpus: 1
duration_s: 3
warmup_s: 1
policy: deferred
gather: target_batch
workload: {rate: 1600, arrival: poisson}
models:
  - {name: m, alpha_ms: 0.5, beta_ms: 2, slo_ms: {slo}, max_batch: 16{levels}}
cluster:
  token: overload-bench
  frontend_admission: {fa}
  admission_backlog_share: {share}
  models:
    m: {input: "uint8[64]", output: "uint8[16]"}
""".replace("{slo}", str(SERVE_SLO_MS))


class Cluster:
    """A scheduler, one backend with one emulated GPU and one protocol
    frontend, on loopback: the device-bound model of the serve part."""

    def __init__(self, a, tmp, frontend_admission=True, priority_levels=1):
        self.a, self.dir, self.procs = a, tmp, []
        self.config = os.path.join(tmp, "cluster.yaml")
        levels = f", priority_levels: {priority_levels}" if priority_levels > 1 else ""
        with open(self.config, "w") as f:
            f.write(CLUSTER_CONFIG.replace("{fa}", "true" if frontend_admission else "false")
                    .replace("{levels}", levels).replace("{share}", f"{getattr(a, 'backlog_share', 1):g}"))
        port = os.path.join(tmp, "sched.port")
        for f in (port, os.path.join(tmp, "fe.ports")):
            if os.path.exists(f):
                os.unlink(f)
        self.start("scheduler", ["scheduler", "--listen", "127.0.0.1:0", "--config", self.config,
                                 "--port-file", port])
        self.wait(lambda: os.path.exists(port) and open(port).read().strip(), "scheduler")
        self.addr = "127.0.0.1:" + open(port).read().strip()
        self.start("backend", ["backend", "--scheduler", self.addr, "--devices", "emulated:1",
                               "--config", self.config, "--name", "b1"])
        self.wait(lambda: " registered " in open(os.path.join(tmp, "scheduler.log")).read(), "backend")
        pf = os.path.join(tmp, "fe.ports")
        self.start("frontend", ["frontend", "--scheduler", self.addr, "--config", self.config, "--http",
                                "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--port-file", pf, "--quiet"]
                   + hold_args(a))
        self.wait(lambda: os.path.exists(pf), "frontend")
        with open(pf) as f:
            self.ports = json.load(f)
        time.sleep(1)

    def start(self, name, args):
        log_f = open(os.path.join(self.dir, name + ".log"), "w")
        self.procs.append(subprocess.Popen([self.a.symphony] + args, stdout=log_f, stderr=subprocess.STDOUT))

    def wait(self, ready, what):
        until = time.time() + 30
        while not ready():
            if any(p.poll() is not None for p in self.procs) or time.time() > until:
                self.stop()
                raise RuntimeError(f"the cluster's {what} did not start; see {self.dir}")
            time.sleep(0.05)

    def loadgen(self, rate, priority=None):
        out = os.path.join(self.dir, "loadgen.json")
        cmd = [self.a.symphony, "loadgen", "--scheduler", self.addr, "--config", self.config, "--rate",
               f"{rate:.0f}", "--duration", f"{self.a.seconds + 1:g}", "--warmup", "1", "--quiet", "--json", out]
        if priority:
            cmd += ["--priority", priority]
        return run_json(cmd, out, timeout=self.a.seconds * 10 + 60)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def cluster_part(a, tmp):
    """The device-bound model on the cluster: open loop from `symphony loadgen`
    (the cluster client, straight to the scheduler) at 0.5x-10x, and the
    closed-loop flood through the protocol frontend over HTTP and gRPC; each
    run with the frontends refusing on the scheduler's admission tests
    (cluster.frontend_admission) and without, interleaved."""
    pts = []
    for run in range(a.runs):
        for fa in (True, False):
            c = Cluster(a, tmp, frontend_admission=fa)
            try:
                for mult in (0.5, 1, 2, 5, 10):
                    j = c.loadgen(mult * 1600)
                    p = {"run": run, "frontend_admission": fa, "client": "loadgen", "multiple": mult,
                         "offered_rps": j.get("offered_rps"), "goodput_rps": j.get("goodput_rps"),
                         "admission_refused": (j.get("client") or {}).get("admission_refused"),
                         "report": {k: v for k, v in j.items() if not isinstance(v, (dict, list))},
                         "loadavg": loadavg()}
                    log(f"cluster fa={fa} loadgen {mult}x run {run}: goodput {p['goodput_rps']} "
                        f"refused here {p['admission_refused']} load {p['loadavg']}")
                    pts.append(p)
                for proto in ("http", "grpc"):
                    for conc in (64, 512, 2048, 4096):
                        p = load(a, tmp, f"{proto}://{c.ports[proto]}", concurrency=conc)
                        p.update(run=run, frontend_admission=fa, client="frontend", proto=proto,
                                 concurrency=conc)
                        log(f"cluster fa={fa} frontend {proto} {conc} run {run}: goodput "
                            f"{p['goodput_rps']:.0f} errors {p['errors']} {p['dropped_by_reason']} "
                            f"load {p['loadavg']}")
                        pts.append(p)
            finally:
                c.stop()
    return {"capacity_rps": 1600.0, "points": pts}


PRIORITY_MIX = "1:0.1667,2:0.8333"  # the high priority at half the capacity when 3x is offered


def lost_by_priority(by_priority):
    """Each priority's share of its sent requests that did not end ok."""
    return {p: 1 - c["ok"] / max(1, c["sent"]) for p, c in sorted((by_priority or {}).items())}


def cluster_priorities_part(a, tmp):
    """Two priorities at 3x the cluster's capacity, the high one at half of
    it: by loadgen (straight to the scheduler) and through the frontend in
    open loop over HTTP and gRPC, with the frontends refusing (the default)."""
    pts = []
    rate = 3 * 1600
    for run in range(a.runs):
        c = Cluster(a, tmp, priority_levels=2)
        try:
            for client in ("loadgen", "http", "grpc"):
                if client == "loadgen":
                    j = c.loadgen(rate, PRIORITY_MIX)
                    m = j["models"]["m"]
                    p = {"offered_rps": j.get("offered_rps"), "goodput_rps": j.get("goodput_rps"),
                         "by_priority": m.get("by_priority"), "loadavg": loadavg()}
                else:
                    p = load(a, tmp, f"{client}://{c.ports[client]}", rate=rate, priority=PRIORITY_MIX)
                p.update(run=run, client=client, lost=lost_by_priority(p["by_priority"]))
                log(f"cluster priorities {client} run {run}: goodput {p['goodput_rps']:.0f}, lost "
                    + ", ".join(f"priority {k} {100 * v:.2f} %" for k, v in p["lost"].items())
                    + f" load {p['loadavg']}")
                pts.append(p)
        finally:
            c.stop()
    return {"capacity_rps": 1600.0, "offered_rps": rate, "mix": PRIORITY_MIX, "points": pts}


def plot_cluster(cl, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    pts = cl["points"]
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6), squeeze=False)
    series = [(axes[0][0], "loadgen", lambda p: p["client"] == "loadgen", "multiple", "offered load (x capacity)"),
              (axes[0][1], "http", lambda p: p.get("proto") == "http", "concurrency", "connections"),
              (axes[0][1], "grpc", lambda p: p.get("proto") == "grpc", "concurrency", "connections")]
    for ax, name, pick, key, xlabel in series:
        for fa, style in ((True, "s-"), (False, "o--")):
            # Points of older runs have no frontend_admission: the scheduler refused alone.
            mine = [p for p in pts if pick(p) and p.get("frontend_admission", False) == fa]
            if not mine:
                continue
            xs = sorted({p[key] for p in mine})
            worst = [min(p["goodput_rps"] for p in mine if p[key] == x) for x in xs]
            best = [max(p["goodput_rps"] for p in mine if p[key] == x) for x in xs]
            tag = "frontends refuse too" if fa else "scheduler refuses alone"
            (line,) = ax.plot(xs, worst, style, label=f"{name}, {tag}")
            ax.fill_between(xs, worst, best, color=line.get_color(), alpha=0.12)
        ax.set_xlabel(xlabel)
    for ax, title in ((axes[0][0], "cluster: loadgen to the scheduler, open loop"),
                      (axes[0][1], "cluster: closed-loop flood at the frontend")):
        ax.axhline(cl["capacity_rps"], color="grey", lw=0.8)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("goodput r/s")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.15 * cl["capacity_rps"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_flood(flood, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.6), squeeze=False)
    for ax, proto in zip(axes[0], ("http", "grpc")):
        variants = sorted({(p["scheduler_nice"], p.get("scheduler_realtime", 0)) for p in flood["points"]},
                          key=lambda v: (v[1], -v[0]))
        for (nice, rt), style in zip(variants, ("o--", "s-", "^-.", "d:")):
            mine = [p for p in flood["points"] if p["proto"] == proto and p["scheduler_nice"] == nice
                    and p.get("scheduler_realtime", 0) == rt]
            name = f"scheduler SCHED_FIFO {rt}" if rt else f"scheduler nice {nice}"
            concs = sorted({p["concurrency"] for p in mine})
            worst = [min(p["goodput_rps"] for p in mine if p["concurrency"] == c) for c in concs]
            best = [max(p["goodput_rps"] for p in mine if p["concurrency"] == c) for c in concs]
            (line,) = ax.plot(concs, worst, style, label=f"{name} (worst run; band: best)")
            ax.fill_between(concs, worst, best, color=line.get_color(), alpha=0.15)
        ax.axhline(flood["capacity_rps"], color="grey", lw=0.8)
        ax.set_title(f"serve {proto}, closed-loop flood, device-bound model", fontsize=9)
        ax.set_xlabel("connections (one request outstanding each)")
        ax.set_ylabel("goodput r/s")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.15 * flood["capacity_rps"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = list(data.get("runtime", {}).items()) + [(k, v["points"]) for k, v in data.get("serve", {}).items()]
    if not runs:
        return
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), squeeze=False)
    for ax, (name, pts) in zip(axes[0], runs):
        for adm, style in (("off", "o--"), ("on", "s-")):
            xs = sorted((p for p in pts if p["admission"] == adm and p.get("loop", "open") == "open"),
                        key=lambda p: p["offered_rps"])
            ax.plot([p["offered_rps"] for p in xs], [p["goodput_rps"] for p in xs], style,
                    label=f"admission {adm}")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("offered r/s")
        ax.set_ylabel("goodput r/s")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def replot(out):
    """Redraws OUT/overload.png, flood.png and cluster.png from the JSON beside each, where it exists."""
    if os.path.exists(os.path.join(out, "overload.json")):
        with open(os.path.join(out, "overload.json")) as f:
            plot(json.load(f), os.path.join(out, "overload.png"))
    if os.path.exists(os.path.join(out, "flood.json")):
        with open(os.path.join(out, "flood.json")) as f:
            plot_flood(json.load(f), os.path.join(out, "flood.png"))
    if os.path.exists(os.path.join(out, "cluster.json")):
        with open(os.path.join(out, "cluster.json")) as f:
            plot_cluster(json.load(f), os.path.join(out, "cluster.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "overload"))
    ap.add_argument("--only", nargs="*", default=["runtime", "serve"],
                    choices=["runtime", "serve", "flood", "cluster", "cluster-priorities"])
    ap.add_argument("--runs", type=int, default=3,
                    help="runs of each point (--only flood, cluster, cluster-priorities)")
    ap.add_argument("--nice", type=int, nargs="*", default=[0, -10],
                    help="the scheduler's nice values the flood compares, without real time (--only flood)")
    ap.add_argument("--realtime", type=int, nargs="*", default=[10],
                    help="SCHED_FIFO priorities of the scheduler's threads the flood compares too "
                         "(--only flood; scheduler_realtime, needs CAP_SYS_NICE)")
    ap.add_argument("--seconds", type=float, default=3, help="seconds of load per point")
    ap.add_argument("--replot", action="store_true", help="only redraw OUT/overload.png from OUT/overload.json")
    ap.add_argument("--serve-models", nargs="*", default=["device-bound", "CPU-bound"],
                    choices=["device-bound", "CPU-bound"], help="the models of the serve part")
    ap.add_argument("--pin-server", metavar="CPUS",
                    help="run serve on these CPUs only (taskset -c), e.g. 0: the client then cannot take its cores")
    ap.add_argument("--pin-client", metavar="CPUS", help="run the load client on these CPUs only, e.g. 1")
    ap.add_argument("--loops", nargs="*", default=["open", "closed"], choices=["open", "closed"],
                    help="the serve part's open-loop points (0.5x-10x), closed-loop floods (64-4096), or both")
    ap.add_argument("--protocols", nargs="*", default=["http", "grpc"], choices=["http", "grpc"],
                    help="the serve part's protocols")
    ap.add_argument("--admission", nargs="*", default=["off", "on"], choices=["off", "on"],
                    help="the serve part's admission settings")
    ap.add_argument("--client-budget", default="slo", metavar="slo|none|MS", type=client_budget,
                    help="the budget `symphony load` sends with each request and judges its answer by (an answer "
                         "later than it from its scheduled send is late, whatever the server says): slo (40 ms, "
                         "the models' SLO; default), MS, or none: the server's verdict alone (runs before "
                         "2026-12-06)")
    ap.add_argument("--grpc-budget", default="deadline", choices=["deadline", "timeout"],
                    help="how the gRPC client sends the budget: the call's deadline (default; its library ends "
                         "the call there) or the request's timeout parameter (no deadline on the call)")
    ap.add_argument("--backlog-share", type=float, default=1.0,
                    help="admission_backlog_share of serve (the serve and flood parts) and of the cluster's "
                         "scheduler (the cluster parts): the share of a request's time left its model's "
                         "backlog may take")
    a = ap.parse_args()
    if a.replot:
        replot(a.out)
        return
    a.symphony = os.path.join(a.build_dir, "symphony")
    os.makedirs(a.out, exist_ok=True)
    data = {"command": " ".join(["/usr/bin/python3", "bench/overload_bench.py"] + sys.argv[1:]),
            "nproc": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="overload-") as tmp:
        if "runtime" in a.only:
            data["runtime"], data["priorities"] = runtime_part(a, tmp)
        if "serve" in a.only:
            data["serve"] = serve_part(a, tmp)
        if "flood" in a.only:
            flood = dict(flood_part(a, tmp), command=data["command"], nproc=data["nproc"])
            with open(os.path.join(a.out, "flood.json"), "w") as f:
                json.dump(flood, f, indent=1)
            plot_flood(flood, os.path.join(a.out, "flood.png"))
            log("wrote " + os.path.join(a.out, "flood.json"))
        if "cluster" in a.only:
            cl = dict(cluster_part(a, tmp), command=data["command"], nproc=data["nproc"])
            with open(os.path.join(a.out, "cluster.json"), "w") as f:
                json.dump(cl, f, indent=1)
            plot_cluster(cl, os.path.join(a.out, "cluster.png"))
            log("wrote " + os.path.join(a.out, "cluster.json"))
        if "cluster-priorities" in a.only:
            cp = dict(cluster_priorities_part(a, tmp), command=data["command"], nproc=data["nproc"])
            with open(os.path.join(a.out, "cluster_priorities.json"), "w") as f:
                json.dump(cp, f, indent=1)
            log("wrote " + os.path.join(a.out, "cluster_priorities.json"))
    if "runtime" in a.only or "serve" in a.only:
        with open(os.path.join(a.out, "overload.json"), "w") as f:
            json.dump(data, f, indent=1)
        plot(data, os.path.join(a.out, "overload.png"))
        log("wrote " + os.path.join(a.out, "overload.json"))


if __name__ == "__main__":
    main()
