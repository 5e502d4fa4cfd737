#!/usr/bin/env python3
"""What a mix of input lengths costs a model whose input is int64[-1], in process.

  PYTHONPATH=build/release/bindings/python /usr/bin/python3 bench/varlen_bench.py \\
      [--rate 150] [--seconds 10] [--runs 3] [--json FILE]

A batch of such a model runs one forward per length among its samples (docs/serving.md#profiles).
A small TorchScript text encoder (token embedding 1000 x 64, one TransformerEncoderLayer of width 64
and 4 heads, the mean over tokens: [k, L] int64 -> [k, 64]) is served by symphony.Server on one CPU
device (1 thread), policy deferred, SLO 100 ms, max batch 16, profiled at int64[32]. Each run sends
an open-loop Poisson load of `--rate` requests/s for `--seconds` to it, the lengths of one workload:

  uniform  every request 32 tokens
  three    16, 32 or 48 tokens (one in three each; mean 32)
  eight    4, 12, 20, ..., 60 tokens (one in eight each; mean 32)

All three send the same tokens on average; only how many lengths share a batch differs. Reports per
workload the requests that ended ok (by their deadline) per second, the bad ones (late or dropped),
the latency p50/p99 and the mean batch, each as min-max over the runs.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time

import torch

import symphony

WORKLOADS = {
    "uniform": [32],
    "three": [16, 32, 48],
    "eight": [4, 12, 20, 28, 36, 44, 52, 60],
}


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.embed = torch.nn.Embedding(1000, 64)
        self.layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)

    def forward(self, ids):
        return self.layer(self.embed(ids)).mean(1)


def one_run(path, profile, lengths, rate, seconds, seed):
    rng = random.Random(seed)
    inputs = {n: torch.randint(0, 1000, (n,)) for n in lengths}
    with symphony.Server(devices="cpu", policy="deferred", cpu_threads=1) as s:
        s.add_model("encoder", path, input="int64[-1]", profile_inputs=["int64[32]"], slo_ms=100,
                    max_batch=16, profile=profile)
        s.start()
        futures = []
        start = time.monotonic()
        t = start
        while t - start < seconds:
            t += rng.expovariate(rate)
            delay = t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures.append(s.infer("encoder", inputs[rng.choice(lengths)]))
        for f in futures:
            try:
                f.result(timeout=30)
            except symphony.SymphonyError:
                pass  # dropped: counted by the server
        m = s.stats()["models"]["encoder"]
        elapsed = time.monotonic() - start
    return {"sent": m["sent"], "ok": m["ok"], "bad": m["sent"] - m["ok"],
            "good_rps": m["ok"] / elapsed, "p50_ms": m["latency_ms"]["p50"],
            "p99_ms": m["latency_ms"]["p99"], "mean_batch": m["mean_batch"]}


def span(values, fmt="%.1f"):
    return (fmt + "-" + fmt) % (min(values), max(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=150)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", help="write every figure here")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="symphony-varlen-")
    path = os.path.join(work, "encoder.pt")
    torch.jit.script(Encoder().eval()).save(path)
    profile = os.path.join(work, "encoder.profile.yaml")  # measured by the first run, reused after
    results = {name: [] for name in WORKLOADS}
    for run in range(a.runs):
        for name, lengths in WORKLOADS.items():  # interleaved: drift hits every workload alike
            r = one_run(path, profile, lengths, a.rate, a.seconds, seed=run)
            results[name].append(r)
            print("run %d, %s: %d sent, %d ok, %d bad, good %.1f r/s, p50 %.1f ms, p99 %.1f ms, mean batch %.2f"
                  % (run + 1, name, r["sent"], r["ok"], r["bad"], r["good_rps"], r["p50_ms"], r["p99_ms"],
                     r["mean_batch"]), flush=True)
    print()
    print("| lengths | good r/s (min-max over %d runs) | bad / sent | p50 (ms) | p99 (ms) | mean batch |" % a.runs)
    print("|---|---:|---:|---:|---:|---:|")
    for name, rs in results.items():
        bad, sent = sum(r["bad"] for r in rs), sum(r["sent"] for r in rs)
        print("| %s | %s | %d / %d (%.1f %%) | %s | %s | %s |" % (
            name, span([r["good_rps"] for r in rs]), bad, sent, 100.0 * bad / max(sent, 1),
            span([r["p50_ms"] for r in rs]), span([r["p99_ms"] for r in rs]),
            span([r["mean_batch"] for r in rs], "%.2f")))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "workloads": WORKLOADS, "runs": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
