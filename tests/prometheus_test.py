#!/usr/bin/python3
"""A real Prometheus scrapes Symphony: serve, the cluster scheduler and a backend.

Starts `symphony scheduler` and one `symphony backend` (2 emulated GPUs) over
UCX on loopback and `symphony serve` (2 emulated devices), each with
--metrics 127.0.0.1:0; starts Debian's /usr/bin/prometheus on loopback (free
port, a temporary storage directory, scrape_interval 1s) scraping the three;
drives a bounded load through the cluster (`symphony loadgen`) and through
serve (its own load generator); then waits until Prometheus has scraped after
the work was done and checks through its query API (/api/v1/query) that the
counters it stored equal the processes' own totals: serve's JSON report and
the scheduler's --json report, the models' profile recalibration included
(serve recalibrates by default: recalibrating is 1, batches were measured).

    prometheus_test.py SYMPHONY_CLI CLUSTER_YAML

Exit 0: passed; 1: failed (the reason on stderr); 77: skipped (no
/usr/bin/prometheus). Every wait is bounded; every child is killed on every
exit path.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

PROMETHEUS = "/usr/bin/prometheus"
CHILDREN = []


class Failure(Exception):
    pass


def start(name, args, workdir):
    log = open(os.path.join(workdir, name + ".log"), "w")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, start_new_session=True)
    p.name, p.logfile = name, log.name
    CHILDREN.append(p)
    return p


def kill_all():
    for p in CHILDREN:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    for p in CHILDREN:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=5)


def tail(p, n=30):
    try:
        with open(p.logfile) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def wait_for(what, fn, timeout, procs=()):
    """Polls fn() until it returns a true value; fails after `timeout` s or when a process in `procs` exits."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise Failure(f"{p.name} exited ({p.returncode}) while waiting for {what}:\n{tail(p)}")
        try:
            v = fn()
            if v:
                return v
        except (OSError, ValueError, KeyError, urllib.error.URLError) as e:
            last = e
        time.sleep(0.25)
    raise Failure(f"timed out after {timeout} s waiting for {what}" + (f" (last error: {last})" if last else ""))


def metrics_address(p):
    with open(p.logfile) as f:
        for line in f:
            if "metrics: listening on http://" in line:
                return line.split("http://", 1)[1].split("/metrics", 1)[0].strip()
    return None


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prom:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr):
        url = self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        _, body = http_get(url)
        d = json.loads(body)
        if d.get("status") != "success":
            raise Failure(f"Prometheus refused the query {expr}: {body}")
        return d["data"]["result"]

    def value(self, expr):
        """The single value of `expr`, or None when it has no sample."""
        r = self.query(expr)
        if not r:
            return None
        if len(r) != 1:
            raise Failure(f"{expr}: {len(r)} series, expected one: {r}")
        return float(r[0]["value"][1])


