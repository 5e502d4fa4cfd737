#!/usr/bin/env python3
"""Collects the baseline comparisons (baselines_stagger.py, baselines_zoo.py,
baselines_mingpus.py, baselines_sensitivity.py, baselines_stability.py,
baselines_nexus_zero.py) into bench/results/baselines.json (the numbers,
with the paper's beside them; zero-delay results at the top level, the
reference conditions under `reference_conditions`) and
bench/results/baselines/tables.md (the tables of bench/results/baselines.md).

The systems and their order come from baselines_lib.ALL_SYSTEMS; a system
missing from a results file is left out of its table.

  /usr/bin/python3 bench/experiments/baselines_report.py
"""
import json
import statistics

from baselines_lib import ALL_SYSTEMS, CONDITIONS, LABELS, REFERENCE_DELAYS
from simlib import RESULTS, save_json

ORDER = [s.key for s in ALL_SYSTEMS]
CONDITION_TITLE = {"zero": "zero delays", "reference": "reference conditions (ctrl 25 us, data 75 us per request)"}


def load(name, condition="zero"):
    path = RESULTS / "baselines" / ("" if condition == "zero" else condition) / f"{name}.json"
    return json.load(open(path)) if path.exists() else None


def present(runs, candidates=None):
    have = {r["system"] for r in runs}
    return [s for s in (candidates or ORDER) if s in have]


def fmt(x, nd=0):
    return "-" if x is None else f"{x:.{nd}f}"


def versus(ours, g):
    """A system's goodput and Symphony's as a multiple of it ("~0" below 1 % of ours)."""
    if not g or g < 0.01 * ours:
        return f"~0 ({g:.3g} r/s)" if g else "0"
    return f"{g:.0f} ({ours / g:.2f}x)"


def change(a, b):
    """b relative to a, as a signed percentage."""
    if not a or b is None:
        return "-"
    return f"{100 * (b - a) / a:+.1f} %"


