#!/usr/bin/env python3
"""Issue 14: goodput with and without online profile recalibration on a noisy device.

One ResNet50 (alpha 1.053 ms, beta 5.072 ms, the profile of experiment 1) with
a 50 ms SLO on 8 GPUs, Poisson arrivals, in the simulator. The device's batch
times are the profile's l(b) times
  - jitter:          exp(N(0, 0.05)) only (the profile is right in the median);
  - drift:           the jitter, and 20 % slower for 10 s out of every 20 s (from 5 s on);
  - outliers:        the jitter, and 0.2 % of the batches run 3x as long;
  - drift+outliers:  both;
  - outliers 1%:     the jitter, and 1 % of the batches run 3x as long (as many
                     outliers as the 1 % bad-rate bar allows: the limit case).
For each, the goodput (highest rate with <= 1 % bad) of deferred and eager,
with the offline profile (`recalibrate: false`) and with the profile
recalibrated online from the simulated batch times (`recalibrate: true`,
the server's defaults: p90 of measured/offline per size class, +25 % / -5 %
per update, floor 0.8x). The simulator is deterministic: the numbers do not
depend on the machine that runs them.

  /usr/bin/python3 bench/experiments/recalibration.py [-j 2]
"""
import argparse
import copy

from simlib import Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

BASE = {
    "seed": 1, "gpus": 8, "duration_s": 30, "warmup_s": 2,
    "workload": {"rate": 5000, "arrival": "poisson"},
    "models": [{"name": "ResNet50", "alpha_ms": 1.053, "beta_ms": 5.072, "slo_ms": 50, "max_batch": 64}],
}
DRIFT = [{"at_s": 5, "length_s": 10, "every_s": 20, "factor": 1.2}]
OUTLIERS = {"probability": 0.002, "factor": 3}
OUTLIERS_1PCT = {"probability": 0.01, "factor": 3}
NOISES = {
    "jitter": {"kind": "lognormal", "sigma": 0.05},
    "drift": {"kind": "lognormal", "sigma": 0.05, "drift": DRIFT},
    "outliers": {"kind": "lognormal", "sigma": 0.05, "outliers": OUTLIERS},
    "drift+outliers": {"kind": "lognormal", "sigma": 0.05, "drift": DRIFT, "outliers": OUTLIERS},
    "outliers 1%": {"kind": "lognormal", "sigma": 0.05, "outliers": OUTLIERS_1PCT},
}
POLICIES = ["deferred", "eager"]


# How the profile is planned: offline, recalibrated with the defaults (p90),
# and recalibrated at the p99.5 (rare outliers inside the plan).
MODES = {"offline": False, "recal": True, "recal_p995": {"percentile": 0.995}}


def config(noise, mode):
    c = copy.deepcopy(BASE)
    c["name"] = f"resnet50_{noise.replace('+', '_').replace(' ', '_').replace('%', 'pct')}_{mode}"
    c["noise"] = NOISES[noise]
    c["recalibrate"] = MODES[mode]
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    out = results_dir("recalibration")
    clock = Clock()
    paths = {}
    for noise in NOISES:
        for mode in MODES:
            c = config(noise, mode)
            paths[(noise, mode)] = write_config(out / "configs" / f"{c['name']}.yaml", c)

    def one(run):
        noise, recal, policy = run
        flags = ["--goodput", "--policy", policy]
        r = simulate(paths[(noise, recal)], *flags)
        log(f"{noise} {recal} {policy}: goodput {r['goodput_rps']:.0f} r/s")
        return {"noise": noise, "recalibrate": recal, "policy": policy,
                "command": command_line(paths[(noise, recal)], *flags),
                "goodput_rps": r["goodput_rps"], "median_batch": r["median_batch"],
                "busy_fraction": r["gpu_busy_fraction"]}

    runs = [(n, m, p) for n in NOISES for p in POLICIES for m in MODES if p == "deferred" or m != "recal_p995"]
    rows = pmap(one, runs, args.jobs)
    save_json(out / "results.json", {"runs": rows, "cpu_seconds": round(clock.cpu_seconds(), 1)})

    def get(noise, recal, policy):
        return next(r for r in rows if r["noise"] == noise and r["recalibrate"] == recal and r["policy"] == policy)

    text = ["Goodput (r/s, highest rate with <= 1 % bad) of ResNet50, SLO 50 ms, 8 GPUs, in the simulator; "
            "`offline`: planned with the offline profile, `recal`: profile recalibrated online with the defaults "
            "(p90), `recal p99.5`: with `recalibrate: {percentile: 0.995}`. "
            "Median batch at the goodput in parentheses.\n",
            "| device noise | deferred offline | deferred recal | deferred recal p99.5 | eager offline | eager recal "
            "| deferred recal / offline | deferred recal / eager offline | deferred recal / eager recal |",
            "|---|---|---|---|---|---|---|---|---|"]

    def cell(r):
        return f"{r['goodput_rps']:.0f} ({r['median_batch']:g})"

    for n in NOISES:
        do, dr, dp = get(n, "offline", "deferred"), get(n, "recal", "deferred"), get(n, "recal_p995", "deferred")
        eo, er = get(n, "offline", "eager"), get(n, "recal", "eager")
        text.append(f"| {n} | {cell(do)} | {cell(dr)} | {cell(dp)} | {cell(eo)} | {cell(er)} | "
                    f"{dr['goodput_rps'] / do['goodput_rps']:.2f} | {dr['goodput_rps'] / eo['goodput_rps']:.2f} | "
                    f"{dr['goodput_rps'] / er['goodput_rps']:.2f} |")
    text.append("\nReproduce everything: `/usr/bin/python3 bench/experiments/recalibration.py -j 2` "
                "(after `cmake --build build/release --target symphony_cli`). One run:\n")
    text += [f"    {r['command']}" for r in rows]
    (out / "summary.md").write_text("\n".join(text) + "\n")
    log(f"{len(rows)} goodput searches, {clock.cpu_seconds():.0f} s of simulator CPU")


if __name__ == "__main__":
    main()
