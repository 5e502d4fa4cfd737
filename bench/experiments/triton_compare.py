#!/usr/bin/env python3
"""Triton's dynamic batcher against Symphony (issue 51), in the simulator.

For each workload: the goodput search of Symphony's default (`deferred`),
Triton's defaults (`triton`: no queue delay, the model's max batch, an
instance of every model on every GPU) and Triton tuned: the best goodput over
a grid of per-model max batch (`max_batch_slo`: the largest b with l(b) <= F x
the SLO, or the model's own) x max_queue_delay (`queue_delay_slo`: F x the
SLO), with every model on every GPU and, with several models, on disjoint GPU
sets (`placement=disjoint`). Then the two load changes a static config cannot
follow: the configuration tuned on the steady ResNet50 load run on rate steps
and on bursty (Gamma) arrivals of the same mean; and the GPUs each needs for a
target rate (minimum-GPU search).

Workloads: the paper's single-model cases (examples/paper/: ResNet50 on 8
GPUs at 25 ms, InceptionResNetV2 at 70 ms), the A100 zoo (37 models, 64
GPUs), 20 ResNet50 copies with Zipf(0.9) popularity (32 GPUs, 30 ms), the same
with Gamma(0.05) bursts. Runs are shortened (duration_s below) so the grid
stays small; every system runs the same config.

  SYMPHONY_BIN=build/release/symphony nice /usr/bin/python3 bench/experiments/triton_compare.py [-j 2]
      [--only resnet50,...]

Writes bench/results/triton/results.json, the configs under
bench/results/triton/configs/, the plot bench/results/triton/goodput.png, and
prints the tables of bench/results/triton.md.
"""
import argparse
import json

import yaml

from baselines_lib import summarize
from simlib import ROOT, Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

OUT = results_dir("triton")

# name -> (source config, overrides)
WORKLOADS = {
    "resnet50": ("examples/paper/stagger_resnet50.yaml", {"duration_s": 20}),
    "inceptionresnetv2": ("examples/paper/stagger_inceptionresnetv2.yaml", {"duration_s": 20}),
    "a100_zoo": ("bench/results/baselines/configs/zoo_a100_mixed.yaml", {"duration_s": 10}),
    "zipf": ("bench/results/baselines/configs/sens_slo30_zipf0.9_poisson.yaml", {"duration_s": 15}),
    "zipf_gamma": ("bench/results/baselines/configs/sens_slo30_zipf0.9_gamma0.05.yaml", {"duration_s": 15}),
    # A loose SLO, where the paper's peers come closest to Symphony.
    "slo100": ("bench/results/baselines/configs/sens_slo100_equal_poisson.yaml", {"duration_s": 15}),
}
# Load changes of the ResNet50 case: tuned on the steady load, run on these.
CHANGES = {
    # 1x for 5 s, 1.6x for 5 s, 0.5x for 5 s, 1x again: the mean stays near the steady rate.
    "resnet50_steps": {"rate_changes": [{"at_s": 5, "scale": 1.6}, {"at_s": 10, "scale": 0.5},
                                         {"at_s": 15, "scale": 1.0}]},
    "resnet50_gamma": {"arrival": "gamma:0.1"},
}
MIN_GPU_RATE = {"resnet50": 4000}

MAX_BATCH_SLO = [None, 0.5, 0.6, 0.7, 0.8, 0.9]  # None: the model's own max batch
QUEUE_DELAY_SLO = [None, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3]  # None: no delay


def make_config(name, source, overrides, workload_overrides=None):
    c = yaml.safe_load(open(ROOT / source))
    c.update(overrides)
    c["name"] = name
    if workload_overrides:
        c["workload"] = {**c["workload"], **workload_overrides}
    return write_config(OUT / "configs" / f"{name}.yaml", c)


def triton_policy(mb, qd, placement):
    opts = []
    if mb:
        opts.append(f"max_batch_slo={mb}")
    if qd:
        opts.append(f"queue_delay_slo={qd}")
    if placement != "all":
        opts.append(f"placement={placement}")
    return "triton" + (":" + ",".join(opts) if opts else "")


def grid(multi_model):
    placements = ["all", "disjoint"] if multi_model else ["all"]
    return [triton_policy(mb, qd, p) for p in placements for mb in MAX_BATCH_SLO for qd in QUEUE_DELAY_SLO]


def goodput(config, policy):
    args = ["--goodput", "--policy", policy]
    r = summarize(simulate(config, *args))
    r["policy"] = policy
    r["command"] = command_line(config, *args)
    log(f"  {config.stem} {policy}: goodput {r['goodput_rps']:.1f} r/s, median batch {r.get('median_batch')}")
    return r


