"""The simulator and the analytical bounds, from Python.

:func:`simulate` runs the same code as ``symphony simulate --json -`` (the
``symphony::simtool`` library) and returns the same report as a dict; the
config format is that of docs/simulator.md, as a YAML file or as a dict.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, NamedTuple, Optional, Union

from . import _core

__all__ = ["simulate", "analytical_bound", "Bound"]

Progress = Callable[[str, int, float, float, bool], Any]


def simulate(
    config: Union[Mapping[str, Any], str, "os.PathLike[str]"],
    *,
    goodput: bool = False,
    min_gpus: Union[float, bool, None] = None,
    policy: Optional[str] = None,
    gather: Optional[str] = None,
    seed: Optional[int] = None,
    gpus: Optional[int] = None,
    rate: Optional[float] = None,
    base_dir: Union[str, "os.PathLike[str]", None] = None,
    trace_out: Union[str, "os.PathLike[str]", None] = None,
    progress: Optional[Progress] = None,
) -> dict:
    """Runs a simulator experiment and returns the report of ``symphony simulate --json -``.

    Args:
        config: a YAML config file, or the config itself as a dict (the same keys as
            the YAML; relative paths in it are resolved against ``base_dir``, default
            the current directory). Give a dict a ``name``: the report names the config.
        goodput: search the goodput (``--goodput``): the highest rate at which every
            model's bad rate stays within ``max_bad_rate``.
        min_gpus: search the fewest GPUs serving this total rate (``--min-gpus R``);
            ``True``: the rate of the config's ``search.min_gpus``.
        policy, gather, seed, gpus, rate: override the config, as the CLI options do
            (``rate`` only for a plain run: a search sets the rate itself).
        trace_out: write every batch and request of the reported run to this CSV.
        progress: called after each run of a search with
            ``(search, index, rate_or_gpus, worst_bad_rate, passed)``.

    Same config, same seed: the same report (the simulator is deterministic). The GIL
    is released while it runs.

    Raises:
        ConfigError: the config is invalid (the message names the file, line and key).
    """
    if goodput and min_gpus not in (None, False):
        raise ValueError("goodput and min_gpus exclude each other")
    if rate is not None and (goodput or min_gpus not in (None, False)):
        raise ValueError("rate excludes goodput and min_gpus: a search sets the rate itself")
    if isinstance(config, Mapping):
        source = json.dumps(config, indent=2)  # JSON is YAML; one key per line for messages
        is_path = False
        origin = "<dict>"
    elif isinstance(config, (str, os.PathLike)):
        source = os.fspath(config)
        is_path = True
        origin = source
    else:
        raise TypeError(f"config must be a dict or a path to a YAML file, got {type(config).__name__}")
    mode = "run"
    min_rate = 0.0
    if goodput:
        mode = "goodput"
    elif min_gpus is not None and min_gpus is not False:
        mode = "min_gpus"
        if min_gpus is not True:
            min_rate = float(min_gpus)
            if not min_rate > 0:
                raise ValueError("min_gpus must be a positive rate (requests/s) or True")
    text = _core._simulate(
        source,
        is_path,
        origin,
        os.fspath(base_dir) if base_dir is not None else os.getcwd(),
        mode,
        min_rate,
        policy,
        gather,
        seed,
        gpus,
        rate,
        progress,
        os.fspath(trace_out) if trace_out is not None else None,
    )
    return json.loads(text)


class Bound(NamedTuple):
    """An analytical batch-size and throughput bound (paper §3.3)."""

    batch: int
    """The largest batch size within the bound (0: not even a batch of one fits)."""
    latency_ms: float
    """l(batch)."""
    throughput_rps: float
    """gpus * batch / l(batch), requests per second."""


def analytical_bound(
    profile: _core.LatencyProfile,
    slo_ms: float,
    gpus: int,
    *,
    max_batch: Optional[int] = None,
    coordinated: bool = True,
) -> Bound:
    """The batch size and throughput a perfect scheduler reaches on ``gpus`` GPUs.

    Coordinated (staggered) execution, as Symphony does: the GPUs start their batches
    l(b)/N apart, so the largest b with (1 + 1/N) * l(b) <= SLO. Without coordination
    (``coordinated=False``; every GPU batches on its own): the largest b with
    2 * l(b) <= SLO. Throughput N * b / l(b) either way.

        >>> p = LatencyProfile.linear(1.053, 5.072, max_batch=64)
        >>> analytical_bound(p, slo_ms=25, gpus=8).batch
        16
    """
    batch, latency_ms, rps = _core._bound(profile, float(slo_ms), int(gpus), max_batch, coordinated)
    return Bound(batch, latency_ms, rps)