def stagger(out, md, condition):
    d = load("stagger", condition)
    if not d:
        return
    goodput, details = {}, {}
    systems = present(d["runs"])
    md.append(f"## 1. Staggered execution (ResNet50 and InceptionResNetV2, 8 GPUs), {CONDITION_TITLE[condition]}\n")
    md.append("| model | system | goodput r/s (mean of seeds) | min..max | paper | ours / paper | median batch "
              "(paper) | mean batch | GPU busy | queueing p50 / p99 / max ms |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    for model in ("ResNet50", "InceptionResNetV2"):
        goodput[model], details[model] = {}, {}
        for s in systems:
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
    others = [s for s in systems if s != "symphony"]
    md.append("Symphony's goodput as a multiple of each system's (mean of seeds):\n")
    md.append("| model | " + " | ".join(LABELS[s] for s in others) + " |")
    md.append("|---|" + "---|" * len(others))
    for model in goodput:
        ours = goodput[model]["symphony"]
        md.append(f"| {model} | " + " | ".join(f"{ours / goodput[model][s]:.2f}x" if goodput[model].get(s) else "-"
                                              for s in others) + " |")
    md.append("")
    out["stagger"] = goodput
    out["stagger_details"] = details
    out["stagger_command"] = "bench/experiments/baselines_stagger.py -j 2 --conditions " + condition
    if condition == "zero":
        out["paper"]["stagger_goodput_rps"] = d["paper_goodput"]
        out["paper"]["stagger_median_batch"] = d["paper_median_batch"]


ZOO_SETUPS = [(z, k) for z in ("1080ti", "a100") for k in ("mixed", "strong", "weak")]


def zoo(out, md, condition):
    d = load("zoo", condition)
    if not d:
        return
    res, ratio = {}, {}
    systems = present(d["runs"])
    md.append(f"## 2. Model zoos, 64 GPUs, {CONDITION_TITLE[condition]}: goodput r/s (Symphony's goodput / the "
              "system's)\n")
    md.append("| zoo | models | Symphony r/s | " + " | ".join(LABELS[s] for s in systems[1:]) + " | paper |")
    md.append("|---|---|---|" + "---|" * (len(systems) - 1) + "---|")
    for z, k in ZOO_SETUPS:
        rs = {r["system"]: r for r in d["runs"] if r["zoo"] == z and r["subset"] == k}
        key = f"{z}/{k}"
        res[key] = {s: r["goodput_rps"] for s, r in rs.items()}
        ours = rs["symphony"]["goodput_rps"]
        ratio[key] = {s: round(ours / r["goodput_rps"], 3) if r["goodput_rps"] else None
                      for s, r in rs.items() if s != "symphony"}
        cells = [versus(ours, rs[s]["goodput_rps"]) if s in rs else "-" for s in systems[1:]]
        md.append(f"| {z} {k} | {rs['symphony']['models']} | {ours:.0f} | " + " | ".join(cells) +
                  f" | {d['paper_ratio'][key]} |")
    md.append("")
    out["zoo_goodput_rps"] = res
    out["zoo_symphony_over"] = ratio
    out["zoo_commands"] = {f"{r['zoo']}/{r['subset']}/{r['system']}": r["command"] for r in d["runs"]}
    if condition == "zero":
        out["paper"]["zoo_symphony_over"] = d["paper_ratio"]


MINGPUS_SETUPS = ("resnet50_a100_slo25", "a100_zoo")


def mingpus(out, md, condition):
    d = load("mingpus", condition)
    if not d:
        return
    res = {}
    systems = present(d["runs"])
    md.append(f"## 3. Minimum GPUs for 15 k r/s (A100 profiles), {CONDITION_TITLE[condition]}\n")
    md.append("| workload | " + " | ".join(LABELS[s] for s in systems) + " | paper |")
    md.append("|---|" + "---|" * len(systems) + "---|")
    for setup in MINGPUS_SETUPS:
        rs = {r["system"]: r for r in d["runs"] if r["setup"] == setup}
        res[setup] = {s: r["min_gpus"] for s, r in rs.items()}
        ours = rs["symphony"]["min_gpus"]
        cells = []
        for s in systems:
            n = rs[s]["min_gpus"] if s in rs else None
            if s not in rs:
                cells.append("-")
            elif not n:
                cells.append("none <= 512")
            elif s == "symphony":
                cells.append(str(n))
            else:
                cells.append(f"{n} ({100 * (n - ours) / ours:+.0f} %)")
        md.append(f"| {setup} | " + " | ".join(cells) + f" | {d['paper'][setup]} |")
    md.append("")
    out["min_gpus_15k"] = res
    out["min_gpus_commands"] = {f"{r['setup']}/{r['system']}": r["command"] for r in d["runs"]}


def sens_cells(d):
    cells = {}
    for r in d["runs"]:
        cells.setdefault((r["popularity"], r["arrival"], r["slo_ms"]), {})[r["system"]] = r
    return cells


def sensitivity(out, md, condition):
    d = load("sensitivity", condition)
    if not d:
        return
    res = {}
    systems = present(d["runs"])
    md.append(f"## 4. Workload sensitivity: 20 ResNet50-like models, 32 GPUs, {CONDITION_TITLE[condition]} "
              "(goodput r/s; Symphony / system)\n")
    md.append("| popularity | arrival | SLO ms | " + " | ".join(LABELS[s] for s in systems) + " |")
    md.append("|---|---|---|" + "---|" * len(systems))
    cells = sens_cells(d)
    for pop in ("equal", "zipf0.9"):
        for arr in ("poisson", "gamma0.05"):
            for slo in sorted(s for (p, a, s) in cells if (p, a) == (pop, arr)):
                rs = cells[(pop, arr, slo)]
                res.setdefault(f"{pop}/{arr}", {})[str(slo)] = {s: r["goodput_rps"] for s, r in rs.items()}
                ours = rs["symphony"]["goodput_rps"]
                row = [f"{ours:.0f}"] + [versus(ours, rs[s]["goodput_rps"]) if s in rs else "-" for s in systems[1:]]
                md.append(f"| {pop} | {arr} | {slo} | " + " | ".join(row) + " |")
    md.append("")
    out["sensitivity_goodput_rps"] = res


def compare(out, md):
    """Zero delays against reference conditions, per figure and system."""
    ref = out["reference_conditions"]
    md.append("## Zero delays against reference conditions (same delays for every system)\n")
    def table(key, title, first, probe, label, cell):
        """One row per entry of out[key]: each system's zero-delay and reference values."""
        if key not in ref or key not in out:
            return
        md.append(title + "\n")
        systems = [s for s in ORDER if s in out[key][probe]]
        md.append(f"| {first} | " + " | ".join(LABELS[s] for s in systems) + " |")
        md.append("|---|" + "---|" * len(systems))
        for k, z in out[key].items():
            r = ref[key].get(k, {})
            md.append(f"| {label(k)} | " + " | ".join(cell(z[s], r.get(s)) for s in systems) + " |")
        md.append("")

    def goodputs(z, r):
        return f"{z:.0f} / {fmt(r)} ({change(z, r)})"

    table("stagger", "Figure 1, goodput r/s (mean of 5 seeds): zero delays, reference conditions, change", "model",
          "ResNet50", lambda k: k, goodputs)
    table("zoo_goodput_rps", "Figure 2, goodput r/s: zero delays / reference conditions (change)", "zoo",
          "a100/mixed", lambda k: k.replace("/", " "), goodputs)
    table("min_gpus_15k", "Figure 3, minimum GPUs for 15 k r/s: zero delays / reference conditions", "workload",
          "a100_zoo", lambda k: k, lambda z, r: f"{z or 'none'} / {r or 'none'}")
    if "sensitivity_goodput_rps" in ref and "sensitivity_goodput_rps" in out:
        md.append("Figure 4, change of goodput from zero delays to reference conditions over the 20 setups "
                  "(cells where both are ~0, below 1 % of Symphony's, left out): median, min..max\n")
        systems = [s for s in ORDER if any(s in c for v in out["sensitivity_goodput_rps"].values() for c in v.values())]
        md.append("| | " + " | ".join(LABELS[s] for s in systems) + " |")
        md.append("|---|" + "---|" * len(systems))
        row = []
        for s in systems:
            ch = []
            for setup, slos in out["sensitivity_goodput_rps"].items():
                for slo, z in slos.items():
                    r = ref["sensitivity_goodput_rps"].get(setup, {}).get(slo, {})
                    ours = z.get("symphony", 0)
                    if s in z and s in r and z[s] >= 0.01 * ours:
                        ch.append(100 * (r[s] - z[s]) / z[s])
            row.append(f"{statistics.median(ch):+.1f} % ({min(ch):+.1f}..{max(ch):+.1f})" if ch else "-")
        md.append("| change | " + " | ".join(row) + " |")
        md.append("")


def stability(out, md, condition):
    d = load("stability", condition)
    if not d:
        return
    peak = d["symphony_goodput_rps"]
    loads = [r for r in d["runs"] if r["kind"] == "load"]
    systems = present(loads)
    md.append(f"## 6. Stability and GPU use against offered load, {CONDITION_TITLE[condition]}\n")
    md.append("10 ResNet50-like models, SLO 100 ms, 24 GPUs, Poisson, 30 s, seed 1. Goodput searches: " +
              ", ".join(f"{LABELS[r['system']]} {r['goodput_rps']:.0f}" for r in d["runs"] if r["kind"] == "goodput")
              + " r/s.\n")
    md.append("Cells: goodput at that load in r/s (ok requests per second) / GPU busy %.\n")
    md.append("| load (x Symphony's goodput) | offered r/s | " + " | ".join(LABELS[s] for s in systems) + " |")
    md.append("|---|---|" + "---|" * len(systems))
    res = {}
    for x in d["loads"]:
        rs = {r["system"]: r for r in loads if r["load"] == x}
        rate = next(iter(rs.values()))["offered_rps"]
        res[str(x)] = {s: {"offered_rps": r["offered_rps"], "ok_rps": r["ok_rps"], "bad_rate": r["bad_rate"],
                              "gpu_busy_fraction": r["gpu_busy_fraction"], "mean_batch": r["mean_batch"],
                              "gpus_used": r["gpus_used"]} for s, r in rs.items()}
        md.append(f"| {x:g} | {rate:.0f} | " + " | ".join(
            f"{rs[s]['ok_rps']:.0f} / {100 * rs[s]['gpu_busy_fraction']:.1f} %" if s in rs else "-"
            for s in systems) + " |")
    md.append("")
    out["stability"] = {"symphony_goodput_rps": peak, "by_load": res,
                        "goodput_rps": {r["system"]: r["goodput_rps"] for r in d["runs"] if r["kind"] == "goodput"},
                        "command": "bench/experiments/baselines_stability.py -j 2 --conditions " + condition,
                        "example_command": loads[0]["command"]}


def nexus_zero(out, md):
    d = load("nexus_zero")
    if not d:
        return
    md.append("## Nexus's near-zero cells: one run each at a tenth of Symphony's goodput\n")
    md.append("| figure | setup | conditions | system | Nexus goodput (search) | offered r/s | ok r/s | late | "
              "dropped (reason) | bad % | mean / median / max batch | batches | GPU busy | GPUs planned | "
              "plan scale |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in d["runs"]:
        drops = ", ".join(f"{n} {k}" for k, n in r["dropped_by_reason"].items() if n) or "0"
        batches = sum(int(n) for n in r["batches_by_size"].values())
        mx = max(int(b) for b in r["batches_by_size"]) if r["batches_by_size"] else 0
        es = r["engine_stats"] or {}
        md.append(f"| {r['figure']} | {r['setup']} | {r['conditions']} | {LABELS[r['system']]} | "
                  f"{r['search_goodput_rps']:.3g} | {r['offered_rps']:.0f} | {r['ok_rps']:.0f} | {r['late']} | "
                  f"{drops} | {100 * r['bad_rate']:.1f} | {r['mean_batch']:.2f} / {r['median_batch']:g} / {mx} | "
                  f"{batches} | {100 * r['gpu_busy_fraction']:.1f} % | {es.get('planned_gpus', 0):.0f} | " +
                  (f"{es['plan_scale_min']:.2f}" if es.get("plan_scale_min") else "-") + " |")
    md.append("")
    out["nexus_near_zero"] = [{k: r[k] for k in ("figure", "setup", "conditions", "system", "search_goodput_rps",
                                                 "offered_rps", "ok_rps", "late", "dropped_by_reason", "bad_rate",
                                                 "mean_batch", "median_batch", "batches_by_size",
                                                 "gpu_busy_fraction", "engine_stats", "command")}
                              for r in d["runs"]]


def main():
    out = {"paper": {}, "conditions": "zero delays: every config as it is (no `delays`)"}
    md = []
    for fn in (stagger, zoo, mingpus, sensitivity, stability):
        fn(out, md, "zero")
    ref = {"paper": {}, "delays": REFERENCE_DELAYS,
           "conditions": "the same delays for every system: `delays: " + json.dumps(REFERENCE_DELAYS) + "` in every "
                         "config (configs under bench/results/baselines/reference/configs/)"}
    for fn in (stagger, zoo, mingpus, sensitivity, stability):
        fn(ref, md, "reference")
    ref.pop("paper")
    out["reference_conditions"] = ref
    compare(out, md)
    nexus_zero(out, md)
    assert set(CONDITIONS) == {"zero", "reference"}
    save_json(RESULTS / "baselines.json", out)
    (RESULTS / "baselines" / "tables.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
