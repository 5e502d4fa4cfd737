#!/usr/bin/python3
"""The worst of several runs of bench/overload_bench.py (--only runtime serve):
per configuration and point, goodput with admission on over that run's peak
(its best point with admission on), its range across the runs, and the
priorities' losses. Prints a Markdown table.

    for i in 1 2 3; do /usr/bin/python3 bench/overload_bench.py --only runtime serve --out /tmp/ob/run$i; done
    /usr/bin/python3 bench/experiments/overload_worst.py /tmp/ob/run*/overload.json
"""
import json
import sys


def points(data):
    """(configuration, point label, offered r/s, goodput r/s, admission, p99 ms, share of the
    requests the client sent late or None) of one run."""
    for name, pts in data.get("runtime", {}).items():
        for k, p in enumerate(pts):  # each rate twice, admission off then on: the k-th rate in every run
            yield name, f"rate {k // 2 + 1}", p["offered_rps"], p["goodput_rps"], p["admission"], None, None
    for name, s in data.get("serve", {}).items():
        for p in s["points"]:
            label = f"open {p['multiple']:g}x" if p["loop"] == "open" else f"closed, {p['concurrency']}"
            late = p.get("client_sent_late")
            late = late / p["sent"] if late is not None and p["sent"] else None
            yield name, label, p["offered_rps"] or 0, p["goodput_rps"], p["admission"], p["p99_ms"], late


def main(paths):
    runs = []
    for path in paths:
        with open(path) as f:
            runs.append(json.load(f))
    # configuration -> label -> [(goodput, ratio to the run's peak, p99)] per run, admission on
    table, order = {}, []
    for data in runs:
        peak = {}
        for name, _, _, good, adm, _, _ in points(data):
            if adm == "on":
                peak[name] = max(peak.get(name, 0), good)
        for name, label, offered, good, adm, p99, late in points(data):
            if adm != "on":
                continue
            if name not in table:
                table[name] = {}
                order.append(name)
            table[name].setdefault(label, []).append(
                (good, good / peak[name] if peak[name] else 0, p99, offered, late))
    print(f"{len(runs)} runs; goodput with admission on over the same run's peak: worst (range), goodput r/s "
          "range, p99 ms range\n")
    # A client that sent many requests late (short of CPU beside the server) measures itself.
    print("| configuration | point | offered r/s | worst of the runs | range | goodput r/s | p99 ms | "
          "sent late by the client |")
    print("|---|---|---|---:|---|---|---|---|")
    for name in order:
        for label, vals in table[name].items():
            ratios = [v[1] for v in vals]
            goods = [v[0] for v in vals]
            offered = [v[3] for v in vals]
            p99s = [v[2] for v in vals if v[2] is not None]
            p99 = f"{min(p99s):.0f}–{max(p99s):.0f}" if p99s else ""
            lates = [v[4] for v in vals if v[4] is not None]
            late = f"{100 * max(lates):.1f} % at most" if lates else ""
            print(f"| {name} | {label} | {min(offered):.0f}–{max(offered):.0f} | {min(ratios):.2f} | "
                  f"{min(ratios):.2f}–{max(ratios):.2f} | {min(goods):.0f}–{max(goods):.0f} | {p99} | {late} |")
    print()
    for i, data in enumerate(runs, 1):
        for p in data.get("priorities", []):
            print(f"run {i}: two priorities at 3x, admission {p['admission']}: high lost "
                  f"{100 * p['lost'][0]:.2f} %, low {100 * p['lost'][1]:.2f} %")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
