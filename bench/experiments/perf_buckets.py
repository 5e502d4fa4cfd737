#!/usr/bin/env python3
"""Buckets a `perf record -a -e cpu-clock` profile by thread and by kind of code, for
bench/results/front.md: perf_buckets.py PERF_DATA PID... (the server's and the client's).

Kinds: kernel (system calls, TCP on loopback, scheduling, wake-ups), JSON (nlohmann), Beast/Asio,
gRPC/protobuf/abseil, malloc/free, libtorch (tensors made for each request), Symphony's front,
server and runtime, and the rest. Percentages are of all samples of the machine (2 CPUs = 200 %).
"""
import collections
import re
import subprocess
import sys

KINDS = [
    ("kernel", lambda dso, sym: dso.startswith("[kernel") or sym.startswith("[k]")),
    ("json", lambda dso, sym: "nlohmann" in sym),
    ("beast/asio", lambda dso, sym: "boost::" in sym),
    ("grpc/protobuf", lambda dso, sym: "grpc" in dso or "protobuf" in dso or "absl" in dso or "gpr" in dso
     or "grpc" in sym or "google::protobuf" in sym),
    ("malloc/free", lambda dso, sym: re.search(r"\b(malloc|_int_malloc|_int_free|cfree|free|operator new|operator delete|"
                                               r"malloc_consolidate|tcache)", sym) is not None),
    ("libtorch/c10", lambda dso, sym: "torch" in dso or "c10" in dso or "at::" in sym or "c10::" in sym),
    ("symphony front", lambda dso, sym: "symphony::front" in sym),
    ("symphony server/runtime", lambda dso, sym: "symphony::" in sym),
    ("libc other", lambda dso, sym: dso.startswith("libc")),
]


def main():
    data, pids = sys.argv[1], set(sys.argv[2:])
    by = collections.defaultdict(lambda: collections.Counter())
    names = {}
    total = collections.Counter()
    for want in sorted(pids) or [None]:
        cmd = ["perf", "report", "-i", data, "--no-children", "--sort", "pid,dso,sym", "-g", "none", "--stdio",
               "--percent-limit", "0", "--percentage", "absolute"] + (["--pid", want] if want else [])
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        for line in out.splitlines():
            m = re.match(r"\s+([\d.]+)%\s+(\d+):(\S+)\s+(\S+)\s+(.*)$", line)
            if not m:
                continue
            pct, tid, tname, dso, sym = m.groups()
            pct = float(pct) * 2  # of 2 CPUs: 100 % = one CPU busy
            kind = next((k for k, f in KINDS if f(dso, sym)), "other")
            by[tid][kind] += pct
            total[tid] += pct
            names[tid] = f"{want or ''}/{tid}:{tname}"
    kinds = [k for k, _ in KINDS] + ["other"]
    print(f"{'thread':38} {'CPU %':>6} " + " ".join(f"{k[:14]:>14}" for k in kinds))
    for tid, t in sorted(total.items(), key=lambda kv: -kv[1]):
        if t < 0.5:
            continue
        print(f"{names[tid][:38]:38} {t:6.1f} " + " ".join(f"{by[tid][k]:14.1f}" for k in kinds))


if __name__ == "__main__":
    main()
