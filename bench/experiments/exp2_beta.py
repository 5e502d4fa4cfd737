#!/usr/bin/env python3
"""Experiment 2: deferred vs eager as the batching effect grows.

10 equally popular models with l(b) = alpha*b + beta, alpha = 1 ms, beta =
1..15 ms, SLO = 2*l(8), on 32 GPUs, Poisson arrivals (paper §3.4, "Case
studies", left). Goodput of deferred and eager (the same engine with exec =
earliest) under both gathering policies; the paper plots eager's goodput as a
percentage of deferred's.

  /usr/bin/python3 bench/experiments/exp2_beta.py [-j 2]
"""
import argparse
import subprocess
import sys

from simlib import ROOT, Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

COMBOS = [("deferred", "target_batch"), ("eager", "target_batch"), ("deferred", "sliding_window"),
          ("eager", "sliding_window"), ("deferred:paper", "target_batch")]


def config(beta):
    slo = 2 * (8 * 1.0 + beta)
    return {
        "name": f"beta_{beta}",
        "seed": 1,
        "gpus": 32,
        "duration_s": 30,
        "warmup_s": 2,
        "workload": {"rate": 10000, "arrival": "poisson", "popularity": "equal"},
        "models": [{"name": f"m{beta}", "alpha_ms": 1.0, "beta_ms": float(beta), "slo_ms": slo, "max_batch": 64,
                    "count": 10}],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    out = results_dir("exp2")
    clock = Clock()
    betas = list(range(1, 16))
    paths = {b: write_config(out / "configs" / f"beta_{b:02d}.yaml", config(b)) for b in betas}

    def one(run):
        beta, policy, gather = run
        flags = ["--goodput", "--policy", policy, "--gather", gather]
        r = simulate(paths[beta], *flags)
        log(f"beta {beta} {policy}/{gather}: goodput {r['goodput_rps']:.0f} r/s, median batch {r['median_batch']}")
        return {"beta": beta, "policy": policy, "gather": gather, "command": command_line(paths[beta], *flags),
                "goodput_rps": r["goodput_rps"], "median_batch": r["median_batch"], "mean_batch": r["mean_batch"],
                "busy_fraction": r["gpu_busy_fraction"],
                "staggered_rps_per_model": r["models"][0]["bounds"]["staggered"]["throughput_rps"]}

    rows = pmap(one, [(b, p, g) for b in betas for p, g in COMBOS], args.jobs)
    save_json(out / "results.json", {"runs": rows, "cpu_seconds": round(clock.cpu_seconds(), 1)})

    def get(beta, policy, gather):
        return next(r for r in rows if r["beta"] == beta and r["policy"] == policy and r["gather"] == gather)

    lines = ["| beta/alpha | SLO ms | deferred r/s (target batch) | eager r/s (target batch) | eager/deferred | "
             "deferred r/s (sliding) | eager r/s (sliding) | eager/deferred (sliding) | best eager / deferred (tb) | "
             "median batch d/e (tb) | deferred:paper r/s (tb) | eager / deferred:paper (tb) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for b in betas:
        d, e = get(b, "deferred", "target_batch"), get(b, "eager", "target_batch")
        ds, es = get(b, "deferred", "sliding_window"), get(b, "eager", "sliding_window")
        dp = get(b, "deferred:paper", "target_batch")
        best_eager = max(e["goodput_rps"], es["goodput_rps"])
        lines.append(f"| {b} | {2 * (8 + b)} | {d['goodput_rps']:.0f} | {e['goodput_rps']:.0f} | "
                     f"{100 * e['goodput_rps'] / d['goodput_rps']:.1f} % | {ds['goodput_rps']:.0f} | "
                     f"{es['goodput_rps']:.0f} | {100 * es['goodput_rps'] / ds['goodput_rps']:.1f} % | "
                     f"{100 * best_eager / d['goodput_rps']:.1f} % | {d['median_batch']:g}/{e['median_batch']:g} | "
                     f"{dp['goodput_rps']:.0f} | {100 * e['goodput_rps'] / dp['goodput_rps']:.1f} % |")
    cmds = [get(b, p, g)["command"] for b in (1, 15) for p, g in COMBOS]
    (out / "summary.md").write_text("\n".join(lines) + "\n\nCommands (for beta 1 and 15; configs for every beta in "
                                    "bench/results/exp2/configs/):\n\n" + "\n".join(f"    {c}" for c in cmds) + "\n")
    subprocess.run([sys.executable, str(ROOT / "bench/plots/exp2_beta.py"), str(out / "results.json"),
                    str(out / "exp2_beta.png")], check=True)
    log(f"exp2: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
