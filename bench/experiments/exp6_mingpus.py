#!/usr/bin/env python3
"""Experiment 6: the minimum number of GPUs that serves 15 k requests/s
(paper §5.2), on A100 profiles: one ResNet50 (alpha 0.268 ms, beta 5.172 ms)
at a 25 ms SLO, and the 37-model A100 zoo (each at its own SLO, equally
popular); Poisson arrivals. `symphony simulate --min-gpus 15000` under each
policy (<= 1 % bad per model, seed 1).

  /usr/bin/python3 bench/experiments/exp6_mingpus.py [-j 2]
"""
import argparse

from simlib import Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

SETUPS = {
    "resnet50_a100_slo25": {
        "name": "resnet50_a100_slo25", "seed": 1, "gpus": 8, "duration_s": 20, "warmup_s": 2,
        "workload": {"rate": 15000, "arrival": "poisson"},
        "models": [{"zoo": "a100", "model": "ResNet50", "slo_ms": 25}],
        "search": {"min_gpus": {"rate": 15000, "max_gpus": 512}},
    },
    "a100_zoo": {
        "name": "a100_zoo_37", "seed": 1, "gpus": 64, "duration_s": 30, "warmup_s": 2,
        "workload": {"rate": 15000, "arrival": "poisson", "popularity": "equal"},
        "models": [{"zoo": "a100"}],
        "search": {"min_gpus": {"rate": 15000, "max_gpus": 512}},
    },
}
POLICIES = [("deferred", "target_batch"), ("deferred", "sliding_window"), ("deferred:paper", "target_batch"),
            ("deferred:paper", "sliding_window"), ("eager", "target_batch"), ("eager", "sliding_window"),
            ("timeout:0.3slo", "target_batch")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    out = results_dir("exp6")
    clock = Clock()
    paths = {k: write_config(out / "configs" / f"{k}.yaml", v) for k, v in SETUPS.items()}

    def one(run):
        setup, policy, gather = run
        flags = ["--min-gpus", 15000, "--policy", policy, "--gather", gather]
        r = simulate(paths[setup], *flags)
        log(f"{setup} {policy}/{gather}: {r['min_gpus']} GPUs")
        return {"setup": setup, "policy": policy, "gather": gather, "command": command_line(paths[setup], *flags),
                "min_gpus": r["min_gpus"], "median_batch": r.get("median_batch"),
                "busy_fraction": r.get("gpu_busy_fraction"), "bad_rate": r.get("worst_model_bad_rate"),
                "steps": r["search"]["steps"]}

    rows = pmap(one, [(s, p, g) for s in SETUPS for p, g in POLICIES], args.jobs)
    save_json(out / "results.json", {"runs": rows, "cpu_seconds": round(clock.cpu_seconds(), 1)})
    text = ["| setup | policy | gathering | min GPUs for 15 k r/s | median batch | GPU busy | worst model bad rate |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        text.append(f"| {r['setup']} | {r['policy']} | {r['gather']} | {r['min_gpus']} | {r['median_batch']} | "
                    f"{100 * r['busy_fraction']:.1f} % | {100 * r['bad_rate']:.2f} % |")
    text.append("\nCommands:\n\n" + "\n".join(f"    {r['command']}" for r in rows) + "\n")
    (out / "summary.md").write_text("\n".join(text))
    log(f"exp6: {clock.cpu_seconds():.0f} CPU s, {clock.wall_seconds():.0f} s wall")


if __name__ == "__main__":
    main()
