#!/usr/bin/python3
"""Runs `symphony load` against oip_test_server.py and checks its report.

One case per run (--case); each starts the test server (HTTP and gRPC), runs
the built symphony binary as a process with --json, asks the server how many
requests of each class it saw, and checks that the client classified every
one of them as the protocol and Symphony's signals say, and that the counts
balance exactly (sent == ok + late + dropped + errors). No timing assertion:
where an answer's class depends on time (late by latency, or a gRPC deadline)
the checks bound it from the side time cannot change.

Every step is bounded: the server start (30 s), the load run (120 s), the
server stop (10 s).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def eq(got, want, what):
    check(got == want, "%s: got %r, want %r" % (what, got, want))


def gen_stubs(a, out):
    os.makedirs(out, exist_ok=True)
    # inference.proto imports Triton's ModelConfig from repository/proto.
    config_dir = os.path.join(os.path.dirname(a.proto), "..", "..", "repository", "proto")
    subprocess.run([a.protoc, "-I", os.path.dirname(a.proto), "-I", config_dir, "--python_out=" + out,
                    "--grpc_out=" + out, "--plugin=protoc-gen-grpc=" + a.plugin, a.proto,
                    os.path.join(config_dir, "model_config.proto")], check=True, timeout=60)


class Server:
    def __init__(self, a, work, headers, late_sleep_ms, idle_timeout=None, slow_ok_sleep_ms=0):
        ready = os.path.join(work, "ready.json")
        if os.path.exists(ready):
            os.remove(ready)
        self.log = open(os.path.join(work, "server.log"), "w")
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "oip_test_server.py"), "--stubs",
                                   os.path.join(work, "stubs"), "--ready", ready, "--headers", headers,
                                   "--late-sleep-ms", str(late_sleep_ms),
                                   "--slow-ok-sleep-ms", str(slow_ok_sleep_ms)] +
                                  (["--idle-timeout", str(idle_timeout)] if idle_timeout else []),
                                  stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit("the test server did not start; see " + self.log.name)
            time.sleep(0.05)
        with open(ready) as f:
            ports = json.load(f)
        self.http = "http://127.0.0.1:%d" % ports["http"]
        self.grpc = "grpc://127.0.0.1:%d" % ports["grpc"]

    def tallies(self):
        with urllib.request.urlopen(self.http + "/test/tallies", timeout=10) as r:
            return json.load(r)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
        self.log.close()


def run_load(a, work, args, expect_rc=0):
    cmd = [a.symphony, "load"] + args
    print("$ " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    print(r.stdout)
    print(r.stderr)
    eq(r.returncode, expect_rc, "exit status of " + " ".join(args))
    return r


def balance(rep, min_sent=100):
    eq(rep["sent"], rep["ok"] + rep["late"] + rep["dropped"] + rep["errors"], "sent == ok + late + dropped + errors")
    for name, m in rep["models"].items():
        eq(m["sent"], m["ok"] + m["late"] + m["dropped"] + m["errors"], name + ": sent balances")
        eq(sum(m["dropped_by_reason"].values()), m["dropped"], name + ": dropped_by_reason sums to dropped")
        eq(sum(m["errors_by_message"].values()), m["errors"], name + ": errors_by_message sums to errors")
    eq(rep["client"]["unaccounted"], 0, "requests the transport never ended")
    check(rep["sent"] > min_sent, "enough requests to cover every class (sent %d)" % rep["sent"])


def messages(rep):
    got = {}
    for msg, n in rep["errors_by_message"].items():
        key = ("no answer" if msg.startswith("no answer") else
               "closed" if "closed the connection" in msg else msg)
        got[key] = got.get(key, 0) + n
    return got


def check_http(rep, t, headers, late_by_latency, min_sent=100):
    """The HTTP report against the server's tallies `t` (of the http protocol)."""
    c = t["counts"]
    balance(rep, min_sent)
    # A request that fails on a connection idle for a while, before any answer, is resent once
    # (stale_retries): mostly the server had closed the connection and never saw it; a "closed"
    # request (read, then the connection closed) the server sees twice.
    retries = rep["client"]["stale_retries"]
    seen_twice = t["total"] - rep["client"]["transmitted"]
    check(0 <= seen_twice <= min(retries, c["closed"]),
          "requests the server saw (%d) = sent (%d) + closed ones resent (at most %d)" %
          (t["total"], rep["client"]["transmitted"], min(retries, c["closed"])))
    eq(c["bad"], 0, "malformed requests at the server")
    eq(rep["client"]["transmitted"], rep["sent"], "every request went out")
    if headers:
        # The server's ok that reached the client beyond its budget (a stalled machine) is late there.
        lso = rep["client"]["late_server_ok"]
        eq(rep["ok"] + lso, c["ok"] + c["slow_ok"], "ok (and ok by the server, late by the client's clock)")
        eq(rep["late"] - lso, c["late"], "late")
        # Answered ok past the budget: late as the client saw them (time cannot make them ok).
        check(lso >= c["slow_ok"], "late but ok by the server %d >= answered ok after the budget %d" %
              (lso, c["slow_ok"]))
        eq(rep["dropped_by_reason"], {k: v for k, v in {"infeasible": c["deadline"], "queue_full": c["overload"],
                                                       "shutdown": c["unavailable"]}.items() if v},
           "dropped_by_reason (Symphony's headers)")
    else:
        eq(rep["ok"] + rep["late"], c["ok"] + c["slow_ok"] + c["late"], "ok + late")
        if late_by_latency:
            check(rep["late"] >= c["late"] + c["slow_ok"],
                  "late %d >= the %d answered after the budget" % (rep["late"], c["late"] + c["slow_ok"]))
        eq(rep["dropped_by_reason"], {k: v for k, v in {"deadline": c["deadline"], "resource_exhausted": c["overload"],
                                                       "unavailable": c["unavailable"]}.items() if v},
           "dropped_by_reason (by status)")
    want = {"HTTP 500: test failure": c["error"], "closed": c["closed"] - seen_twice, "no answer": c["hang"]}
    eq(messages(rep), {k: v for k, v in want.items() if v}, "errors by message")
    eq(rep["errors"], c["error"] + c["closed"] - seen_twice + c["hang"], "errors")
    eq(rep["client"]["no_answer"], c["hang"], "no answer within the drain")


