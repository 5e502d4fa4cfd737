"""What the baseline-comparison drivers (baselines_*.py) share: the systems
compared, the network conditions they run under, and one goodput or
minimum-GPU search per (config, system).

Every system runs through the same CLI on the same config, as one entry of
SYSTEMS: a key (the key of bench/results/baselines.json), a policy string for
`symphony simulate --policy` (docs/policies.md, docs/simulator.md "The
peers") and a label. Adding a variant is one line, e.g.
`System("clockwork_x", "clockwork:...", "Clockwork, variant")`.
"symphony" is our scheduler with its defaults (deferred, target-batch
gathering); "eager" and "deferred_paper" are our engine with the eager rule
and the paper's exact deferred rule (same target-batch gathering): our own
ablation, the control rows of every peer table. Results are deterministic
(virtual clock, fixed seeds).

Conditions: "zero" runs each config as it is (no network delays);
"reference" adds the same delays for every system, `delays: {ctrl_ms: 0.025,
data_ms: 0.075}` (25 us per dispatch, 75 us per request's input), the order
of the Symphony authors' reference tools' defaults on their RDMA testbed.
Reference-condition configs and results go under
bench/results/baselines/reference/.
"""
import json
from collections import namedtuple
from pathlib import Path

import yaml

from simlib import command_line, log, save_json, simulate, write_config

System = namedtuple("System", "key policy label")

SYSTEMS = [
    System("symphony", "deferred", "Symphony"),
    System("eager", "eager", "eager (our engine)"),
    System("deferred_paper", "deferred:paper", "deferred:paper (our engine)"),
    System("clockwork", "clockwork", "Clockwork"),
    System("nexus", "nexus", "Nexus 1 FE"),
    System("nexus_8fe", "nexus:frontends=8", "Nexus 8 FE"),
    System("shepherd", "shepherd", "Shepherd"),
    # The second readings of two peers (issue: which reproduces the paper):
    # Nexus adjusting its previous plan each epoch (its own scheduler's way)
    # and Shepherd sizing over the deadlines in descending order.
    System("nexus_adjust", "nexus:plan=adjust", "Nexus 1 FE, adjusted plan"),
    System("shepherd_descending", "shepherd:sizing=descending", "Shepherd, descending sizing"),
]
# Nexus planning for the measured rates exactly (leaving spare GPUs idle);
# reported beside the default for transparency.
NEXUS_EXACT = System("nexus_exact", "nexus:fill=0", "Nexus 1 FE, exact plan")

ALL_SYSTEMS = SYSTEMS + [NEXUS_EXACT]
LABELS = {s.key: s.label for s in ALL_SYSTEMS}
CONTROLS = ("eager", "deferred_paper")  # our engine's ablation rows

REFERENCE_DELAYS = {"ctrl_ms": 0.025, "data_ms": 0.075}
CONDITIONS = {"zero": None, "reference": REFERENCE_DELAYS}


def flags(system):
    return ["--policy", system.policy]


def add_arguments(ap):
    """The options every driver takes: which conditions and which systems."""
    ap.add_argument("--conditions", default="zero,reference",
                    help="comma-separated: zero (configs as they are), reference (delays " +
                         json.dumps(REFERENCE_DELAYS) + ")")
    ap.add_argument("--only", default="",
                    help="comma-separated system keys: run only these and merge them into the existing results")


def select(systems, only):
    if not only:
        return list(systems)
    keys = only.split(",")
    unknown = set(keys) - {s.key for s in systems}
    if unknown:
        raise SystemExit(f"unknown system(s) {sorted(unknown)}; known: {[s.key for s in systems]}")
    return [s for s in systems if s.key in keys]


def conditions(text):
    names = text.split(",")
    for n in names:
        if n not in CONDITIONS:
            raise SystemExit(f"unknown condition {n!r}; known: {list(CONDITIONS)}")
    return names


def out_dir(base, condition):
    """Where a condition's results go: base itself for zero, base/reference/ otherwise."""
    d = base if condition == "zero" else base / condition
    (d / "configs").mkdir(parents=True, exist_ok=True)
    return d


def with_delays(config, condition):
    """A config dict under a condition (a copy with `delays` for reference)."""
    delays = CONDITIONS[condition]
    if delays is None:
        return config
    c = dict(config)
    c["delays"] = {**(config.get("delays") or {}), **delays}
    return c


def config_under(path, condition, dst_dir):
    """An existing config file under a condition: the file itself for zero,
    a copy with `delays` in dst_dir/configs/ otherwise."""
    if CONDITIONS[condition] is None:
        return Path(path)
    config = yaml.safe_load(open(path))
    return write_config(Path(dst_dir) / "configs" / Path(path).name, with_delays(config, condition))


def save_runs(path, rows, systems_run, extra, cpu_seconds):
    """Writes rows; with a subset of the systems (--only), merges them into
    the existing file, replacing that subset's rows. `cpu_seconds_by_invocation`
    records what each invocation ran and cost."""
    path = Path(path)
    keys = {s.key for s in systems_run}
    invocations = [{"systems": sorted(keys), "cpu_seconds": round(cpu_seconds, 1)}]
    if path.exists():
        old = json.load(open(path))
        kept = [r for r in old.get("runs", []) if r["system"] not in keys]
        if kept:
            rows = kept + rows
            invocations = old.get("cpu_seconds_by_invocation") or [
                {"systems": sorted({r["system"] for r in old["runs"]}), "cpu_seconds": old.get("cpu_seconds")}]
            invocations = invocations + [{"systems": sorted(keys), "cpu_seconds": round(cpu_seconds, 1)}]
    save_json(path, {"runs": rows, **extra, "cpu_seconds_by_invocation": invocations,
                     "cpu_seconds": round(sum(i["cpu_seconds"] or 0 for i in invocations), 1)})


def summarize(r):
    """The parts of a report the results keep."""
    keep = {k: r.get(k) for k in ("goodput_rps", "ok_rps", "offered_rps", "median_batch", "mean_batch",
                                  "gpu_busy_fraction", "gpus_used", "worst_model_bad_rate", "bad_rate",
                                  "queueing_ms", "latency_ms", "requests_by_size", "batches_by_size",
                                  "engine_stats", "min_gpus")}
    if "outcomes" in r:
        keep["dropped_by_reason"] = r["outcomes"]["dropped_by_reason"]
        keep["late"] = r["outcomes"]["late"]
    if "search" in r:
        keep["search_runs"] = len(r["search"]["steps"])
        keep["lowest_failing_rps"] = r["search"].get("lowest_failing_rps")
    return keep


def goodput(config, system, extra=()):
    """The goodput search of one system on one config."""
    args = ["--goodput", *flags(system), *extra]
    r = simulate(config, *args)
    out = summarize(r)
    out["system"] = system.key
    out["policy"] = system.policy
    out["command"] = command_line(config, *args)
    log(f"  {config.name} {system.key}: goodput {r['goodput_rps']:.1f} r/s, median batch {r.get('median_batch')}")
    return out


def min_gpus(config, system, rate, extra=()):
    """The minimum-GPU search of one system on one config."""
    args = ["--min-gpus", rate, *flags(system), *extra]
    r = simulate(config, *args)
    out = summarize(r)
    out["system"] = system.key
    out["policy"] = system.policy
    out["command"] = command_line(config, *args)
    out["steps"] = r["search"]["steps"]
    log(f"  {config.name} {system.key}: {r['min_gpus']} GPUs")
    return out
