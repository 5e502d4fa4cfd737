#!/usr/bin/python3
"""Benchmarks of the Python bindings (issue 6); results in bench/results/python.md.

Two bars:
  1. Python-side overhead per infer() <= 30 us: the time a Python infer() call
     takes against the C++ path (Server::infer_async from C++ threads) on the
     same server in the same run, and what each request costs in all (the
     call plus completing its future on the completion thread).
  2. 8 Python threads push >= 50 k requests/s into a server on emulated
     devices.

Usage (after `cmake --build --preset release`; the C++ path is the module
symphony_bench, built from bench/python_bench.cc into build/release/bench):

    PYTHONPATH=build/release/bindings/python:build/release/bench /usr/bin/python3 bench/bench_python.py \
        [--models build/release/tests/models] [--repeats 5]

Every figure is measured `--repeats` times, interleaving the Python and C++
paths; the tables show each run and the median. The machine's load average
is printed before each part: on a shared machine, compare runs taken side by
side only.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import threading
import time
from concurrent.futures import Future

import torch

import symphony
import symphony_bench  # bench/python_bench.cc
from symphony import _core


def submit_cpp(s: symphony.Server, model: str, n: int, threads: int, x=None, rate: float = 0.0):
    """Server::infer_async from C++ threads on the same server: (seconds, requests ok or late)."""
    example = torch.utils.dlpack.to_dlpack(x) if x is not None else None
    return symphony_bench.submit_cpp(s._core._native_handle(), model, n, threads, example, rate)


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def emulated_server(gpus: int = 8, margin_ms: float = 1.0) -> symphony.Server:
    # l(b) = 0.01 ms * b + 0.5 ms, max batch 128, SLO 50 ms: 8 GPUs serve
    # ~575 k req/s, far above what the clients send, so the server never limits them.
    s = symphony.Server(devices=f"emulated:{gpus}", max_pending=1 << 20, safety_margin_ms=margin_ms)
    s.add_model("m", slo_ms=50, alpha_ms=0.01, beta_ms=0.5, max_batch=128)
    s.start()
    return s


def wait_all(futs) -> int:
    """Waits for every future; returns how many ended ok (or late)."""
    return sum(1 for f in futs if f.exception() is None)


def python_calls(s: symphony.Server, model: str, x, n: int):
    """One thread, n infer() calls: (us per call, us per request until every future is done, ok)."""
    infer = s.infer
    t0 = time.perf_counter()
    futs = [infer(model, x) for _ in range(n)]
    t1 = time.perf_counter()
    ok = wait_all(futs)
    t2 = time.perf_counter()
    return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6, ok


def cpp_calls(s: symphony.Server, model: str, x, n: int) -> float:
    """One C++ thread, n infer_async() calls with a no-op callback: us per call."""
    return submit_cpp(s, model, n, 1, x)[0] / n * 1e6


def breakdown(n: int) -> dict:
    """Where a call's time goes, each measured like python_calls() (n calls in
    a loop, results kept, as a client keeps its futures)."""
    out = {}
    t0 = time.perf_counter()
    kept = [Future() for _ in range(n)]
    out["a bare concurrent.futures.Future(), created and kept"] = (time.perf_counter() - t0) / n * 1e6
    del kept
    raw = _core.Server("emulated:8", "deferred", "target_batch", 1, 1, 64, 1 << 20, 1.0, "p90", 32, 10, True, 500.0,
                       "auto", None, lambda items: None, False)
    raw.add_model("m", "", [], 50.0, 128, "auto", 0.01, 0.5)
    raw.start()
    token, submit = object(), raw.submit
    t0 = time.perf_counter()
    for _ in range(n):
        submit("m", None, None, token)
    out["_core submit alone (one shared token, no futures, no-op completion)"] = (time.perf_counter() - t0) / n * 1e6

    def submit_keeping_futures():
        kept = []
        t0 = time.perf_counter()
        for _ in range(n):
            f = Future()
            submit("m", None, None, f)
            kept.append(f)
        return (time.perf_counter() - t0) / n * 1e6

    out["_core submit with a new Future kept per call (no-op completion)"] = submit_keeping_futures()
    gc.disable()
    try:
        out["the same with Python's cyclic GC disabled"] = submit_keeping_futures()
    finally:
        gc.enable()
    raw.stop(False)
    return out


def overhead(args) -> None:
    print(f"\n## Overhead per infer() ({load()})\n")
    n = args.calls
    x = torch.randn(4)
    rows = []
    with emulated_server() as s:
        for r in range(args.repeats):
            py_call, py_total, ok = python_calls(s, "m", x, n)
            cpp_call = cpp_calls(s, "m", x, n)
            rows.append(("emulated:8", py_call, py_total, cpp_call, ok / n))
    if args.models:
        with symphony.Server(devices="cpu", safety_margin_ms=5) as s:
            s.add_model("linear", os.path.join(args.models, "linear.pt"), input="float32[4]", slo_ms=50,
                        max_batch=64, profile=os.path.join(args.models, "linear.bench.profile.yaml"))
            s.start()
            for r in range(args.repeats):
                py_call, py_total, ok = python_calls(s, "linear", x, n // 4)
                cpp_call = cpp_calls(s, "linear", x, n // 4)
                rows.append(("cpu (linear.pt)", py_call, py_total, cpp_call, ok / (n // 4)))
    print(f"{n} calls per run on emulated devices ({n // 4} on the CPU model), one client thread, "
          "torch.randn(4) inputs.\n")
    print("| server | Python infer() µs/call | Python µs/request incl. completion | C++ infer_async µs/call "
          "| overhead µs/call (Python − C++) | ok fraction |")
    print("|---|---:|---:|---:|---:|---:|")
    for server in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == server]
        for r in mine:
            print(f"| {server} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.3f} | {r[1] - r[3]:.2f} | {r[4]:.3f} |")
        med = [statistics.median(r[i] for r in mine) for i in (1, 2, 3)]
        print(f"| **{server}, median** | **{med[0]:.2f}** | **{med[1]:.2f}** | **{med[2]:.3f}** "
              f"| **{med[0] - med[2]:.2f}** | |")
    print("\nBreakdown (one thread, same load):\n")
    for name, us in breakdown(n).items():
        print(f"- {name}: {us:.2f} µs/call")


def push(s: symphony.Server, threads: int, seconds: float, rate: float = 0.0):
    """`threads` Python threads call infer() for `seconds`, as fast as they can
    or paced at `rate` requests/s in all (sleeping when ahead). Returns
    (pushed req/s, resolved req/s, ok fraction, requests, per-thread counts)."""
    x = torch.randn(4)
    stop_at = [0.0]
    counts = [0] * threads
    futs = [[] for _ in range(threads)]
    start = threading.Barrier(threads + 1)

    def client(k):
        infer, mine = s.infer, futs[k]
        start.wait()
        t0 = time.perf_counter()
        while time.perf_counter() < stop_at[0]:
            for _ in range(10):
                mine.append(infer("m", x))
            if rate > 0:
                ahead = t0 + len(mine) * threads / rate - time.perf_counter()
                if ahead > 0:
                    time.sleep(ahead)
        counts[k] = len(mine)

    ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    t0 = time.perf_counter()
    stop_at[0] = t0 + seconds
    start.wait()
    for t in ts:
        t.join()
    t1 = time.perf_counter()
    total = sum(counts)
    ok = sum(wait_all(f) for f in futs)
    t2 = time.perf_counter()
    return total / (t1 - t0), total / (t2 - t0), ok / total, total, counts


def throughput(args) -> None:
    for rate in (0.0, args.paced_rate):
        what = "as fast as they can" if rate == 0 else f"paced at {rate:,.0f} req/s in all"
        print(f"\n## {args.threads} Python threads pushing requests, {what} ({load()})\n")
        rows = []
        for r in range(args.repeats):
            with emulated_server(margin_ms=5) as s:
                pushed, resolved, ok, total, counts = push(s, args.threads, args.seconds, rate)
                st = s.stats()["models"]["m"]
            # The same offered rate from one C++ thread, on a fresh server with the same settings.
            with emulated_server(margin_ms=5) as c:
                _, cpp_ok = submit_cpp(c, "m", total, 1, None, pushed)
            rows.append((pushed, resolved, ok, st["mean_batch"], st["latency_ms"]["p99"], cpp_ok / total,
                         min(counts), max(counts)))
        print(f"Each run: {args.threads} threads call infer() in a loop for {args.seconds:g} s, {what}, on "
              "`emulated:8` (l(b) = 0.01 ms·b + 0.5 ms, max batch 128, SLO 50 ms, deferred, safety margin 5 ms); "
              "then every future is awaited. *Pushed* = requests submitted per second of the sending window; "
              "*resolved* = requests per second until the last future was done; *ok* = the fraction that ended "
              "ok or late. *C++ at the same rate*: one C++ thread offers the same number of requests at the "
              "pushed rate to a fresh server with the same settings: the server's own ok fraction under the "
              "same conditions.\n")
        print("| run | pushed req/s | resolved req/s | ok | mean batch | p99 ms | per thread (min–max) "
              "| C++ at the same rate: ok |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for i, r in enumerate(rows):
            print(f"| {i + 1} | {r[0]:,.0f} | {r[1]:,.0f} | {r[2]:.3f} | {r[3]:.1f} | {r[4]:.1f} "
                  f"| {r[6]:,}–{r[7]:,} | {r[5]:.3f} |")
        med = [statistics.median(r[i] for r in rows) for i in range(6)]
        print(f"| **median** | **{med[0]:,.0f}** | **{med[1]:,.0f}** | {med[2]:.3f} | | | | {med[5]:.3f} |")
    secs = []
    for _ in range(args.repeats):
        with emulated_server(margin_ms=5) as c:
            secs.append(submit_cpp(c, "m", 200_000, args.threads)[0])
    print(f"\nFor scale: {args.threads} C++ threads submit 200 k requests (Server::infer_async, no-op callback) "
          f"at {200_000 / statistics.median(secs):,.0f} req/s (median of {args.repeats}).")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=os.environ.get("SYMPHONY_TEST_MODELS", "build/release/tests/models"),
                   help="directory of the test models (for the CPU-model rows); '' to skip them")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--calls", type=int, default=40_000, help="infer() calls per overhead run")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--seconds", type=float, default=3.0, help="sending window of a throughput run")
    p.add_argument("--paced-rate", type=float, default=50_000.0, help="offered rate of the paced throughput runs")
    p.add_argument("--only", choices=["overhead", "throughput"])
    args = p.parse_args()
    if args.models and not os.path.exists(os.path.join(args.models, "linear.pt")):
        args.models = ""
    print(f"# symphony Python bindings benchmark\n\ntorch {torch.__version__}, symphony {symphony.__version__}")
    if args.only in (None, "overhead"):
        overhead(args)
    if args.only in (None, "throughput"):
        throughput(args)


if __name__ == "__main__":
    main()