def check_grpc(rep, t, headers):
    c = t["counts"]
    balance(rep)
    eq(c["bad"], 0, "malformed requests at the server")
    eq(t["total"], rep["sent"], "requests the server saw")
    reasons = dict(rep["dropped_by_reason"])
    deadline = reasons.pop("deadline", 0)
    # The hung request (and, on a stalled machine, any other answer) ends at the client's deadline.
    if headers:
        lso = rep["client"]["late_server_ok"]
        eq(rep["late"] - lso, c["late"], "late")
        eq(rep["ok"] + lso + deadline, c["ok"] + c["hang"], "ok + dropped at the client's deadline")
        check(deadline >= c["hang"], "dropped deadline %d >= hung %d" % (deadline, c["hang"]))
        eq(reasons, {k: v for k, v in {"infeasible": c["deadline"], "queue_full": c["overload"],
                                       "shutdown": c["unavailable"]}.items() if v}, "dropped_by_reason (trailers)")
        want = {"INTERNAL: test failure": c["error"]}
    else:
        # Late answers come after the deadline: gRPC ends them there, as DEADLINE_EXCEEDED.
        eq(rep["ok"] + rep["late"] + deadline, c["ok"] + c["late"] + c["deadline"] + c["hang"],
           "ok + late + dropped deadline")
        check(deadline >= c["deadline"] + c["late"] + c["hang"],
              "dropped deadline %d >= %d" % (deadline, c["deadline"] + c["late"] + c["hang"]))
        eq(reasons, {k: v for k, v in {"resource_exhausted": c["overload"]}.items() if v},
           "other drop reasons (by status)")
        want = {"INTERNAL: test failure": c["error"],
                "UNAVAILABLE: dropped by the test server (unavailable)": c["unavailable"]}
    eq(messages(rep), {k: v for k, v in want.items() if v}, "errors by message")


