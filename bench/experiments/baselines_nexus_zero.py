#!/usr/bin/env python3
"""Why Nexus's goodput is near zero where it is: for every cell of the zoo
and sensitivity results (both conditions) where a Nexus variant's goodput is
below 1 % of Symphony's, one plain run of that variant at a tenth of
Symphony's goodput on the same config, keeping its batches (sizes, mean,
median), its outcomes (late, dropped by reason) and its engine_stats (GPUs
planned, the fill's scale).

Run after baselines_zoo.py and baselines_sensitivity.py.

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/baselines_nexus_zero.py [-j 2]

Writes bench/results/baselines/nexus_zero.json.
"""
import argparse
import json
from pathlib import Path

from baselines_lib import ALL_SYSTEMS, summarize
from simlib import RESULTS, ROOT, Clock, command_line, log, pmap, save_json, simulate

FRACTION = 0.1  # of Symphony's goodput on the same config
POLICY = {s.key: s.policy for s in ALL_SYSTEMS}


def cells():
    found = []
    for condition, sub in (("zero", ""), ("reference", "reference")):
        for figure, setup_of in (("zoo", lambda r: f"{r['zoo']} {r['subset']}"),
                                 ("sensitivity", lambda r: f"{r['popularity']} {r['arrival']} SLO {r['slo_ms']}")):
            path = RESULTS / "baselines" / sub / f"{figure}.json"
            if not path.exists():
                continue
            runs = json.load(open(path))["runs"]
            by_setup = {}
            for r in runs:
                by_setup.setdefault(setup_of(r), {})[r["system"]] = r
            for setup, rs in by_setup.items():
                ours = rs["symphony"]["goodput_rps"]
                for key, r in rs.items():
                    if key.startswith("nexus") and r["goodput_rps"] < 0.01 * ours:
                        config = ROOT / r["command"].split()[2]
                        found.append({"figure": figure, "setup": setup, "conditions": condition, "system": key,
                                      "config": config, "search_goodput_rps": r["goodput_rps"],
                                      "rate": round(FRACTION * ours, 1)})
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    clock = Clock()

    def one(c):
        flags = ["--rate", c["rate"], "--policy", POLICY[c["system"]]]
        r = summarize(simulate(c["config"], *flags))
        r.update({k: v for k, v in c.items() if k not in ("config", "rate")})
        r["command"] = command_line(c["config"], *flags)
        r.pop("requests_by_size", None)
        log(f"  {c['figure']} {c['setup']} {c['conditions']} {c['system']}: ok {r['ok_rps']:.0f} of "
            f"{r['offered_rps']:.0f} r/s, drops {r['dropped_by_reason']}, mean batch {r['mean_batch']:.2f}")
        return r

    rows = pmap(one, cells(), args.jobs)
    save_json(RESULTS / "baselines" / "nexus_zero.json", {"runs": rows, "fraction_of_symphony_goodput": FRACTION,
                                                           "cpu_seconds": round(clock.cpu_seconds(), 1)})


if __name__ == "__main__":
    main()
