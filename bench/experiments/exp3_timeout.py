#!/usr/bin/env python3
"""Experiment 3: deferred vs timeout batching, timeout = 0..100 % of the SLO.

Two setups (paper §3.4, "Case studies", right): one ResNet50 (alpha 1.053 ms,
beta 5.072 ms, the profile of experiment 1) with a 50 ms SLO on 8 GPUs, and
the 37-model A100 zoo (each model at its own SLO, equally popular) on 64 GPUs;
Poisson arrivals. The timeout policy dispatches a batch at max(earliest,
head arrival + k), capped at latest; k is set per model to a fraction of its
SLO (`--policy timeout:<f>slo`); k = 0 is eager. Goodput relative to
deferred's, with the same gathering policy.

  /usr/bin/python3 bench/experiments/exp3_timeout.py [-j 2] [--gathers target_batch,sliding_window]
"""
import argparse
import subprocess
import sys

from simlib import ROOT, Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

SETUPS = {
    "resnet50_8gpu": {
        "name": "resnet50_slo50_8gpu", "seed": 1, "gpus": 8, "duration_s": 60, "warmup_s": 2,
        "workload": {"rate": 5000, "arrival": "poisson"},
        "models": [{"name": "ResNet50", "alpha_ms": 1.053, "beta_ms": 5.072, "slo_ms": 50, "max_batch": 64}],
    },
    "a100_zoo_64gpu": {
        "name": "a100_zoo_64gpu", "seed": 1, "gpus": 64, "duration_s": 30, "warmup_s": 2,
        "workload": {"rate": 20000, "arrival": "poisson", "popularity": "equal"},
        "models": [{"zoo": "a100"}],
    },
}
FRACTIONS = [i / 10 for i in range(11)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--gathers", default="target_batch,sliding_window")
    args = ap.parse_args()
    gathers = args.gathers.split(",")
    out = results_dir("exp3")
    clock = Clock()
    paths = {k: write_config(out / "configs" / f"{k}.yaml", v) for k, v in SETUPS.items()}
    policies = ["deferred", "deferred:paper"] + [f"timeout:{f:g}slo" for f in FRACTIONS]

    def one(run):
        setup, policy, gather = run
        flags = ["--goodput", "--policy", policy, "--gather", gather]
        r = simulate(paths[setup], *flags)
        log(f"{setup} {policy}/{gather}: goodput {r['goodput_rps']:.0f} r/s")
        return {"setup": setup, "policy": policy, "gather": gather, "command": command_line(paths[setup], *flags),
                "goodput_rps": r["goodput_rps"], "median_batch": r["median_batch"], "mean_batch": r["mean_batch"],
                "busy_fraction": r["gpu_busy_fraction"]}

    rows = pmap(one, [(s, p, g) for s in SETUPS for g in gathers for p in policies], args.jobs)
    save_json(out / "results.json", {"runs": rows, "fractions": FRACTIONS, "cpu_seconds": round(clock.cpu_seconds(), 1)})

    def get(setup, policy, gather):
        return next(r for r in rows if r["setup"] == setup and r["policy"] == policy and r["gather"] == gather)

    text = []
    for setup in SETUPS:
        for gather in gathers:
            d = get(setup, "deferred", gather)
            dp = get(setup, "deferred:paper", gather)
            text.append(f"**{setup}, {gather}**: deferred goodput {d['goodput_rps']:.0f} r/s "
                        f"(median batch {d['median_batch']:g}, GPU busy {100 * d['busy_fraction']:.1f} %); "
                        f"deferred:paper {dp['goodput_rps']:.0f} r/s ({100 * dp['goodput_rps'] / d['goodput_rps']:.1f} % "
                        f"of deferred, median batch {dp['median_batch']:g}, GPU busy {100 * dp['busy_fraction']:.1f} %)\n")
            text.append("| timeout (% of SLO) | " + " | ".join(f"{100 * f:.0f}" for f in FRACTIONS) + " |")
            text.append("|---|" + "---|" * len(FRACTIONS))
            rel = [get(setup, f"timeout:{f:g}slo", gather)["goodput_rps"] / d["goodput_rps"] for f in FRACTIONS]
            text.append("| goodput, % of deferred | " + " | ".join(f"{100 * x:.1f}" for x in rel) + " |")
            relp = [get(setup, f"timeout:{f:g}slo", gather)["goodput_rps"] / dp["goodput_rps"] for f in FRACTIONS]
            text.append("| goodput, % of deferred:paper | " + " | ".join(f"{100 * x:.1f}" for x in relp) + " |")
            text.append("| median batch | " + " | ".join(
                f"{get(setup, f'timeout:{f:g}slo', gather)['median_batch']:g}" for f in FRACTIONS) + " |\n")
    cmds = [get(s, p, g)["command"] for s in SETUPS for g in gathers[:1] for p in ("deferred", "deferred:paper", "timeout:0.3slo")]
    (out / "summary.md").write_text("\n".join(text) + "\nCommands (examples; every run is `--policy timeout:<f>slo` "
                                    "with f = 0, 0.1, ..., 1):\n\n" + "\n".join(f"    {c}" for c in cmds) + "\n")
    subprocess.run([sys.executable, str(ROOT / "bench/plots/exp3_timeout.py"), str(out / "results.json"),
                    str(out / "exp3_timeout.png")], check=True)
    log(f"exp3: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