def check_grpc_timeout(rep, t):
    """--grpc-budget timeout: the budget goes as the `timeout` parameter on a
    call without a deadline, so no call ends at the client's deadline: the
    hung request is "no answer" after the drain, the server's drops keep
    their reasons, and every request carried the parameter within its budget."""
    c = t["counts"]
    balance(rep)
    eq(c["bad"], 0, "malformed requests at the server")
    eq(t["total"], rep["sent"], "requests the server saw")
    eq(rep["grpc_budget"], "timeout", "the report's grpc_budget")
    eq(t["requests_with_budget"], t["total"], "every request carried its timeout parameter")
    check(0 < t["max_budget_us"] <= 1000000, "the timeout parameter (%d us) within the budget" % t["max_budget_us"])
    eq(rep["dropped_by_reason"], {k: v for k, v in {"infeasible": c["deadline"], "queue_full": c["overload"],
                                                   "shutdown": c["unavailable"]}.items() if v},
       "dropped_by_reason (trailers; none at the client's deadline)")
    lso = rep["client"]["late_server_ok"]
    eq(rep["ok"] + lso, c["ok"], "ok (and ok by the server, late by the client's clock)")
    eq(rep["late"] - lso, c["late"], "late")
    eq(rep["client"]["no_answer"], c["hang"], "the hung request: no answer within the drain")
    eq(messages(rep), {k: v for k, v in {"INTERNAL: test failure": c["error"], "no answer": c["hang"]}.items() if v},
       "errors by message")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--symphony", required=True)
    ap.add_argument("--protoc", required=True)
    ap.add_argument("--plugin", required=True, help="grpc_python_plugin")
    ap.add_argument("--proto", required=True, help="front/proto/inference.proto")
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True,
                    choices=["http-binary", "http-json-plain", "http-closed", "http-config", "http-idle", "grpc",
                             "grpc-plain", "grpc-timeout", "errors"])
    a = ap.parse_args()
    work = a.work
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    gen_stubs(a, os.path.join(work, "stubs"))
    out = os.path.join(work, "report.json")
    common = ["--duration", "3", "--warmup", "0", "--seed", "7", "--json", out]

    case = a.case
    headers = case in ("http-binary", "http-closed", "http-config", "http-idle", "grpc", "grpc-timeout", "errors")
    late_sleep = 1500 if case == "grpc-plain" else 300
    # http-idle: the server closes connections idle 50 ms; requests 200 ms apart find theirs closed.
    # http-config: every 20th request answered ok by the server 800 ms later, past its 500 ms budget.
    server = Server(a, work, "on" if headers else "off", late_sleep, 0.05 if case == "http-idle" else None,
                    800 if case == "http-config" else 0)
    try:
        if case == "errors":
            run_errors(a, server)
            run_priorities(a, server)
        else:
            if case == "http-binary":
                run_load(a, work, ["--url", server.http, "--model", "echo", "--rate", "200", "--budget", "1000",
                                   "--drain", "2", "--connections", "8", "--http-format", "binary"] + common)
            elif case == "http-json-plain":
                run_load(a, work, ["--url", server.http, "--model", "echo", "--rate", "200", "--budget", "200",
                                   "--drain", "2", "--http-format", "json", "--arrival", "uniform"] + common)
            elif case == "http-closed":
                run_load(a, work, ["--url", server.http, "--model", "echo", "--concurrency", "4", "--budget",
                                   "1000", "--drain", "2"] + common)
            elif case == "http-config":
                cfg = os.path.join(work, "serve.yaml")
                with open(cfg, "w") as f:
                    f.write("load: {duration_s: 3, warmup_s: 0, arrival: gamma:2, seed: 3}\n"
                            "models:\n  - {name: echo, slo_ms: 500, rate: 150, alpha_ms: 1, beta_ms: 1}\n")
                run_load(a, work, ["--url", server.http, "--config", cfg, "--drain", "2", "--json", out])
            elif case == "http-idle":
                run_load(a, work, ["--url", server.http, "--model", "echo", "--rate", "5", "--arrival", "uniform",
                                   "--budget", "1000", "--drain", "1", "--duration", "5", "--warmup", "0", "--seed",
                                   "7", "--json", out])
            elif case == "grpc":
                run_load(a, work, ["--url", server.grpc, "--model", "echo", "--rate", "200", "--budget", "2000",
                                   "--connections", "2"] + common)
            elif case == "grpc-plain":
                run_load(a, work, ["--url", server.grpc, "--model", "echo", "--rate", "200", "--budget", "1000",
                                   "--drain", "2"] + common)
            elif case == "grpc-timeout":
                run_load(a, work, ["--url", server.grpc, "--model", "echo", "--rate", "200", "--budget", "1000",
                                   "--drain", "2", "--grpc-budget", "timeout"] + common)
            with open(out) as f:
                rep = json.load(f)
            t = server.tallies()
            print("server tallies: " + json.dumps(t))
            eq(list(rep["models"]), ["echo"], "models in the report")
            if case.startswith("http"):
                check_http(rep, t["http"], headers, late_by_latency=not headers,
                           min_sent=15 if case == "http-idle" else 100)
                if case == "http-idle":
                    check(rep["client"]["stale_retries"] >= 1,
                          "requests resent after the server closed their idle connection (%d)" %
                          rep["client"]["stale_retries"])
                budget_us = 500000 if case == "http-config" else (200000 if case == "http-json-plain" else 1000000)
                eq(t["http"]["requests_with_budget"], t["http"]["total"] - t["http"]["counts"]["bad"],
                   "every request carried its timeout")
                check(0 < t["http"]["max_budget_us"] <= budget_us,
                      "the timeout parameter (%d us) within the budget (%d us)" % (t["http"]["max_budget_us"],
                                                                                  budget_us))
                if case == "http-config":
                    eq(rep["models"]["echo"]["budget_ms"], 500.0, "the budget is the config's SLO")
                    eq(rep["arrival"], "gamma:2", "the config's arrival process")
                if case == "http-closed":
                    eq(rep["mode"], "closed", "mode")
                    check(rep["client"]["peak_connections"] <= 4 + 1, "closed loop of 4 needs at most 5 connections")
            elif case == "grpc-timeout":
                check_grpc_timeout(rep, t["grpc"])
            else:
                check_grpc(rep, t["grpc"], headers)
                budget_us = 2000000 if case == "grpc" else 1000000
                # gRPC sends the deadline as a timeout rounded up to a few significant digits.
                check(0 < t["grpc"]["max_budget_us"] <= budget_us * 1.02 + 20000,
                      "the gRPC deadline (%d us) within the budget (%d us)" % (t["grpc"]["max_budget_us"], budget_us))
    finally:
        server.stop()
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


