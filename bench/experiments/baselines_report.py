#!/usr/bin/env python3
"""Collects the baseline comparisons (baselines_stagger.py, baselines_zoo.py,
baselines_mingpus.py, baselines_sensitivity.py) into
bench/results/baselines.json (the numbers, with the paper's beside them)
and bench/results/baselines/tables.md (the tables of
bench/results/baselines.md).

  /usr/bin/python3 bench/experiments/baselines_report.py
"""
import json
import statistics

from simlib import RESULTS, save_json

SYSTEMS = ["symphony", "clockwork", "nexus", "nexus_8fe", "shepherd", "nexus_exact"]
LABELS = {"symphony": "Symphony", "clockwork": "Clockwork", "nexus": "Nexus 1 FE", "nexus_8fe": "Nexus 8 FE",
          "shepherd": "Shepherd", "nexus_exact": "Nexus 1 FE, exact plan"}


def load(name):
    path = RESULTS / "baselines" / f"{name}.json"
    return json.load(open(path)) if path.exists() else None


def fmt(x, nd=0):
    return "-" if x is None else f"{x:.{nd}f}"


def versus(ours, g):
    """A system's goodput and Symphony's as a multiple of it ("~0" below 1 % of ours)."""
    if not g or g < 0.01 * ours:
        return f"~0 ({g:.3g} r/s)" if g else "0"
    return f"{g:.0f} ({ours / g:.2f}x)"


