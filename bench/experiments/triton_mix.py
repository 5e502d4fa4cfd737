#!/usr/bin/env python3
"""Triton tuned on a steady model mix, run on a shifted one (issue 51).

The third load change of bench/results/triton.md: the same total rate, but the
models' popularity shifts mid-run. `zipf_shift` is the `zipf` workload (20
ResNet50s, Zipf(0.9) popularity, SLO 30 ms, 32 GPUs, 15 s, seed 1) with the
ranks reversed at 8 s: model i's rate is scaled by w(19-i)/w(i), w(k) =
1/(k+1)^0.9, so the hot model becomes the coldest and the total stays 10000
r/s (searches scale all rates together). `mix3_shift`: three models of the
A100 zoo at their 20 ms SLO on 8 GPUs, 5000 r/s, shares 0.6/0.3/0.1 for
ResNet50/InceptionV3/EfficientNetB0 and 0.1/0.6/0.3 from 8 s on (`mix3`: no
shift).

For the steady workload and for each shifted one: Symphony's default, Triton's
defaults, and the triton_compare.py grid (max_batch_slo x queue_delay_slo,
placement all and disjoint: 84 points). Triton tuned on the steady mix is the
best point of the grid on `zipf`; it is then run unchanged on the shifted mix.

  SYMPHONY_BIN=build/release/symphony nice -n 19 /usr/bin/python3 bench/experiments/triton_mix.py [-j 2]

Writes the configs under bench/results/triton/configs/, every run's report
(with its command) to bench/results/triton/mix/results.json, and prints the
rows of bench/results/triton.md.
"""
import argparse

from simlib import ROOT, Clock, log, pmap, results_dir, save_json, write_config
from triton_compare import goodput, grid

OUT = results_dir("triton")
MIX = OUT / "mix"


def zipf_shift(name, at_s, n=20, s=0.9):
    w = [1 / (i + 1) ** s for i in range(n)]
    models = [{"name": f"ResNet50#{i}", "alpha_ms": 1.053, "beta_ms": 5.072, "slo_ms": 30, "max_batch": 64,
               "rate_changes": [{"at_s": at_s, "scale": round(w[n - 1 - i] / w[i], 6)}]} for i in range(n)]
    c = {"name": name, "seed": 1, "gpus": 32, "duration_s": 15, "warmup_s": 2,
         "workload": {"rate": 10000, "arrival": "poisson", "popularity": f"zipf:{s}"}, "models": models}
    return write_config(OUT / "configs" / f"{name}.yaml", c)


def mix3(name, shift_at_s=None):
    """ResNet50, InceptionV3, EfficientNetB0 of the A100 zoo (SLO 20 ms each) on 8 GPUs, 5000 r/s: shares
    0.6/0.3/0.1, and with shift_at_s from then on 0.1/0.6/0.3 (the hot model changes)."""
    before = {"ResNet50": 0.6, "InceptionV3": 0.3, "EfficientNetB0": 0.1}
    after = {"ResNet50": 0.1, "InceptionV3": 0.6, "EfficientNetB0": 0.3}
    models = []
    for m, share in before.items():
        e = {"zoo": "a100", "model": m, "rate": round(5000 * share, 3)}
        if shift_at_s is not None:
            e["rate_changes"] = [{"at_s": shift_at_s, "scale": round(after[m] / share, 6)}]
        models.append(e)
    c = {"name": name, "seed": 1, "gpus": 8, "duration_s": 15, "warmup_s": 2,
         "workload": {"arrival": "poisson"}, "models": models}
    return write_config(OUT / "configs" / f"{name}.yaml", c)


def sweep(config, jobs):
    policies = ["deferred", "triton"] + [p for p in grid(True) if p != "triton"]
    runs = pmap(lambda p: goodput(config, p), policies, jobs)
    best = max(runs[1:], key=lambda r: r["goodput_rps"])
    return {"config": str(config.relative_to(ROOT)), "symphony": runs[0], "triton_default": runs[1],
            "triton_best": best, "grid": [{"policy": r["policy"], "goodput_rps": r["goodput_rps"],
                                           "command": r["command"]} for r in runs[1:]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", type=int, default=2, help="concurrent simulator processes")
    a = ap.parse_args()
    clock = Clock()
    # steady config -> its shifted form
    pairs = [(OUT / "configs" / "zipf.yaml", zipf_shift("zipf_shift", 8)),
             (mix3("mix3"), mix3("mix3_shift", 8))]
    results = {}
    for steady, shifted in pairs:
        results[steady.stem] = sweep(steady, a.j)
        tuned = results[steady.stem]["triton_best"]["policy"]
        log(f"tuned on {steady.stem}: {tuned}")
        e = sweep(shifted, a.j)
        e["tuned_on"] = steady.stem
        e["triton_tuned"] = next(g for g in e["grid"] if g["policy"] == tuned)
        results[shifted.stem] = e
    MIX.mkdir(parents=True, exist_ok=True)
    save_json(MIX / "results.json", {"workloads": results, "cpu_seconds": round(clock.cpu_seconds(), 1)})
    for name, e in results.items():
        s, d, b = (e[k]["goodput_rps"] for k in ("symphony", "triton_default", "triton_best"))
        t = e.get("triton_tuned", e["triton_best"])["goodput_rps"]
        print(f"| {name} | {s:.0f} | {d:.0f} | {t:.0f} ({s / t:.2f}x) | {b:.0f} (`{e['triton_best']['policy']}`, "
              f"{s / b:.2f}x) |")


if __name__ == "__main__":
    main()