def min_gpus(config, policy, rate):
    args = ["--min-gpus", rate, "--policy", policy]
    r = summarize(simulate(config, *args))
    r["policy"] = policy
    r["command"] = command_line(config, *args)
    log(f"  {config.stem} {policy}: {r['min_gpus']} GPUs for {rate} r/s")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", type=int, default=2, help="concurrent simulator processes")
    ap.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    a = ap.parse_args()
    clock = Clock()
    names = a.only.split(",") if a.only else list(WORKLOADS)
    path = OUT / "results.json"
    old = json.load(open(path)) if path.exists() else {}
    results, cpu_before = old.get("workloads", {}), old.get("cpu_seconds", 0)
    for name in names:
        source, overrides = WORKLOADS[name]
        config = make_config(name, source, overrides)
        models = yaml.safe_load(open(config))["models"]
        single = len(models) == 1 and "count" not in models[0] and ("zoo" not in models[0] or "model" in models[0])
        multi = not single
        log(f"{name}:")
        policies = ["deferred", "triton"] + [p for p in grid(multi) if p != "triton"]
        runs = pmap(lambda p: goodput(config, p), policies, a.j)
        tuned = max(runs[2:] + [runs[1]], key=lambda r: r["goodput_rps"])
        entry = {"config": str(config.relative_to(ROOT)), "symphony": runs[0], "triton_default": runs[1],
                 "triton_tuned": tuned, "grid": [{"policy": r["policy"], "goodput_rps": r["goodput_rps"]}
                                                 for r in runs[1:]]}
        if name in MIN_GPU_RATE:
            rate = MIN_GPU_RATE[name]
            entry["min_gpus"] = {"rate": rate, "runs": pmap(lambda p: min_gpus(config, p, rate),
                                                            ["deferred", "triton", tuned["policy"]], a.j)}
        results[name] = entry
        for change, workload in CHANGES.items():
            if not change.startswith(name + "_"):
                continue
            cfg = make_config(change, source, overrides, workload)
            log(f"{change} (Triton tuned on {name}: {tuned['policy']}):")
            r = pmap(lambda p: goodput(cfg, p), ["deferred", "triton", tuned["policy"]], a.j)
            # The best Triton could do had it been tuned on this load instead.
            retuned = pmap(lambda p: goodput(cfg, p), [p for p in grid(False) if p != "triton"], a.j)
            best = max(retuned + [r[1]], key=lambda x: x["goodput_rps"])
            results[change] = {"config": str(cfg.relative_to(ROOT)), "symphony": r[0], "triton_default": r[1],
                               "triton_tuned": r[2], "tuned_on": name, "triton_retuned": best}
        save_json(path, {"workloads": results, "cpu_seconds": round(cpu_before + clock.cpu_seconds(), 1)})
    print_tables(results)
    plot(results)


def print_tables(results):
    print("| workload | Symphony | Triton default | Triton tuned | tuned config | Symphony / tuned |")
    print("|---|---|---|---|---|---|")
    for name, e in results.items():
        s, d, t = (e[k]["goodput_rps"] for k in ("symphony", "triton_default", "triton_tuned"))
        label = name + (f" (tuned on {e['tuned_on']})" if "tuned_on" in e else "")
        print(f"| {label} | {s:.0f} | {d:.0f} | {t:.0f} | `{e['triton_tuned']['policy']}` | "
              f"{s / t:.2f}x |" if t else f"| {label} | {s:.0f} | {d:.0f} | 0 | | - |")
        if "triton_retuned" in e:
            r = e["triton_retuned"]
            print(f"| {name}, Triton tuned on it | | | {r['goodput_rps']:.0f} | `{r['policy']}` | "
                  f"{s / r['goodput_rps']:.2f}x |")
    for name, e in results.items():
        if "min_gpus" in e:
            print(f"\nGPUs for {e['min_gpus']['rate']} r/s ({name}):")
            for r in e["min_gpus"]["runs"]:
                print(f"- `{r['policy']}`: {r['min_gpus']}")


def plot(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(results)
    keys = [("symphony", "Symphony"), ("triton_default", "Triton default"), ("triton_tuned", "Triton tuned")]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    width = 0.27
    for k, (key, label) in enumerate(keys):
        base = [results[n]["symphony"]["goodput_rps"] or 1 for n in names]
        ax.bar([i + (k - 1) * width for i in range(len(names))],
               [results[n][key]["goodput_rps"] / b for n, b in zip(names, base)], width, label=label)
    ax.set_xticks(range(len(names)), names, rotation=15, fontsize=8)
    ax.set_ylabel("goodput / Symphony's")
    ax.axhline(1, color="grey", lw=0.5)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "goodput.png", dpi=110)


if __name__ == "__main__":
    main()