def stagger(out, md):
    d = load("stagger")
    if not d:
        return
    goodput, details = {}, {}
    md.append("## 1. Staggered execution (ResNet50 and InceptionResNetV2, 8 GPUs)\n")
    md.append("| model | system | goodput r/s (mean of seeds) | min..max | paper | ours / paper | median batch "
              "(paper) | mean batch | GPU busy | queueing p50 / p99 / max ms |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    for model in ("ResNet50", "InceptionResNetV2"):
        goodput[model], details[model] = {}, {}
        for s in SYSTEMS:
            rs = [r for r in d["runs"] if r["model"] == model and r["system"] == s]
            if not rs:
                continue
            g = [r["goodput_rps"] for r in rs]
            r1 = next(r for r in rs if r["seed"] == 1)
            mean = statistics.mean(g)
            paper = d["paper_goodput"][model].get(s)
            pmb = d["paper_median_batch"][model].get(s)
            mb = statistics.median(r["median_batch"] for r in rs)
            goodput[model][s] = round(mean, 1)
            details[model][s] = {"goodput_rps_mean": round(mean, 1), "goodput_rps_min": min(g),
                                 "goodput_rps_max": max(g), "seeds": len(g), "median_batch": mb,
                                 "mean_batch": round(statistics.mean(r["mean_batch"] for r in rs), 2),
                                 "paper_goodput_rps": paper, "paper_median_batch": pmb,
                                 "busy_fraction_seed1": r1["gpu_busy_fraction"], "queueing_ms_seed1": r1["queueing_ms"],
                                 "requests_by_size_seed1": r1["requests_by_size"], "engine_stats_seed1": r1["engine_stats"],
                                 "command_seed1": r1["command"]}
            q = r1["queueing_ms"]
            md.append(f"| {model} | {LABELS[s]} | {mean:.1f} | {min(g):.1f}..{max(g):.1f} | {fmt(paper)} | "
                      f"{'-' if not paper else f'{mean / paper:.2f}'} | {mb:g} ({'-' if pmb is None else pmb}) | "
                      f"{details[model][s]['mean_batch']:.2f} | {100 * r1['gpu_busy_fraction']:.1f} % | "
                      f"{q['p50']:.2f} / {q['p99']:.2f} / {q['max']:.2f} |")
    md.append("")
    out["stagger"] = goodput
    out["stagger_details"] = details
    out["paper"]["stagger_goodput_rps"] = d["paper_goodput"]
    out["paper"]["stagger_median_batch"] = d["paper_median_batch"]


def zoo(out, md):
    d = load("zoo")
    if not d:
        return
    res, ratio = {}, {}
    md.append("## 2. Model zoos, 64 GPUs: goodput and Symphony's goodput as a multiple of each system's\n")
    md.append("| zoo | models | Symphony r/s | " + " | ".join(LABELS[s] for s in SYSTEMS[1:]) + " | paper |")
    md.append("|---|---|---|" + "---|" * (len(SYSTEMS) - 1) + "---|")
    for z in ("1080ti", "a100"):
        for k in ("mixed", "strong", "weak"):
            rs = {r["system"]: r for r in d["runs"] if r["zoo"] == z and r["subset"] == k}
            key = f"{z}/{k}"
            res[key] = {s: r["goodput_rps"] for s, r in rs.items()}
            ours = rs["symphony"]["goodput_rps"]
            ratio[key] = {s: round(ours / r["goodput_rps"], 3) if r["goodput_rps"] else None
                          for s, r in rs.items() if s != "symphony"}
            cells = [versus(ours, rs[s]["goodput_rps"]) for s in SYSTEMS[1:]]
            md.append(f"| {z} {k} | {rs['symphony']['models']} | {ours:.0f} | " + " | ".join(cells) +
                      f" | {d['paper_ratio'][key]} |")
    md.append("")
    out["zoo_goodput_rps"] = res
    out["zoo_symphony_over"] = ratio
    out["paper"]["zoo_symphony_over"] = d["paper_ratio"]


def mingpus(out, md):
    d = load("mingpus")
    if not d:
        return
    res = {}
    md.append("## 3. Minimum GPUs for 15 k r/s (A100 profiles)\n")
    md.append("| workload | " + " | ".join(LABELS[s] for s in SYSTEMS) + " | paper |")
    md.append("|---|" + "---|" * len(SYSTEMS) + "---|")
    for setup in ("resnet50_a100_slo25", "a100_zoo"):
        rs = {r["system"]: r for r in d["runs"] if r["setup"] == setup}
        res[setup] = {s: r["min_gpus"] for s, r in rs.items()}
        ours = rs["symphony"]["min_gpus"]
        cells = []
        for s in SYSTEMS:
            n = rs[s]["min_gpus"]
            if not n:
                cells.append("none <= 512")
            elif s == "symphony":
                cells.append(str(n))
            else:
                cells.append(f"{n} ({100 * (n - ours) / ours:+.0f} %)")
        md.append(f"| {setup} | " + " | ".join(cells) + f" | {d['paper'][setup]} |")
    md.append("")
    out["min_gpus_15k"] = res


def sensitivity(out, md):
    d = load("sensitivity")
    if not d:
        return
    res = {}
    md.append("## 4. Workload sensitivity: 20 ResNet50-like models, 32 GPUs (goodput r/s; Symphony / system)\n")
    systems = ["symphony", "clockwork", "nexus", "nexus_8fe", "shepherd"]
    md.append("| popularity | arrival | SLO ms | " + " | ".join(LABELS[s] for s in systems) + " |")
    md.append("|---|---|---|" + "---|" * len(systems))
    for pop in ("equal", "zipf0.9"):
        for arr in ("poisson", "gamma0.05"):
            slos = sorted({r["slo_ms"] for r in d["runs"] if (r["popularity"], r["arrival"]) == (pop, arr)})
            for slo in slos:
                rs = {r["system"]: r for r in d["runs"]
                      if (r["popularity"], r["arrival"], r["slo_ms"]) == (pop, arr, slo)}
                res.setdefault(f"{pop}/{arr}", {})[str(slo)] = {s: r["goodput_rps"] for s, r in rs.items()}
                ours = rs["symphony"]["goodput_rps"]
                cells = [f"{ours:.0f}"] + [versus(ours, rs[s]["goodput_rps"]) for s in systems[1:]]
                md.append(f"| {pop} | {arr} | {slo} | " + " | ".join(cells) + " |")
    md.append("")
    out["sensitivity_goodput_rps"] = res


def main():
    out = {"paper": {}}
    md = []
    stagger(out, md)
    zoo(out, md)
    mingpus(out, md)
    sensitivity(out, md)
    save_json(RESULTS / "baselines.json", out)
    (RESULTS / "baselines" / "tables.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
