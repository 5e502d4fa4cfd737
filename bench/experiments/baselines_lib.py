"""What the baseline-comparison drivers (baselines_*.py) share: the systems
compared and one goodput or minimum-GPU search per (config, system).

Every system runs through the same CLI on the same config: Symphony is
`symphony simulate` with its default policy (deferred, target-batch
gathering); the peers are kinds of the same `--policy` (docs/simulator.md, "The
peers"). Results are deterministic (virtual clock, fixed seeds).
"""
from simlib import command_line, log, simulate

# (key, flags); the keys are those of bench/results/baselines.json.
SYSTEMS = [
    ("symphony", []),
    ("clockwork", ["--policy", "clockwork"]),
    ("nexus", ["--policy", "nexus"]),
    ("nexus_8fe", ["--policy", "nexus:frontends=8"]),
    ("shepherd", ["--policy", "shepherd"]),
]
# Nexus planning for the measured rates exactly (leaving spare GPUs idle);
# reported beside the default for transparency.
NEXUS_EXACT = ("nexus_exact", ["--policy", "nexus:fill=0"])

LABELS = {"symphony": "Symphony", "clockwork": "Clockwork", "nexus": "Nexus (1 FE)", "nexus_8fe": "Nexus (8 FE)",
          "shepherd": "Shepherd", "nexus_exact": "Nexus (1 FE, exact plan)"}


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


def goodput(config, system, flags, extra=()):
    """The goodput search of one system on one config."""
    args = ["--goodput", *flags, *extra]
    r = simulate(config, *args)
    out = summarize(r)
    out["system"] = system
    out["command"] = command_line(config, *args)
    log(f"  {config.name} {system}: goodput {r['goodput_rps']:.1f} r/s, median batch {r.get('median_batch')}")
    return out


def min_gpus(config, system, flags, rate, extra=()):
    """The minimum-GPU search of one system on one config."""
    args = ["--min-gpus", rate, *flags, *extra]
    r = simulate(config, *args)
    out = summarize(r)
    out["system"] = system
    out["command"] = command_line(config, *args)
    out["steps"] = r["search"]["steps"]
    log(f"  {config.name} {system}: {r['min_gpus']} GPUs")
    return out
