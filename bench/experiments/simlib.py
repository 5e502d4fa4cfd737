"""Helpers shared by the experiment drivers in this directory.

Every experiment runs the real simulator through the CLI (`symphony simulate
<config> --json -`), so its numbers come from the same code path a user runs.
Configs are written as YAML files next to the results (so each run can be
repeated by hand) and reports are parsed from the CLI's JSON.

Environment: SYMPHONY_BIN overrides the binary (default build/release/symphony).
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


def binary():
    return Path(os.environ.get("SYMPHONY_BIN", ROOT / "build" / "release" / "symphony"))


def results_dir(name):
    d = RESULTS / name
    (d / "configs").mkdir(parents=True, exist_ok=True)
    return d


def write_config(path, config):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False, default_flow_style=None, width=120)
    return path


def simulate(config_path, *args):
    """Runs `symphony simulate <config_path> --json - -q <args>` and returns the report."""
    cmd = [str(binary()), "simulate", str(config_path), "--json", "-", "-q", *map(str, args)]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def command_line(config_path, *args):
    """The command that reproduces one run, relative to the repository root."""
    rel = os.path.relpath(config_path, ROOT)
    return " ".join(["build/release/symphony", "simulate", rel, *map(str, args)])


def pmap(fn, items, jobs):
    """Maps fn over items with `jobs` concurrent simulator processes, in order."""
    items = list(items)
    if jobs <= 1:
        return [fn(x) for x in items]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
        return list(ex.map(fn, items))


class Clock:
    """Wall and CPU time of the experiment's child processes, for the record."""

    def __init__(self):
        self.t0 = time.time()
        self.c0 = os.times()

    def cpu_seconds(self):
        t = os.times()
        return (t.children_user - self.c0.children_user) + (t.children_system - self.c0.children_system)

    def wall_seconds(self):
        return time.time() - self.t0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def save_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
