#!/usr/bin/python3
"""Per thread of every running `symphony` process: the share of a core it ran
and the share it waited for one (runnable, not running), over an interval,
from /proc/<pid>/task/<tid>/schedstat; with its nice value and the mean wait
per time slice. Read-only; touches nothing else.

    bench/experiments/thread_cpu.py [--after S] [--for S]   # default: at once, 5 s

Used for bench/results/cluster.md ("Five things tried ...").
"""
import argparse
import os
import time


def snapshot():
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"symphony"):
                continue
            name = cmd[1].decode() if len(cmd) > 1 else "?"
            if b"--name" in cmd and cmd.index(b"--name") + 1 < len(cmd):
                name += ":" + cmd[cmd.index(b"--name") + 1].decode()
            for tid in os.listdir("/proc/%s/task" % pid):
                stat = open("/proc/%s/task/%s/stat" % (pid, tid)).read()
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                nice = int(stat[stat.rindex(")") + 2:].split()[16])
                run_ns, wait_ns, slices = map(int, open("/proc/%s/task/%s/schedstat" % (pid, tid)).read().split())
                out[(pid, name, tid, comm)] = (run_ns, wait_ns, slices, nice)
        except (OSError, ValueError, IndexError):  # a process or thread that ended meanwhile
            continue
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--after", type=float, default=0, help="seconds to wait before the interval")
    ap.add_argument("--for", dest="length", type=float, default=5, help="the interval, seconds")
    a = ap.parse_args()
    time.sleep(a.after)
    before, t0 = snapshot(), time.monotonic()
    time.sleep(a.length)
    after, dt = snapshot(), time.monotonic() - t0
    rows = []
    for k, (run, wait, slices, nice) in after.items():
        if k not in before:
            continue
        r0, w0, s0, _ = before[k]
        rows.append(((run - r0) / 1e9 / dt, (wait - w0) / 1e9 / dt, slices - s0, nice, k))
    print("%-22s %-16s %6s %6s %8s %5s %s" % ("process", "thread", "run", "wait", "slices", "nice", "wait/slice us"))
    for run, wait, n, nice, k in sorted(rows, key=lambda r: -r[0]):
        if run > 0.01 or wait > 0.01:
            print("%-22s %-16s %6.3f %6.3f %8d %5d %8.1f" % (k[1], k[3], run, wait, n, nice, wait * dt * 1e6 / max(n, 1)))


if __name__ == "__main__":
    main()