def run_errors(a, server):
    """Failures before the run: each a clear message and a nonzero exit, quickly."""
    base = ["--rate", "10", "--duration", "1", "--connect-timeout", "3", "--quiet"]
    dead = free_port()
    r = run_load(a, None, ["--url", "http://127.0.0.1:%d" % dead, "--model", "echo"] + base, 1)
    check("cannot connect to" in r.stderr, "unreachable HTTP endpoint says so")
    r = run_load(a, None, ["--url", "grpc://127.0.0.1:%d" % dead, "--model", "echo"] + base, 1)
    check("cannot reach" in r.stderr, "unreachable gRPC endpoint says so")
    r = run_load(a, None, ["--url", server.http, "--model", "nope"] + base, 1)
    check("model 'nope' is not served" in r.stderr, "unknown model over HTTP says so")
    r = run_load(a, None, ["--url", server.grpc, "--model", "nope"] + base, 1)
    check("model 'nope' is not served" in r.stderr, "unknown model over gRPC says so")
    r = run_load(a, None, ["--url", server.http, "--model", "broken"] + base, 1)
    check("unusable" in r.stderr and "FP99" in r.stderr, "unusable metadata says so")
    r = run_load(a, None, ["--url", "https://127.0.0.1:1", "--model", "echo"] + base, 2)
    check("http:// or grpc://" in r.stderr, "a bad URL says so")
    r = run_load(a, None, ["--url", server.http, "--model", "echo", "--budget", "slo"] + base, 2)
    check("--budget slo needs --config" in r.stderr, "--budget slo without a config says so")
    # A request whose budget went by before the client could send it (here a
    # budget of 1 ns: gone by the send) is not sent, over either protocol:
    # dropped "client_expired", never reaching the server.
    for proto, url in (("http", server.http), ("grpc", server.grpc)):
        before = server.tallies()[proto]["total"]
        r = run_load(a, None, ["--url", url, "--model", "echo", "--rate", "50", "--duration", "1", "--warmup",
                               "0", "--drain", "1", "--budget", "0.000001", "--quiet", "--json", "-"], 0)
        try:
            rep = json.loads(r.stdout)
        except ValueError as e:
            check(False, proto + ": the expired run's report (%s)" % e)
            continue
        check(rep["sent"] > 10, proto + ": requests generated (%d)" % rep["sent"])
        eq(rep["dropped_by_reason"], {"client_expired": rep["sent"]}, proto + ": every request client_expired")
        eq(rep["client"]["transmitted"], 0, proto + ": requests transmitted")
        eq(server.tallies()[proto]["total"], before, proto + ": requests the server saw")
    # JSON on stdout: the summary goes to stderr, stdout is the report alone.
    r = run_load(a, None, ["--url", server.http, "--model", "echo", "--rate", "50", "--duration", "1", "--warmup",
                           "0", "--drain", "1", "--quiet", "--json", "-"], 0)
    try:
        rep = json.loads(r.stdout)
        balance_small(rep)
    except ValueError as e:
        check(False, "--json - writes the report alone to stdout (%s)" % e)


