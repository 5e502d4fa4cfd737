"""symphony.cluster.Client: a frontend of a Symphony cluster, from Python.

The same shape as the in-process :class:`symphony.Server`: ``infer(model,
inputs)`` returns a :class:`concurrent.futures.Future`, so moving code from a
workstation to a cluster changes the object it calls::

    from symphony.cluster import Client

    with Client("10.0.0.1:7000", token="a shared secret") as client:
        future = client.infer("ResNet50", image_bytes)   # bytes, bytearray, memoryview, numpy array
        output = future.result()                          # bytes, from the backend that ran the batch

Inputs and outputs are bytes: the scheduler never looks at them; the backend
interprets them for its model (an emulated backend answers each request with
the 8-byte FNV-1a hash of its input). A request that was dropped raises
:class:`symphony.Dropped` from ``result()`` (with the scheduler's reason); one
that failed (a backend lost mid-batch, the scheduler lost) raises
:class:`ClusterError`. Calls that cannot be sent raise at once:
:class:`symphony.ModelNotFound`, :class:`symphony.InvalidInput`.

The cluster (scheduler, backends, the token, failure semantics) is described
in docs/cluster.md.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future, InvalidStateError
from typing import Any, Dict, List, NamedTuple, Optional

from . import _cluster
from ._errors import Dropped, InvalidInput, ModelNotFound, ServerNotRunning, SymphonyError

__all__ = ["Client", "ClusterError", "ClusterResult", "ModelInfo"]

_OK, _LATE, _DROPPED, _ERROR = 0, 1, 2, 3


class ClusterError(SymphonyError):
    """The request ended with an error in the cluster (the message says why:
    a lost backend, a lost scheduler, an error the backend reported)."""


class ClusterResult(NamedTuple):
    """A request's output with how it was served (``infer(..., details=True)``)."""

    output: bytes
    outcome: str
    """``"ok"`` (outputs arrived by the deadline) or ``"late"``."""
    latency_ms: float
    """From ``infer()`` to the outputs, in ms."""
    batch_size: int
    """The size of the batch it ran in (all frontends)."""


class ModelInfo(NamedTuple):
    name: str
    slo_ms: float
    max_batch: int


