"""Symphony: deferred batch scheduling for DNN model serving, from Python.

Serve TorchScript models in this process with Symphony's scheduler, which
defers each batch to its schedulable window so that batches grow and goodput
(throughput within latency SLOs) rises::

    import symphony, torch

    with symphony.Server(devices="cpu") as server:
        server.add_model("linear", "linear.pt", input="float32[4]", slo_ms=50)
        server.start()
        future = server.infer("linear", torch.randn(4))   # concurrent.futures.Future
        print(future.result())

Also here: :func:`simulate` (the simulator of ``symphony simulate``),
:class:`LatencyProfile` and :func:`analytical_bound` (paper §3.3).
"""

from __future__ import annotations

# _server imports torch (when it can) before the compiled module loads.
from ._server import HAVE_TORCH, InferResult, Server  # isort: skip
from . import _core
from ._errors import (
    ConfigError,
    Dropped,
    InvalidInput,
    ModelError,
    ModelNotFound,
    Overloaded,
    ServerNotRunning,
    SymphonyError,
)
from ._sim import Bound, analytical_bound, simulate

LatencyProfile = _core.LatencyProfile

__version__: str = _core.__version__  # the file VERSION, through CMake

__all__ = [
    "Server",
    "InferResult",
    "LatencyProfile",
    "Bound",
    "analytical_bound",
    "simulate",
    "SymphonyError",
    "ModelNotFound",
    "InvalidInput",
    "Overloaded",
    "ServerNotRunning",
    "Dropped",
    "ModelError",
    "ConfigError",
    "HAVE_TORCH",
    "__version__",
]

_core._register_errors(
    {
        "SymphonyError": SymphonyError,
        "ModelNotFound": ModelNotFound,
        "InvalidInput": InvalidInput,
        "Overloaded": Overloaded,
        "ServerNotRunning": ServerNotRunning,
        "ConfigError": ConfigError,
    }
)
