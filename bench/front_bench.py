#!/usr/bin/env python3
"""The protocol front's benchmarks (bench/results/front.md); run through bench/front_bench.sh.

Measures, on 127.0.0.1 only, with `symphony load` as the client:
  1. latency: round trip at concurrency 1 over HTTP and gRPC against `symphony serve` (one emulated
     device, a near-zero-cost model, policy eager) and against front_echo (the same HTTP and gRPC
     stacks and Front, a model that answers inside submit()), RUNS fresh processes each, with the
     server's own latency (serve's report: accepted to outcome) beside the client's;
  2. throughput: the highest open-loop rate with <= 1 % bad for serve and for echo over each
     transport (a doubling-then-bisection search, a fresh server per trial), and the closed-loop
     rate at a few concurrencies;
  3. optionally, the echo on Boost.Beast against cpp-httplib (a thread per connection) at 1, 64 and
     1024 keep-alive connections.
Every load run is bounded (--duration, --drain, and a subprocess timeout); servers are ended by
their process id. Prints tables; --json FILE writes everything measured.
"""
import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        a = f.read().split()
    return [float(a[0]), float(a[1]), float(a[2])]


def machine_busy_s():
    """CPU seconds all CPUs have spent busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """User + system CPU seconds of a process (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def thread_cpu(pid):
    """CPU seconds of each thread of a process: {tid: (name, seconds)}."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tids:
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                s = f.read()
            name = s[s.index("(") + 1:s.rindex(")")]
            fields = s[s.rindex(")") + 2:].split()
            out[t] = (name, (int(fields[11]) + int(fields[12])) / tick)
        except (OSError, ValueError, IndexError):
            pass
    return out


def thread_cpu_delta(before, after):
    """CPU seconds spent between two thread_cpu() readings, by thread name (threads of one name added)."""
    by = {}
    for tid, (name, s) in after.items():
        by[name] = by.get(name, 0.0) + s - before.get(tid, (name, 0.0))[1]
    return {k: round(v, 3) for k, v in sorted(by.items(), key=lambda kv: -kv[1]) if v > 0}


class Bench:
    def __init__(self, a):
        self.a = a
        self.b = a.build_dir
        self.symphony = os.path.join(self.b, "symphony")
        self.echo = os.path.join(self.b, "bench", "front_echo")
        self.tmp = tempfile.mkdtemp(prefix="front_bench.")
        self.procs = []
        self.server_pin = ["taskset", "-c", a.server_cpus] if a.server_cpus else []
        self.client_pin = ["taskset", "-c", a.client_cpus] if a.client_cpus else []
        self.n = 0
        self.waited_s = 0.0  # for a quiet machine, in all

    def quiet_gate(self):
        """Waits (a bounded time) until the rest of the machine uses less than --quiet-cpus CPUs over a second;
        returns what it used in the last second (in CPUs)."""
        a = self.a
        t0 = time.time()
        while True:
            b0 = machine_busy_s()
            time.sleep(1)
            busy = machine_busy_s() - b0
            if busy < a.quiet_cpus or self.waited_s >= a.quiet_budget_s or time.time() - t0 >= a.quiet_wait_s:
                break
            if time.time() - t0 < 1.5:
                log(f"  waiting for a quiet machine: others use {busy:.2f} CPUs (up to {a.quiet_wait_s:g} s)")
            self.waited_s += 1
        return busy

    def config(self, policy, slo_ms):
        path = os.path.join(self.tmp, f"tiny_{policy.replace(':', '_')}_{slo_ms:g}.yaml")
        with open(path, "w") as f:
            f.write(
                "# front_bench: one emulated device, a model of near-zero cost\n"
                "devices: emulated:1\n"
                f"policy: {policy}\n"
                "models:\n"
                "  - name: tiny\n"
                "    input: float32[4]\n"
                f"    slo_ms: {slo_ms:g}\n"
                "    max_batch: 32\n"
                "    alpha_ms: 0.001\n"
                "    beta_ms: 0.01\n")
        return path

    # ---- servers ---------------------------------------------------------------------------
    def start(self, kind, policy="eager", extra=(), trace=None):
        """Starts serve or front_echo on port 0; returns (proc, ports dict, report path). With `trace`, the
        server writes its per-request stage times there when it stops (front/include/symphony/front/trace.hpp)."""
        self.n += 1
        pf = os.path.join(self.tmp, f"ports{self.n}.json")
        report = os.path.join(self.tmp, f"serve{self.n}.json")
        out = open(os.path.join(self.tmp, f"server{self.n}.log"), "w")
        if kind == "serve":
            cmd = [self.symphony, "serve", self.config(policy, self.a.slo_ms), "--http", "127.0.0.1:0", "--grpc",
                   "127.0.0.1:0", "--port-file", pf, "--quiet", "--json", report]
        else:
            cmd = [self.echo, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--port-file", pf,
                   "--slo-ms", f"{self.a.slo_ms:g}"]
        cmd = self.server_pin + cmd + list(extra)
        env = dict(os.environ)
        env.pop("SYMPHONY_FRONT_TRACE", None)
        if trace:
            env["SYMPHONY_FRONT_TRACE"] = trace
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        self.procs.append(p)
        until = time.time() + 30
        while not os.path.exists(pf):
            if p.poll() is not None or time.time() > until:
                self.stop(p)
                raise RuntimeError(f"{kind} did not start: {' '.join(cmd)} (log {out.name})")
            time.sleep(0.05)
        with open(pf) as f:
            ports = json.load(f)
        return p, ports, report

    def stop(self, p, report=None):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)
        if report and os.path.exists(report):
            with open(report) as f:
                return json.load(f)
        return None

    def cleanup(self):
        for p in list(self.procs):
            if p.poll() is None:
                p.kill()
                p.wait()

    # ---- the client ------------------------------------------------------------------------
    def load(self, url, *, rate=None, concurrency=None, duration, warmup, budget_ms=None, connections=None,
             seed=1, server_pid=None):
        self.n += 1
        out = os.path.join(self.tmp, f"load{self.n}.json")
        cmd = [self.symphony, "load", "--url", url, "--model", "tiny", "--duration", f"{duration:g}", "--warmup",
               f"{warmup:g}", "--seed", str(seed), "--json", out, "--quiet", "--drain", "5"]
        if rate:
            cmd += ["--rate", f"{rate:g}"]
        else:
            cmd += ["--concurrency", str(concurrency)]
        cmd += ["--budget", f"{budget_ms:g}" if budget_ms else "none"]
        if connections:
            cmd += ["--connections", str(connections)]
        cmd = self.client_pin + cmd
        before = self.quiet_gate()
        busy0 = machine_busy_s()
        cpu0 = proc_cpu_s(server_pid) if server_pid else float("nan")
        threads0 = thread_cpu(server_pid) if server_pid else {}
        wall0 = time.time()
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                           timeout=duration + 60)
        cpu1 = proc_cpu_s(server_pid) if server_pid else float("nan")
        busy1 = machine_busy_s()
        wall = time.time() - wall0
        threads1 = thread_cpu(server_pid) if server_pid else {}
        if r.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"load failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
        with open(out) as f:
            j = json.load(f)
        m = j["models"]["tiny"]
        lat = m["latency_ms"]
        res = {
            "sent": m["sent"], "ok": m["ok"], "late": m["late"], "dropped": m["dropped"], "errors": m["errors"],
            "bad_rate": m["bad_rate"], "offered_rps": m["offered_rps"], "achieved_rps": m["achieved_rps"],
            "goodput_rps": m["goodput_rps"], "p50_us": lat["p50"] * 1e3, "p90_us": lat["p90"] * 1e3,
            "p99_us": lat["p99"] * 1e3, "max_us": lat["max"] * 1e3, "mean_us": lat["mean"] * 1e3,
            "dropped_by_reason": m["dropped_by_reason"], "errors_by_message": m["errors_by_message"],
            "client_cpu_s": j["client"]["cpu_s"], "window_s": j["duration_s"],
            "sent_late": m["client"]["sent_late"], "command": " ".join(cmd[len(self.client_pin):]),
        }
        if server_pid:
            res["server_cpu_s"] = cpu1 - cpu0  # over the whole run: warm-up and drain included
            res["server_threads_cpu_s"] = thread_cpu_delta(threads0, threads1)
        # What the rest of the machine used meanwhile (CPUs on average): anything but this server and client.
        res["others_cpus_before"] = round(before, 3)
        res["others_cpus"] = round(max(0.0, busy1 - busy0 - (cpu1 - cpu0 if server_pid else 0)
                                       - j["client"]["cpu_s"]) / wall, 3)
        # Every request the client generated, warm-up included (the CPU figures cover them all).
        res["generated"] = round(m["sent"] * (1 + warmup / j["duration_s"])) if j["duration_s"] > 0 else m["sent"]
        return res

    # ---- 1. latency at concurrency 1 ---------------------------------------------------------
    def latency(self):
        a = self.a
        rows = {k: [] for k in ("serve_http", "serve_grpc", "echo_http", "echo_grpc")}
        for i in range(a.runs):
            for proto in ("http", "grpc"):
                for kind in ("serve", "echo"):
                    p, ports, report = self.start(kind)
                    try:
                        r = self.load(f"{proto}://{ports[proto]}", concurrency=1, duration=a.latency_s, warmup=0,
                                      seed=i + 1, server_pid=p.pid)
                    finally:
                        rep = self.stop(p, report if kind == "serve" else None)
                    if rep:
                        lm = rep["models"]["tiny"]
                        r["server_p50_us"] = lm["latency_ms"]["p50"] * 1e3
                        r["server_p99_us"] = lm["latency_ms"]["p99"] * 1e3
                        r["server_sent"] = lm["sent"]
                        r["mean_batch"] = lm.get("mean_batch")
                    r["load_avg"] = loadavg()
                    rows[f"{kind}_{proto}"].append(r)
                    log(f"latency run {i + 1}/{a.runs} {kind:5} {proto:4}: p50 {r['p50_us']:6.1f} us  p99 "
                        f"{r['p99_us']:7.1f} us" + (f"  (server p50 {r['server_p50_us']:5.1f} p99 "
                                                    f"{r['server_p99_us']:6.1f} us)" if rep else ""))
        traced = {k: [] for k in rows}
        for i in range(a.trace_runs):
            for proto in ("http", "grpc"):
                for kind in ("serve", "echo"):
                    tf = os.path.join(self.tmp, f"trace{self.n}.json")
                    p, ports, report = self.start(kind, trace=tf)
                    try:
                        r = self.load(f"{proto}://{ports[proto]}", concurrency=1, duration=a.latency_s, warmup=0,
                                      seed=100 + i)
                    finally:
                        self.stop(p)
                    with open(tf) as f:
                        r["stages_us"] = json.load(f)[proto]["stages_us"]
                    traced[f"{kind}_{proto}"].append(r)
                    st = r["stages_us"]
                    log(f"traced run {i + 1}/{a.trace_runs} {kind:5} {proto:4}: client p50 {r['p50_us']:6.1f} us; "
                        "stage p50s " + ", ".join(f"{k} {v['p50']:.1f}" for k, v in st.items()))
        deferred = {}
        if a.deferred:
            for proto in ("http", "grpc"):
                p, ports, report = self.start("serve", policy="deferred")
                try:
                    r = self.load(f"{proto}://{ports[proto]}", concurrency=1, duration=3, warmup=0.5)
                finally:
                    rep = self.stop(p, report)
                r["server_p50_us"] = rep["models"]["tiny"]["latency_ms"]["p50"] * 1e3
                deferred[proto] = r
                log(f"latency deferred {proto:4}: p50 {r['p50_us']:8.1f} us  p99 {r['p99_us']:8.1f} us")
        return {"runs": rows, "traced": traced, "deferred": deferred}

    # ---- 2. throughput ------------------------------------------------------------------------
    def trial(self, kind, proto, rate, seed):
        a = self.a
        p, ports, report = self.start(kind)
        try:
            r = self.load(f"{proto}://{ports[proto]}", rate=rate, duration=a.trial_s, warmup=1, budget_ms=a.budget_ms,
                          seed=seed, server_pid=p.pid)
        finally:
            rep = self.stop(p, report if kind == "serve" else None)
        if rep:
            r["mean_batch"] = rep["models"]["tiny"].get("mean_batch")
        r["rate"] = rate
        why = []
        if r["bad_rate"] > 0.01:
            why.append(f"bad {100 * r['bad_rate']:.2f} %")
        if r["p99_us"] > a.budget_ms * 1e3:
            why.append(f"p99 {r['p99_us'] / 1e3:.1f} ms over the budget")
        if r["achieved_rps"] < 0.97 * rate:
            why.append(f"the client put only {r['achieved_rps']:.0f} r/s on the wire")
        # Requests that left the client late count in its latencies (from the scheduled time), so in the
        # budget test above; this only says whether the client itself was short of CPU.
        late = r["sent_late"] / r["sent"] if r["sent"] else 0
        r["sent_late_fraction"] = late
        if why and late > 0.01:
            why.append(f"the client was behind: {100 * late:.1f} % of the requests left it > 1 ms late")
        r["pass"] = not why
        r["why"] = "; ".join(why)
        r["load_avg"] = loadavg()
        log(f"  {kind:5} {proto:4} {rate:8.0f} r/s: {'pass' if r['pass'] else 'FAIL'}  bad {100 * r['bad_rate']:.3f} %"
            f"  p50 {r['p50_us'] / 1e3:.2f} ms  p99 {r['p99_us'] / 1e3:.2f} ms  achieved {r['achieved_rps']:.0f}"
            + f"  [others {r['others_cpus']:.2f} CPUs]" + (f"  ({r['why']})" if why else ""))
        return r

    def search(self, kind, proto):
        a = self.a
        trials = []
        lo, hi, rate = None, None, a.start_rate
        while len(trials) < a.max_trials:
            t = self.trial(kind, proto, rate, seed=len(trials) + 1)
            trials.append(t)
            if t["pass"]:
                lo = t
            else:
                hi = t
            if hi is None:
                rate = round(rate * 1.5, -2)
            elif lo is None:
                rate = round(rate / 1.5, -2)
            else:
                if (hi["rate"] - lo["rate"]) <= a.resolution * lo["rate"]:
                    break
                rate = round((lo["rate"] + hi["rate"]) / 2, -2)
        # The best rate again, with other seeds: how often it holds.
        confirm = [self.trial(kind, proto, lo["rate"], seed=50 + i) for i in range(a.confirm)] if lo else []
        return {"best": lo, "lowest_failing": hi, "trials": trials, "confirm": confirm,
                "best_held": 1 + sum(t["pass"] for t in confirm) if lo else 0, "best_tries": 1 + len(confirm)}

    def closed(self, kind, proto, concurrency):
        p, ports, report = self.start(kind)
        try:
            r = self.load(f"{proto}://{ports[proto]}", concurrency=concurrency, duration=self.a.trial_s, warmup=1,
                          server_pid=p.pid)
        finally:
            rep = self.stop(p, report if kind == "serve" else None)
        if rep:
            r["mean_batch"] = rep["models"]["tiny"].get("mean_batch")
        r["concurrency"] = concurrency
        r["load_avg"] = loadavg()
        log(f"  closed loop {kind:5} {proto:4} c={concurrency:4}: {r['goodput_rps']:8.0f} r/s ok, bad "
            f"{100 * r['bad_rate']:.3f} %, p99 {r['p99_us'] / 1e3:.2f} ms")
        return r

    def throughput(self):
        out = {"open": {}, "closed": {}}
        for proto in ("http", "grpc"):
            for kind in ("serve", "echo"):
                log(f"throughput search: {kind} over {proto}")
                out["open"][f"{kind}_{proto}"] = self.search(kind, proto)
        for proto in ("http", "grpc"):
            for kind in ("serve", "echo"):
                out["closed"][f"{kind}_{proto}"] = [self.closed(kind, proto, c) for c in self.a.concurrency]
        return out

    # ---- 3. Beast against cpp-httplib ----------------------------------------------------------
    def httplib(self):
        rows = []
        for conns in self.a.httplib_connections:
            for stack in ("beast", "httplib"):
                p, ports, _ = self.start("echo", extra=["--httplib", "127.0.0.1:0"])
                try:
                    url = "http://" + ports["http" if stack == "beast" else "httplib"]
                    r = self.load(url, concurrency=conns, connections=conns, duration=self.a.trial_s, warmup=1,
                                  server_pid=p.pid)
                finally:
                    self.stop(p)
                r["stack"], r["connections"] = stack, conns
                rows.append(r)
                log(f"  echo on {stack:7} {conns:5} connections: {r['goodput_rps']:8.0f} r/s ok, bad "
                    f"{100 * r['bad_rate']:.3f} %, p50 {r['p50_us'] / 1e3:.2f} ms p99 {r['p99_us'] / 1e3:.2f} ms")
        return rows


def spread(values, fmt="{:.0f}"):
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}" if values else "-"


def summarize(res, a):
    lines = []
    lat = res.get("latency")
    if lat:
        lines.append(f"\nRound trip at concurrency 1, {a.runs} runs of {a.latency_s:g} s each (µs; min–max of the "
                     "runs' percentiles; server = serve's accepted-to-outcome latency)")
        lines.append(f"{'':12} {'client p50':>12} {'client p99':>12} {'server p50':>12} {'server p99':>12} "
                     f"{'p50 − server p50':>17} {'median p50':>11}")
        for k, rows in lat["runs"].items():
            c50 = [r["p50_us"] for r in rows]
            c99 = [r["p99_us"] for r in rows]
            s50 = [r["server_p50_us"] for r in rows if "server_p50_us" in r]
            s99 = [r["server_p99_us"] for r in rows if "server_p99_us" in r]
            d = [r["p50_us"] - r["server_p50_us"] for r in rows if "server_p50_us" in r]
            lines.append(f"{k:12} {spread(c50):>12} {spread(c99):>12} {spread(s50):>12} {spread(s99):>12} "
                         f"{spread(d):>17} {statistics.median(c50):11.0f}")
        traced = {k: v for k, v in lat.get("traced", {}).items() if v}
        if traced:
            names = ["parse", "front", "queue_dispatch", "executor", "completion", "to_io", "encode", "write",
                     "server", "in_process"]
            lines.append("\nWhere the time goes at concurrency 1 (traced runs; per-stage p50 / p99 in µs; the rest of "
                         "the client's round trip is the client and the kernel)")
            lines.append(f"{'':12} " + " ".join(f"{n:>15}" for n in names) + f" {'client':>15}")
            for k, rs in traced.items():
                for r in rs:
                    st = r["stages_us"]
                    cells = [f"{st[n]['p50']:.1f} / {st[n]['p99']:.0f}" if n in st and st[n]["p50"] > 0 else "-"
                             for n in names]
                    lines.append(f"{k:12} " + " ".join(f"{c:>15}" for c in cells) +
                                 f" {r['p50_us']:.1f} / {r['p99_us']:.0f}".rjust(16))
        for proto, r in lat.get("deferred", {}).items():
            lines.append(f"(policy deferred, {proto}: client p50 {r['p50_us']:.0f} µs, p99 {r['p99_us']:.0f} µs: "
                         "deferred holds a lone request in its window, by design)")
    thr = res.get("throughput")
    if thr:
        lines.append(f"\nHighest open-loop rate with <= 1 % bad (budget {a.budget_ms:g} ms, client p99 within it, "
                     "the client keeping up)")
        lines.append(f"{'':12} {'best r/s':>9} {'held':>5} {'bad %':>7} {'p99 ms':>7} {'first fail':>11} "
                     f"{'srv CPU µs/r':>13} {'cli CPU µs/r':>13} {'vs echo':>8}")
        for k, s in thr["open"].items():
            b, h = s["best"], s["lowest_failing"]
            echo = thr["open"].get(k.replace("serve", "echo"), {}).get("best")
            ratio = f"{b['rate'] / echo['rate']:.2f}×" if (b and echo and k.startswith("serve")) else ""
            if b:
                n = b["generated"]
                lines.append(f"{k:12} {b['rate']:9.0f} {s['best_held']:>2}/{s['best_tries']:<2} "
                             f"{100 * b['bad_rate']:7.3f} {b['p99_us'] / 1e3:7.2f} "
                             f"{(h['rate'] if h else float('nan')):11.0f} {1e6 * b['server_cpu_s'] / n:13.1f} "
                             f"{1e6 * b['client_cpu_s'] / n:13.1f} {ratio:>8}")
            else:
                lines.append(f"{k:12} {'none':>9}")
        for k, s in thr["open"].items():
            if s["lowest_failing"]:
                h = s["lowest_failing"]
                lines.append(f"  {k} at {h['rate']:.0f} r/s failed: {h['why']}")
            for t in s.get("confirm", []):
                if not t["pass"]:
                    lines.append(f"  {k} at its best rate {t['rate']:.0f} r/s, again: failed: {t['why']}")
        lines.append("\nServer CPU by thread at the best rate (µs per request; threads of one name added)")
        for k, s in thr["open"].items():
            b = s["best"]
            if b and b.get("server_threads_cpu_s"):
                lines.append(f"  {k:12} " + ", ".join(f"{name} {1e6 * v / b['generated']:.1f}"
                                                       for name, v in b["server_threads_cpu_s"].items()
                                                       if 1e6 * v / b["generated"] >= 0.5))
        lines.append("\nClosed loop (requests ok per second)")
        for k, rows in thr["closed"].items():
            echo = thr["closed"].get(k.replace("serve", "echo"))
            cells = []
            for i, r in enumerate(rows):
                c = f"c={r['concurrency']}: {r['goodput_rps']:.0f}"
                if k.startswith("serve") and echo:
                    c += f" ({r['goodput_rps'] / echo[i]['goodput_rps']:.2f}×)"
                cells.append(c)
            lines.append(f"{k:12} " + ",  ".join(cells))
    hl = res.get("httplib")
    if hl:
        lines.append("\nEcho: Boost.Beast (one I/O thread) against cpp-httplib (a thread per connection), closed "
                     "loop, one request outstanding per connection")
        lines.append(f"{'connections':>11} {'Beast r/s':>10} {'httplib r/s':>12} {'Beast p99 ms':>13} "
                     f"{'httplib p99 ms':>15}")
        by = {(r["stack"], r["connections"]): r for r in hl}
        for c in a.httplib_connections:
            b, h = by[("beast", c)], by[("httplib", c)]
            lines.append(f"{c:11} {b['goodput_rps']:10.0f} {h['goodput_rps']:12.0f} {b['p99_us'] / 1e3:13.2f} "
                         f"{h['p99_us'] / 1e3:15.2f}" + (f"   (httplib bad {100 * h['bad_rate']:.1f} %)"
                                                          if h["bad_rate"] > 0.01 else ""))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--runs", type=int, default=5, help="latency runs per transport and server (5)")
    ap.add_argument("--latency-s", type=float, default=6, help="seconds of each latency run (6)")
    ap.add_argument("--trial-s", type=float, default=5, help="seconds of each throughput trial, 1 of warm-up (5)")
    ap.add_argument("--budget-ms", type=float, default=25,
                    help="each request's budget in the open-loop search, sent as its timeout / deadline (25)")
    ap.add_argument("--slo-ms", type=float, default=25, help="the model's SLO (25)")
    ap.add_argument("--start-rate", type=float, default=20000, help="the search's first rate (20000)")
    ap.add_argument("--max-trials", type=int, default=8, help="trials per search at most (8)")
    ap.add_argument("--resolution", type=float, default=0.07, help="the search stops within this fraction (0.07)")
    ap.add_argument("--confirm", type=int, default=2, help="trials of the best rate again, other seeds (2)")
    ap.add_argument("--concurrency", type=int, nargs="*", default=[16, 64], help="closed-loop concurrencies")
    ap.add_argument("--httplib-connections", type=int, nargs="*", default=[1, 64, 1024])
    ap.add_argument("--server-cpus", default="", help="taskset CPU list of the servers (default: not pinned)")
    ap.add_argument("--client-cpus", default="", help="taskset CPU list of the client (default: not pinned)")
    ap.add_argument("--quiet-cpus", type=float, default=0.2,
                    help="before each load run, wait until the rest of the machine uses less than this many CPUs (0.2)")
    ap.add_argument("--quiet-wait-s", type=float, default=60, help="... for at most this long per run (60)")
    ap.add_argument("--quiet-budget-s", type=float, default=240, help="... and this long in all (240)")
    ap.add_argument("--only", nargs="*", default=["latency", "throughput", "httplib"],
                    choices=["latency", "throughput", "httplib"])
    ap.add_argument("--trace-runs", type=int, default=1,
                    help="latency runs per transport and server with the stage times on (SYMPHONY_FRONT_TRACE; 1)")
    ap.add_argument("--no-deferred", dest="deferred", action="store_false",
                    help="skip the two runs under policy deferred")
    a = ap.parse_args()
    b = Bench(a)
    res = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(), "nproc": os.cpu_count(), "load_avg_start": loadavg(),
        "git": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip(),
        "options": vars(a),
    }
    log(f"front_bench: {res['date']}, nproc {res['nproc']}, load average {res['load_avg_start']}, servers on "
        f"CPUs {a.server_cpus or 'any'}, client on CPUs {a.client_cpus or 'any'}")
    t0 = time.time()
    try:
        if "latency" in a.only:
            res["latency"] = b.latency()
        if "throughput" in a.only:
            res["throughput"] = b.throughput()
        if "httplib" in a.only:
            res["httplib"] = b.httplib()
    finally:
        b.cleanup()
    res["load_avg_end"] = loadavg()
    res["waited_for_quiet_s"] = b.waited_s
    res["seconds"] = time.time() - t0
    table = summarize(res, a)
    res["table"] = table
    print(table)
    print(f"\nload average at start {res['load_avg_start']}, at end {res['load_avg_end']}; {res['seconds']:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