def run(cli, cluster_yaml, work):
    # ---- the cluster: scheduler + one backend ----
    sched = start("scheduler", [cli, "scheduler", "--listen", "127.0.0.1:0", "--config", cluster_yaml,
                                "--port-file", "port", "--json", "scheduler.json",
                                "--metrics", "127.0.0.1:0"], work)
    port = wait_for("the scheduler's port file",
                    lambda: open(os.path.join(work, "port")).read().strip(), 30, [sched])
    sched_metrics = wait_for("the scheduler's metrics address", lambda: metrics_address(sched), 30, [sched])
    # No backend yet: not ready, and says why.
    try:
        code, body = http_get(f"http://{sched_metrics}/readyz")
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read().decode()
    if code != 503 or "no backend GPU registered" not in body:
        raise Failure(f"the scheduler's /readyz before any backend: {code} {body!r}, expected 503 naming the cause")
    backend = start("backend", [cli, "backend", "--scheduler", "127.0.0.1:" + port, "--devices", "emulated:2",
                                "--config", cluster_yaml, "--name", "b1", "--metrics", "127.0.0.1:0"], work)
    backend_metrics = wait_for("the backend's metrics address", lambda: metrics_address(backend), 30, [backend])

    def ready(addr):
        try:
            return http_get(f"http://{addr}/readyz")[0] == 200
        except urllib.error.HTTPError:
            return False
    wait_for("the scheduler's /readyz (a backend registered)", lambda: ready(sched_metrics), 30, [sched, backend])
    wait_for("the backend's /readyz", lambda: ready(backend_metrics), 30, [backend])

    # ---- serve: runs its bounded load now, keeps /metrics up afterwards ----
    with open(os.path.join(work, "serve.yaml"), "w") as f:
        f.write("devices: emulated:2\n"
                "load: {duration_s: 4, warmup_s: 1, seed: 3}\n"
                "models:\n"
                "  - {name: fast, alpha_ms: 1, beta_ms: 4, slo_ms: 30, rate: 150}\n"
                "  - {name: tight, alpha_ms: 2, beta_ms: 6, slo_ms: 9, rate: 120}\n")
    serve = start("serve", [cli, "serve", "serve.yaml", "--quiet", "--json", "serve.json",
                            "--metrics", "127.0.0.1:0", "--metrics-linger", "150"], work)
    serve_metrics = wait_for("serve's metrics address", lambda: metrics_address(serve), 60, [serve])

    # ---- Prometheus ----
    prom_port = free_port()
    with open(os.path.join(work, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
        for job, addr in (("serve", serve_metrics), ("scheduler", sched_metrics), ("backend", backend_metrics)):
            f.write(f"  - job_name: {job}\n    static_configs:\n      - targets: ['{addr}']\n")
    prom = start("prometheus", [PROMETHEUS, "--config.file=prometheus.yml", "--storage.tsdb.path=data",
                                f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"], work)
    wait_for("Prometheus /-/ready", lambda: http_get(f"http://127.0.0.1:{prom_port}/-/ready")[0] == 200, 60, [prom])
    P = Prom(prom_port)

    # ---- bounded load through the cluster ----
    lg = subprocess.run([cli, "loadgen", "--scheduler", "127.0.0.1:" + port, "--config", cluster_yaml,
                         "--duration", "3", "--rate", "300", "--json", "loadgen.json", "--quiet"],
                        cwd=work, capture_output=True, text=True, timeout=60)
    if lg.returncode != 0:
        raise Failure(f"loadgen failed ({lg.returncode}): {lg.stderr[-2000:]}")

    # ---- the processes' own totals once the work is done ----
    serve_report = wait_for("serve's JSON report", lambda: json.load(open(os.path.join(work, "serve.json"))),
                            90, [serve, prom])

    # loadgen's goodbye follows its last submission on the same connection: once the scheduler has
    # seen it leave, nothing more arrives (on a busy machine its submissions can still be queued
    # after loadgen exits, so every request ended is not enough by itself).
    def settled_scheduler_report():
        r = json.load(open(os.path.join(work, "scheduler.json")))
        a = r["at_scheduler"]
        ended = a["ok"] + a["late"] + a["dropped"] + a["errors"]
        refused = sum(r["refused_requests"].values())
        left = r["peers"]["frontends_lost"] >= r["peers"]["frontends_joined"] > 0
        return r if left and r["submitted"] > 0 and ended + refused == r["submitted"] else None
    sched_report = wait_for("the scheduler's report with loadgen gone and every request ended",
                            settled_scheduler_report, 30, [sched, backend])
    # The report is rewritten every second: it is final when two readings a second apart agree.
    time.sleep(1.2)
    again = settled_scheduler_report()
    if again is None or again["submitted"] != sched_report["submitted"] or again["at_scheduler"] != sched_report["at_scheduler"]:
        raise Failure(f"the scheduler's totals still move after the load: {sched_report} then {again}")
    done_at = time.time()

    # ---- wait until Prometheus scraped all three after the work was done ----
    def scraped_after_done():
        for job in ("serve", "scheduler", "backend"):
            ts = P.value(f'timestamp(up{{job="{job}"}})')
            up = P.value(f'up{{job="{job}"}}')
            if ts is None or ts <= done_at or up != 1:
                return False
        return True
    wait_for("a scrape of serve, scheduler and backend after the work was done", scraped_after_done, 60,
             [serve, sched, backend, prom])

    # ---- serve: Prometheus' counters equal serve's JSON report ----
    checks = 0
    def ms_of(seconds):
        return None if seconds is None else 1e3 * seconds
    def expect(what, got, want):
        nonlocal checks
        checks += 1
        if got is None or abs(got - want) > 1e-9:
            raise Failure(f"{what}: Prometheus has {got}, the process says {want}")
    # The server counts every request it ended since start, whatever sent it: the
    # report's "server" section (the load's own table covers the measured window).
    for model, m in serve_report["server"]["models"].items():
        sel = f'job="serve",model="{model}"'
        expect(f"serve {model} sent", P.value(f"symphony_requests_sent_total{{{sel}}}"), m["sent"])
        for outcome, key in (("ok", "ok"), ("late", "late"), ("dropped", "dropped"), ("error", "errors")):
            expect(f"serve {model} {outcome}", P.value(f'symphony_requests_total{{{sel},outcome="{outcome}"}}'),
                   m[key])
        for reason, n in m["dropped_by_reason"].items():
            expect(f"serve {model} dropped ({reason})",
                   P.value(f'symphony_requests_dropped_total{{{sel},reason="{reason}"}}'), n)
        expect(f"serve {model} dropped, summed over reasons",
               P.value(f"sum(symphony_requests_dropped_total{{{sel}}})"), m["dropped"])
        expect(f"serve {model} latency count (ok + late)",
               P.value(f"symphony_request_latency_seconds_count{{{sel}}}"), m["ok"] + m["late"])
        expect(f"serve {model} latencies recorded", m["latency_count"], m["ok"] + m["late"])
        expect(f"serve {model} batches (batch-size histogram count)",
               P.value(f"symphony_batch_size_count{{{sel}}}"), sum(m["batch_histogram"].values()))
        expect(f"serve {model} goodput", round(P.value(f"symphony_goodput_rps{{{sel}}}"), 6),
               round(m["goodput_rps"], 6))
        # Online recalibration (on by default in serve): the report's profile section.
        prof = serve_report["models"][model]["profile"]
        recal = P.value(f"symphony_profile_recalibrating{{{sel}}}")
        if recal != 1 or not prof["recalibrating"]:
            raise Failure(f"serve {model}: symphony_profile_recalibrating is {recal} and the report's recalibrating "
                          f"{prof['recalibrating']}; serve recalibrates by default")
        samples = P.value(f"symphony_profile_recalibration_samples_total{{{sel}}}")
        if samples is None or samples <= 0:
            raise Failure(f"serve {model}: symphony_profile_recalibration_samples_total is {samples} after the run")
        expect(f"serve {model} recalibration samples", samples, prof["samples"])
        expect(f"serve {model} recalibration updates",
               P.value(f"symphony_profile_recalibration_updates_total{{{sel}}}"), prof["updates"])
        for batch, scale in prof["scale"].items():
            expect(f"serve {model} profile scale at batch {batch}",
                   P.value(f'symphony_profile_scale{{{sel},batch="{batch}"}}'), scale)
            expect(f"serve {model} in-use l({batch}) in ms",
                   ms_of(P.value(f'symphony_profile_latency_seconds{{{sel},batch="{batch}",profile="in_use"}}')),
                   prof["in_use_ms"][batch])
    # Each device's own estimate of each model's profile (the report's devices[].models).
    estimates = 0
    for dev in serve_report["devices"]:
        for model, e in dev.get("models", {}).items():
            sel = f'job="serve",device="{dev["name"]}",model="{model}"'
            expect(f"serve {dev['name']} {model} estimate samples",
                   P.value(f"symphony_device_profile_samples_total{{{sel}}}"), e["samples"])
            for batch, ms in e["estimate_ms"].items():
                expect(f"serve {dev['name']} {model} estimated l({batch}) in ms",
                       ms_of(P.value(f'symphony_device_profile_latency_seconds{{{sel},batch="{batch}"}}')), ms)
                estimates += 1
            for batch, scale in e["scale"].items():
                expect(f"serve {dev['name']} {model} estimate scale at batch {batch}",
                       P.value(f'symphony_device_profile_scale{{{sel},batch="{batch}"}}'), scale)
    if estimates == 0:
        raise Failure("serve's report has no per-device profile estimate; serve recalibrates by default")
    for key in ("sent", "ok", "late", "dropped"):
        metric = "symphony_requests_sent_total" if key == "sent" else "symphony_requests_total"
        sel = 'job="serve"' + ("" if key == "sent" else f',outcome="{key}"')
        expect(f"serve total {key}", P.value(f"sum({metric}{{{sel}}})"), serve_report["server"][key])
    if serve_report["ok"] == 0:
        raise Failure("serve reported no ok request: the load did not run")

    # ---- scheduler: Prometheus' counters equal its report ----
    a = sched_report["at_scheduler"]
    expect("scheduler submitted", P.value('symphony_scheduler_requests_submitted_total{job="scheduler"}'),
           sched_report["submitted"])
    expect("scheduler accepted", P.value('sum(symphony_requests_accepted_total{job="scheduler"})'),
           sched_report["accepted"])
    for outcome, key in (("ok", "ok"), ("late", "late"), ("dropped", "dropped"), ("error", "errors")):
        expect(f"scheduler {outcome}", P.value(f'sum(symphony_requests_total{{job="scheduler",outcome="{outcome}"}})'),
               a[key])
    for reason, n in a["dropped_by_reason"].items():
        expect(f"scheduler dropped ({reason})",
               P.value(f'sum(symphony_requests_dropped_total{{job="scheduler",reason="{reason}"}})'), n)
    for reason, n in sched_report["refused_requests"].items():
        expect(f"scheduler refused ({reason})",
               P.value(f'symphony_scheduler_requests_refused_total{{job="scheduler",reason="{reason}"}}'), n)
    expect("scheduler queue depth after the load", P.value('sum(symphony_queue_depth{job="scheduler"})'), 0)
    # The learned delays are live gauges (heartbeats keep measuring after the
    # load, and on a busy machine a round trip swings several-fold between the
    # scrape and the report), so only their plumbing is compared: learned,
    # measured, and a plausible round trip on loopback.
    d_ctrl = P.value('symphony_delay_seconds{job="scheduler",kind="ctrl"}')
    checks += 1
    if d_ctrl is None or not (0 < d_ctrl < 1.0) or not sched_report["delays_us"]["ctrl"] > 0:
        raise Failure(f"learned d_ctrl: Prometheus has {d_ctrl} s, the process says "
                      f"{sched_report['delays_us']['ctrl']} us (expected both in (0, 1 s))")
    expect("scheduler learns its delays", P.value('symphony_delay_learned{job="scheduler"}'), 1)
    samples = P.value('symphony_delay_samples{job="scheduler"}')
    checks += 1
    if samples is None or samples < 1:
        raise Failure(f"symphony_delay_samples: Prometheus has {samples}, expected at least 1")
    expect("partition epoch", P.value('symphony_partition_epoch{job="scheduler"}'), 0)
    for model, c in again["recalibration"]["models"].items():
        sel = f'job="scheduler",model="{model}"'
        expect(f"scheduler {model} recalibrating", P.value(f"symphony_profile_recalibrating{{{sel}}}"),
               1 if again["recalibration"]["enabled"] else 0)
        expect(f"scheduler {model} recalibration samples",
               P.value(f"symphony_profile_recalibration_samples_total{{{sel}}}"), c["samples"])
        expect(f"scheduler {model} recalibration updates",
               P.value(f"symphony_profile_recalibration_updates_total{{{sel}}}"), c["updates"])
    expect("GPUs in service", P.value('symphony_autoscale_gpus{job="scheduler",subcluster="all"}'), 2)
    if a["ok"] == 0:
        raise Failure("the scheduler reported no ok request: the load did not run")

    # ---- backend: the batches it ran are the batches the scheduler sent ----
    expect("backend batches (ok + error + skipped) = batches the scheduler sent",
           P.value('sum(symphony_backend_batches_total{job="backend"})'), sched_report["batches"]["sent"])
    expect("backend batches = batches the scheduler saw done",
           P.value('sum(symphony_backend_batches_total{job="backend"})'),
           P.value('sum(symphony_gpu_batches_total{job="scheduler"})'))
    expect("backend requests run = ok + late at the scheduler",
           P.value('sum(symphony_backend_requests_total{job="backend"})'), a["ok"] + a["late"])
    print(f"prometheus_test: {checks} counters in Prometheus equal the processes' own totals "
          f"(serve: {serve_report['sent']} sent, {serve_report['ok']} ok; scheduler: {sched_report['submitted']} "
          f"submitted, {a['ok']} ok)")


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    if not os.access(PROMETHEUS, os.X_OK):
        print(f"prometheus_test SKIPPED: {PROMETHEUS} is missing (install the Debian package 'prometheus': "
              "scripts/install-deps.sh)")
        return 77
    cli, cluster_yaml = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, lambda *_: sys.exit(1))  # through the finally below
    with tempfile.TemporaryDirectory(prefix="symphony-prometheus-") as work:
        try:
            run(cli, cluster_yaml, work)
            return 0
        except (Failure, subprocess.TimeoutExpired) as e:
            print(f"prometheus_test FAILED: {e}", file=sys.stderr)
            for p in CHILDREN:
                print(f"---- {p.name} (last lines) ----\n{tail(p)}", file=sys.stderr)
            return 1
        finally:
            kill_all()


if __name__ == "__main__":
    sys.exit(main())