class Client:
    """A frontend of a Symphony cluster (see the module documentation).

    Args:
        scheduler: the scheduler's ``HOST:PORT``; with hot-spare schedulers, all of
            them comma-separated (``"10.0.0.1:7000,10.0.0.2:7000"``): pending requests
            then survive the loss of the primary (docs/cluster.md, "Hot-spare schedulers").
        token: the cluster's token (default: ``SYMPHONY_CLUSTER_TOKEN``).
        name: this frontend's name in the scheduler's logs.
        max_pending: requests in flight at once.
        max_input_bytes: the largest input (the registered input pool holds
            ``max_pending`` of them).
        connect_timeout: seconds to wait for the scheduler; ``None``: do not wait.
        orphan_grace: seconds after its deadline a request without an outcome
            ends with an error.
        verbose: log each connection's UCX transports.
    """

    def __init__(
        self,
        scheduler: str,
        *,
        token: Optional[str] = None,
        name: str = "python",
        max_pending: int = 16384,
        max_input_bytes: int = 65536,
        connect_timeout: Optional[float] = 10.0,
        orphan_grace: float = 2.0,
        verbose: bool = False,
    ) -> None:
        try:
            self._c = _cluster._Client(
                scheduler, token or "", name, max_pending, max_input_bytes, orphan_grace, verbose
            )
        except ValueError as e:
            raise InvalidInput(str(e)) from None
        self._futures: Dict[int, Future] = {}
        self._details: Dict[int, bool] = {}
        self._lock = threading.Lock()
        self._keys = itertools.count(1)
        self._closed = False
        self._thread = threading.Thread(target=self._complete, name="symphony-cluster", daemon=True)
        self._thread.start()
        if connect_timeout is not None:
            try:
                self._c.wait_ready(connect_timeout)
            except RuntimeError as e:
                self.close()
                raise ServerNotRunning(str(e)) from None

    # ---- requests ----------------------------------------------------------------

    def infer(
        self, model: str, data: Any, *, slo_ms: Optional[float] = None, details: bool = False, priority: int = 0
    ) -> Future:
        """Sends a request; returns a Future of its output (bytes), or of a
        :class:`ClusterResult` with ``details=True``. ``priority``: Triton's
        request priority, 1 (the highest) to the model's ``priority_levels``,
        0 (the default) its ``default_priority_level`` (docs/cluster.md#priorities).

        The Future's ``cancel()`` withdraws the request if it is still queued at
        the scheduler (it then ends ``dropped``, ``cancelled``, there and never
        runs; one already running runs, its output unused) and counts in
        ``stats()["cancels"]``.

        Raises ModelNotFound for a model the cluster does not serve,
        InvalidInput for an input over ``max_input_bytes`` or not
        C-contiguous or a priority beyond the model's levels,
        ServerNotRunning before the first connection or after close().
        """
        if self._closed:
            raise ServerNotRunning("the client is closed")
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority < 2**32:
            raise InvalidInput(f"priority must be a whole number from 0 (the model's default), got {priority!r}")
        if isinstance(data, str):
            raise InvalidInput("inputs are bytes-like objects (bytes, bytearray, memoryview, numpy arrays), not str")
        fut: Future = Future()
        key = next(self._keys)
        with self._lock:
            self._futures[key] = fut
            self._details[key] = details
        try:
            ticket = self._c.submit(model, data, None if slo_ms is None else slo_ms / 1000.0, key, priority)
        except BaseException as e:
            with self._lock:
                self._futures.pop(key, None)
                self._details.pop(key, None)
            if isinstance(e, KeyError):
                raise ModelNotFound(e.args[0] if e.args else str(e)) from None
            if isinstance(e, (ValueError, TypeError, BufferError)):
                raise InvalidInput(str(e)) from None
            if isinstance(e, RuntimeError):
                raise ServerNotRunning(str(e)) from None
            raise
        if ticket:  # 0: it ended already
            fut.add_done_callback(lambda f: self._withdraw(f, ticket))
        return fut

    def models(self) -> List[ModelInfo]:
        """The models the cluster serves (empty before the first connection)."""
        return [ModelInfo(*m) for m in self._c.models()]

    def stats(self) -> Dict[str, Any]:
        """Counts at this frontend, as `symphony loadgen` reports them: sent,
        ok, late, dropped (and by reason), errors, in_flight, cancels,
        admission_refused (of the overload drops, those this client refused
        itself with the scheduler's admission tests), duplicate_outcomes,
        duplicate_outputs, unknown_ids, scheduler_losses, resubmitted,
        welcomes, connected."""
        return self._c.stats()

    @property
    def connected(self) -> bool:
        return self._c.connected()

    # ---- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Ends pending requests (their futures raise ClusterError) and stops. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._c.close()
        self._thread.join()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass

    def _withdraw(self, fut: Future, ticket: int) -> None:
        # A Future's done callback, on the thread that ended it: cancel()'s caller's.
        if fut.cancelled() and not self._closed:
            self._c.cancel(ticket)

    # ---- completions (this client's thread) -----------------------------------------

    def _complete(self) -> None:
        while True:
            done = self._c.take(0.1)
            for key, outcome, reason, output, error, latency_s, batch_size in done:
                with self._lock:
                    fut = self._futures.pop(key, None)
                    details = self._details.pop(key, False)
                if fut is None:
                    continue
                try:
                    if outcome in (_OK, _LATE):
                        if details:
                            fut.set_result(
                                ClusterResult(output, "ok" if outcome == _OK else "late", latency_s * 1e3, batch_size)
                            )
                        else:
                            fut.set_result(output)
                    elif outcome == _DROPPED:
                        fut.set_exception(Dropped(reason, error or None))
                    else:
                        fut.set_exception(ClusterError(error))
                except InvalidStateError:  # cancelled by the caller meanwhile
                    pass
            if not done and self._c.closed():
                return