def run_priorities(a, server):
    """--priority sends Triton's `priority` parameter on REST and gRPC, drawn
    by share, and the report counts each priority apart (the server's own
    tallies say what arrived); a malformed --priority exits 2 naming it."""
    before = server.tallies()
    reports = {}
    for proto, url in (("http", server.http), ("grpc", server.grpc)):
        r = run_load(a, None, ["--url", url, "--model", "echo", "--rate", "200", "--duration", "1", "--warmup", "0",
                               "--drain", "2", "--budget", "1000", "--priority", "1:1,2:3", "--quiet", "--json",
                               "-"], 0)
        try:
            reports[proto] = json.loads(r.stdout)
        except ValueError as e:
            check(False, "--priority: the report (%s)" % e)
            return
    after = server.tallies()
    for proto, rep in reports.items():
        m = rep["models"]["echo"]
        by = m.get("by_priority", {})
        eq(sorted(by), ["1", "2"], proto + ": by_priority's priorities")
        if sorted(by) != ["1", "2"]:
            continue
        eq(by["1"]["sent"] + by["2"]["sent"], m["sent"], proto + ": by_priority's sent adds up")
        for p, c in by.items():
            eq(c["sent"], c["ok"] + c["late"] + c["dropped"] + c["errors"], proto + ": priority %s balances" % p)
        check(0 < by["1"]["sent"] < by["2"]["sent"], proto + ": shares 1:3 (%d vs %d)" % (by["1"]["sent"],
                                                                                           by["2"]["sent"]))
        got = {k: v - before[proto]["priorities"].get(k, 0) for k, v in after[proto]["priorities"].items()}
        got = {k: v for k, v in got.items() if v}
        # Each request sent arrived with its priority (a request the server closed
        # the connection under may be resent once: stale_retries).
        eq(sorted(got), ["1", "2"], proto + ": the priorities the server saw")
        for p in ("1", "2"):
            check(by[p]["sent"] <= got.get(p, 0) <= by[p]["sent"] + rep["client"]["stale_retries"],
                  proto + ": priority %s: the server saw %d, the report sent %d" % (p, got.get(p, 0), by[p]["sent"]))
    base = ["--url", server.http, "--model", "echo", "--rate", "10", "--duration", "1", "--quiet"]
    for bad, says in (("x", "'x' is not a priority"), ("1:0", "shares must be positive"),
                      ("1,1", "priority 1 is given twice"), ("1:x", "is not a priority")):
        r = run_load(a, None, base + ["--priority", bad], 2)
        check(says in r.stderr, "--priority %s says %r (%s)" % (bad, says, r.stderr.strip()))


def balance_small(rep):
    eq(rep["sent"], rep["ok"] + rep["late"] + rep["dropped"] + rep["errors"], "sent == ok + late + dropped + errors")


if __name__ == "__main__":
    sys.exit(main())
