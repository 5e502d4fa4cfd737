"""symphony.Server: serve TorchScript models from Python with deferred batch scheduling.

The server runs in this process, in C++ threads: a scheduler (model threads and
a rank thread), one executor per device, and one *completion thread* that
completes the futures. Client threads call :meth:`Server.infer` and get a
:class:`concurrent.futures.Future`; coroutines ``await`` :meth:`Server.infer_async`.

Threads and the GIL: ``infer()`` holds the GIL only to convert the inputs and
queue the request (it never waits for the scheduler); server threads never
take the GIL; the completion thread takes it once per burst of outcomes.
Calls that can block (``add_model``, which may profile the model;
``remove_model``; ``stop``) release the GIL.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import threading
import weakref
from concurrent.futures import Future, InvalidStateError
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

try:  # torch tensors in and out when torch is importable; numpy arrays otherwise
    import torch as _torch
    from torch.utils import dlpack as _dlpack
except ImportError:  # pragma: no cover - exercised where torch is absent
    _torch = None
    HAVE_TORCH = False
else:
    HAVE_TORCH = True

from . import _core  # after torch: both use the same libtorch
from ._errors import ConfigError, Dropped, InvalidInput, ModelError

if HAVE_TORCH:
    _core._set_torch(_torch.Tensor, _dlpack.to_dlpack, _dlpack.from_dlpack)

__all__ = ["Server", "InferResult", "HAVE_TORCH"]

_log = logging.getLogger("symphony")

_OK, _LATE, _DROPPED, _ERROR = 0, 1, 2, 3
_OUTCOME_NAMES = ("ok", "late", "dropped", "error")


class InferResult(NamedTuple):
    """A request's outputs with how it was served (``infer(..., details=True)``)."""

    output: Any
    """The model's output: a tensor, or a tuple of tensors (None on emulated devices)."""
    outcome: str
    """``"ok"`` (finished by its deadline) or ``"late"`` (finished after it)."""
    latency_ms: float
    """From ``infer()`` to the outcome, in ms."""
    batch_size: int
    """The size of the batch the request ran in."""
    device: str
    """The device that ran it, e.g. ``"cpu:0"``."""


class _DetailedFuture(Future):  # type: ignore[type-arg]
    """A future whose result is an InferResult (it knows the device names)."""

    def __init__(self, devices: Sequence[str]) -> None:
        super().__init__()
        self.devices = devices


# ---- completions (on the server's completion thread, with the GIL) ------------------


def _result_or_error(item: tuple, devices: Optional[Sequence[str]]) -> Tuple[bool, Any]:
    _, outcome, value, reason, latency_s, batch_size, device = item
    if outcome <= _LATE:
        if devices is None:
            return True, value
        name = devices[device] if 0 <= device < len(devices) else "?"
        return True, InferResult(value, _OUTCOME_NAMES[outcome], latency_s * 1e3, batch_size, name)
    if outcome == _DROPPED:
        return False, Dropped(reason, value)
    return False, ModelError(value)


def _settle(fut: Future, item: tuple, devices: Optional[Sequence[str]]) -> None:  # type: ignore[type-arg]
    ok, value = _result_or_error(item, devices)
    try:
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)
    except InvalidStateError:  # the client cancelled the future; the result is discarded
        pass


def _settle_async(items: List[tuple]) -> None:
    """Completes asyncio futures, on their event loop's thread."""
    for item in items:
        token = item[0]
        fut, devices = token if token.__class__ is tuple else (token, None)
        if fut.done():  # cancelled (its task was)
            continue
        ok, value = _result_or_error(item, devices)
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def _dispatch(items: List[tuple]) -> None:
    """Called by the completion thread with a burst of outcomes:
    ``(token, outcome, value, reason, latency_s, batch_size, device)`` each."""
    by_loop: Optional[Dict[asyncio.AbstractEventLoop, List[tuple]]] = None
    for item in items:
        try:
            token = item[0]
            cls = token.__class__
            if cls is Future:
                _settle(token, item, None)
            elif cls is _DetailedFuture:
                _settle(token, item, token.devices)
            else:  # an asyncio future, or (asyncio future, device names)
                fut = token[0] if cls is tuple else token
                if by_loop is None:
                    by_loop = {}
                by_loop.setdefault(fut.get_loop(), []).append(item)
        except Exception:  # never lose the rest of the burst
            _log.exception("symphony: cannot complete a request's future")
    if by_loop:
        for loop, batch in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_async, batch)
            except RuntimeError:  # the loop is closed: nobody can await these any more
                pass


# ---- servers alive at exit are stopped before the interpreter finalizes -------------

_live: "weakref.WeakSet[Server]" = weakref.WeakSet()
_live_lock = threading.Lock()


@atexit.register
def _stop_all_at_exit() -> None:
    with _live_lock:
        servers = list(_live)
    for s in servers:
        s.stop(cancel=True)


# ---- input specs ------------------------------------------------------------------------

InputSpec = Union[str, Tuple[Any, Sequence[int]]]


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    if _torch is not None and isinstance(dtype, _torch.dtype):
        return str(dtype).replace("torch.", "")
    try:
        import numpy

        return numpy.dtype(dtype).name
    except (ImportError, TypeError) as e:
        raise TypeError(f"cannot read {dtype!r} as a dtype") from e


def _spec_string(spec: InputSpec) -> str:
    """'float32[3,64,64]' from itself or from (dtype, shape)."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2:
        dtype, shape = spec
        return f"{_dtype_name(dtype)}[{','.join(str(int(d)) for d in shape)}]"
    raise TypeError(f"an input spec is 'float32[3,64,64]' or (dtype, shape), got {spec!r}")


# ---- the server -------------------------------------------------------------------------


def _priority(priority: int) -> int:
    """A request's priority as the server takes it (a uint32), or InvalidInput."""
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority < 2**32:
        raise InvalidInput(f"priority must be a whole number from 0 (the model's default), got {priority!r}")
    return priority


class Server:
    """An in-process Symphony server.

    Args:
        devices: ``"auto"`` (every CUDA GPU, else the CPU), ``"cpu"``, ``"cpu:2"`` (two CPU
            workers), ``"cuda:0,cuda:1"``, or ``"emulated:8"`` (eight emulated GPUs that
            run each batch for exactly l(b) of the model's linear profile and run no
            model: inputs are ignored and outputs are None), or ``"cuda-emulated"`` /
            ``"cuda-emulated:0"`` (the same on real GPUs: each batch is a busy kernel
            lasting l(b); needs a build with the CUDA toolkit).
        policy: the exec policy, in the language every Symphony tool takes
            (docs/policies.md): ``"deferred"`` (default), ``"deferred:paper"``,
            ``"deferred:<key>=<x>,..."``, ``"eager"``, ``"timeout:<ms>"`` or ``"timeout:<f>slo"``.
        gather: ``"target_batch"`` (default) or ``"sliding_window"``.
        cpu_threads: libtorch intra-op threads per CPU device.
        shards: model-shard threads of the scheduler.
        max_models: models the server can hold.
        max_pending: requests inside the server at once; beyond it ``infer()`` raises
            :class:`Overloaded`.
        safety_margin_ms: slack the scheduler keeps against timer jitter and execution noise.
        profile_latency: ``"p90"`` (default), ``"p99"`` or ``"median"``: which column of a measured profile the
            scheduler plans with.
        profile_max_batch, profile_repeats: automatic profiling of models without a profile.
        recalibrate: whether each model's profile follows the batch times its devices measure
            while serving (default True); False plans with the offline profile throughout.
        load_run_wait_ms: a model loaded while others serve runs its load check, profile and
            warm-up in gaps of its device's schedule; a run that finds none this long fails the
            load (default 5000; docs/serving.md#loading-a-model-while-others-serve).
        overlap: ``"auto"`` (default: on when every device is a CUDA GPU), ``"on"`` or ``"off"``:
            dispatch each batch ahead of its device's free time by its learned staging and launch
            cost, so that this CPU work overlaps the batch before (docs/serving.md; ``stats()``
            reports what was learned under ``dispatch``).
        defer_without_history: whether a model's first requests, before it has an arrival
            history, are deferred to their window as the paper's rule does (``True``), or sent at
            their earliest (``False``, default), as ``defer_without_history:`` in a serve config.
        admission: refuse at once (:class:`Dropped`, reason ``overload``) a request the backlog
            ahead of it could not serve in time (default True), as ``admission:`` in a serve config;
            False queues it to expire (docs/architecture.md#admission).
        admission_backlog_share: the share of a request's time left its model's backlog may take
            for it to be admitted, 0.05 to 1 (default None: 1 with ``target_batch``, only what cannot
            end in time is refused; 0.5 with ``sliding_window``); lower keeps admitted requests' waits
            shorter under overload
            (docs/serving.md#how-long-admitted-requests-may-wait).
        pinned_memory_pool_byte_size: the host memory pool every request's inputs land in
            (``symphony serve --pinned-memory-pool-byte-size``; docs/front.md#the-host-memory-pool),
            made by :meth:`start`; 0 (default): each model's max batch x sample bytes x 8, at least
            64 MiB, grown as models are added later. Pinned when a device is a CUDA GPU.
        outputs: ``"auto"`` (torch tensors when torch is importable, else numpy arrays),
            ``"torch"`` or ``"numpy"``.
        log: called with progress messages (loading, profiling); default: quiet.
        model_repository: serve the models of a model repository in Triton's layout
            (``DIR/<model>/config.pbtxt``, ``DIR/<model>/<version>/model.pt``;
            docs/repository.md), as ``symphony serve --model-repository DIR`` does. The
            models the mode loads at start are loaded (and profiled where needed) here.
        model_control_mode: ``"none"`` (every model at start; no load or unload),
            ``"poll"`` (every model, and the repository rescanned every
            ``repository_poll_secs``) or ``"explicit"`` (``load_models`` at start, then
            :meth:`load_model` and :meth:`unload_model`). Triton's modes.
        load_models: explicit mode: the models loaded at start; ``["*"]``: every model.
        repository_poll_secs: poll mode: seconds between rescans.
        default_slo_ms: the SLO of a repository model whose config has no
            ``symphony.slo_ms`` parameter.

    Use it as a context manager; leaving the block stops the server (draining
    queued requests, or cancelling them when the block raised)::

        with symphony.Server(devices="cpu") as server:
            server.add_model("linear", "linear.pt", input="float32[4]", slo_ms=50)
            server.start()
            y = server.infer("linear", torch.randn(4)).result()

    or from a model repository, loading and unloading while it serves::

        with symphony.Server(model_repository="models", model_control_mode="explicit") as server:
            server.start()
            server.load_model("resnet18")
            server.repository_index()  # [{"name": "resnet18", "version": "1", "state": "READY", ...}]
    """

    def __init__(
        self,
        devices: str = "auto",
        policy: str = "deferred",
        *,
        gather: str = "target_batch",
        cpu_threads: int = 1,
        shards: int = 1,
        max_models: int = 64,
        max_pending: int = 1 << 16,
        safety_margin_ms: float = 1.0,
        profile_latency: str = "p90",
        profile_max_batch: int = 32,
        profile_repeats: int = 20,
        recalibrate: bool = True,
        load_run_wait_ms: float = 5000.0,
        overlap: str = "auto",
        defer_without_history: bool = False,
        admission: bool = True,
        admission_backlog_share: Optional[float] = None,
        pinned_memory_pool_byte_size: int = 0,
        outputs: str = "auto",
        log: Optional[Any] = None,
        model_repository: Union[str, os.PathLike, None] = None,
        model_control_mode: str = "none",
        load_models: Sequence[str] = (),
        repository_poll_secs: float = 15.0,
        default_slo_ms: float = 100.0,
    ) -> None:
        if isinstance(load_models, str):
            raise TypeError("load_models is a list of model names, e.g. ['resnet18']")
        if model_repository is None and (model_control_mode != "none" or load_models):
            raise ConfigError("model_control_mode and load_models need model_repository=DIR")
        if profile_latency not in ("median", "p90", "p99"):
            raise ConfigError(f"profile_latency must be 'median', 'p90' or 'p99', got {profile_latency!r}")
        if outputs == "auto":
            numpy_outputs = not HAVE_TORCH
        elif outputs == "torch":
            if not HAVE_TORCH:
                raise ConfigError("outputs='torch' but torch cannot be imported")
            numpy_outputs = False
        elif outputs == "numpy":
            numpy_outputs = True
        else:
            raise ConfigError(f"outputs must be 'auto', 'torch' or 'numpy', got {outputs!r}")
        self._core = _core.Server(
            devices,
            policy,
            gather,
            cpu_threads,
            shards,
            max_models,
            max_pending,
            safety_margin_ms,
            profile_latency,
            profile_max_batch,
            profile_repeats,
            bool(recalibrate),
            float(load_run_wait_ms),
            overlap,
            log,
            _dispatch,
            numpy_outputs,
            bool(defer_without_history),
            bool(admission),
            None if admission_backlog_share is None else float(admission_backlog_share),
        )
        if pinned_memory_pool_byte_size < 0:
            raise ConfigError(f"pinned_memory_pool_byte_size must be >= 0, got {pinned_memory_pool_byte_size}")
        self._pool_byte_size = int(pinned_memory_pool_byte_size)
        self._submit = self._core.submit
        self._devices = tuple(self._core.devices)
        self._control_mode = model_control_mode if model_repository is not None else None
        if model_repository is not None:
            try:
                if not hasattr(self._core, "serve_repository"):
                    raise ConfigError("this build serves no model repository (configure with SYMPHONY_WITH_FRONT=ON)")
                self._core.serve_repository(
                    os.fspath(model_repository),
                    model_control_mode,
                    list(load_models),
                    float(repository_poll_secs),
                    float(default_slo_ms),
                )
            except BaseException:
                self._core.stop(True)
                raise
        with _live_lock:
            _live.add(self)

    # -- context manager --
    def __enter__(self) -> "Server":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.stop(cancel=exc_type is not None)

    # -- models --
    def add_model(
        self,
        name: str,
        path: Union[str, os.PathLike, None] = None,
        *,
        slo_ms: float,
        max_batch: int = 32,
        profile: Union[str, os.PathLike, None] = None,
        input: Optional[InputSpec] = None,
        inputs: Optional[Sequence[InputSpec]] = None,
        alpha_ms: Optional[float] = None,
        beta_ms: Optional[float] = None,
        max_defer_ms: Optional[float] = None,
        max_queue: int = 0,
        devices: Union[str, Sequence[str], None] = None,
        profile_inputs: Optional[Sequence[InputSpec]] = None,
        priority_levels: int = 0,
        default_priority_level: int = 0,
        cuda_graphs: str = "auto",
        jit_executor: str = "auto",
    ) -> None:
        """Loads a TorchScript model on every device (or on ``devices``), warms it up and,
        if it has no profile yet, measures its latency profile (seconds; the GIL is released).

        Args:
            name: the name requests use.
            path: the TorchScript file (not needed on emulated devices).
            slo_ms: the default latency SLO of its requests.
            max_batch: the largest batch to form.
            profile: a profile file; default: ``<model stem>.<device>.profile.yaml``
                beside the model, measured and written on first use.
            input: the model's input, ``"float32[3,64,64]"`` or ``(torch.float32, (3, 64, 64))``
                (the shape of one sample, without the batch dimension); a dimension of -1
                takes any size (a batch runs one forward per shape among its samples).
            inputs: the same for a model with several inputs (a list).
            alpha_ms, beta_ms: emulated devices: the profile l(b) = alpha_ms * b + beta_ms.
            max_defer_ms: the longest a request waits for its batch to fill (default:
                no cap, the paper's deferral; 0: eager).
            max_queue: the most of its requests queued at once; more are dropped at once
                (``queue_full``). Default 0: no bound but the server's own.
            devices: the server's devices that serve it, by name as :attr:`devices` gives
                them (``"cpu:1"``, or ``["cuda:0", "cuda:2"]``); its batches run there only.
                Default: every device.
            profile_inputs: when an input has a -1: each input's sample as the model is
                warmed up and profiled with, e.g. ``["int64[128]"]`` (the size most requests
                have). Default: the inputs with every -1 as 1.
            priority_levels: Triton's ``dynamic_batching.priority_levels``: its requests'
                ``priority`` is 1 (the highest) to this (see :meth:`infer`); under overload
                lower priorities are refused first. Default 0: one level.
            default_priority_level: the priority of a request that gives none (1 to
                ``priority_levels``). Default 0: the lowest.
            cuda_graphs: ``"auto"``, ``"on"`` or ``"off"``: on CUDA GPUs, capture its forward as
                a CUDA graph per batch size at load and replay it (``"auto"``: where the load
                measured the replay faster than launching). Inputs with a -1 never are.
            jit_executor: ``"auto"``, ``"profiling"`` or ``"simple"``: TorchScript's executor for
                its forward. ``"simple"`` runs the graph as loaded (its first run costs about half
                the profiling executor's on a CPU); ``"auto"``: simple on CPUs, profiling on GPUs.

        Raises:
            ConfigError: the file cannot be loaded, a spec is malformed, the name is taken...
            ServerNotRunning: the server was stopped.
        """
        if input is not None and inputs is not None:
            raise TypeError("give input or inputs, not both")
        specs = [input] if input is not None else list(inputs or [])
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or not 0 <= max_queue < 2**30:
            raise ConfigError(f"model '{name}': max_queue must be a whole number >= 0, got {max_queue!r}")
        for key, value in (("priority_levels", priority_levels), ("default_priority_level", default_priority_level)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
                raise ConfigError(f"model '{name}': {key} must be a whole number >= 0, got {value!r}")
        if default_priority_level and not 1 <= default_priority_level <= priority_levels:
            raise ConfigError(
                f"model '{name}': default_priority_level {default_priority_level} must be in "
                f"[1, priority_levels = {priority_levels}]"
            )
        self._core.add_model(
            name,
            "" if path is None else os.fspath(path),
            [_spec_string(s) for s in specs],
            float(slo_ms),
            max_batch,
            "auto" if profile is None else os.fspath(profile),
            alpha_ms,
            beta_ms,
            max_defer_ms,
            max_queue,
            devices if isinstance(devices, str) else ", ".join(devices or []),
            [_spec_string(s) for s in profile_inputs or []],
            priority_levels,
            default_priority_level,
            cuda_graphs,
            jit_executor,
        )

    def remove_model(self, name: str) -> None:
        """Stops accepting requests for the model, waits until its queued requests have
        run or expired, then unloads it. Raises :class:`ModelNotFound`."""
        self._core.remove_model(name)

    # -- the model repository (model_repository=DIR) --
    def load_model(self, name: str, config: Union[str, Dict[str, Any], None] = None) -> None:
        """Loads (or reloads) the repository's model ``name`` and returns once it serves;
        explicit mode only, after :meth:`start`. Other models serve on meanwhile. A model
        already served from the same files and config is left as it is.

        Args:
            name: the model's folder in the repository.
            config: a ModelConfig as JSON (a string, or a dict) used instead of the
                folder's ``config.pbtxt``, as the protocol's ``parameters.config``.

        Raises:
            ModelNotFound: the repository has no folder ``name``.
            ConfigError: the model cannot be read or loaded (the reason names the file,
                field or line), or the server was not made with ``model_control_mode="explicit"``.
            ServerNotRunning: before :meth:`start`, or after :meth:`stop`.
        """
        self._check_control("load_model")
        if isinstance(config, dict):
            config = json.dumps(config)
        elif config is not None and not isinstance(config, str):
            raise TypeError(f"config is a JSON string or a dict, got {type(config).__name__}")
        self._core.load_model(name, config or "")

    def unload_model(self, name: str) -> None:
        """Unloads a repository model and returns once it is freed: its new requests are
        refused at once (:class:`ModelNotFound`), and its queued requests run or expire
        first, as in :meth:`remove_model`. Explicit mode only, after :meth:`start`.

        Raises:
            ModelNotFound: the model is not loaded.
            ConfigError, ServerNotRunning: as :meth:`load_model`.
        """
        self._check_control("unload_model")
        self._core.unload_model(name)

    def repository_index(self, ready: bool = False) -> List[Dict[str, str]]:
        """The repository's models, as the protocol's repository index lists them: a dict
        per chosen version of each model with ``name``, ``version``, ``state``
        (``"READY"``, ``"UNAVAILABLE"``, ``"LOADING"``, ``"UNLOADING"``) and ``reason``
        (empty when ready; ``"not loaded"`` for a folder not loaded yet). Sorted by name,
        then version.

        Args:
            ready: only the models that serve.
        """
        return list(self._core.repository_index(bool(ready)))

    def _check_control(self, what: str) -> None:
        if self._control_mode is None:
            raise ConfigError(f"{what} needs a server made with model_repository=DIR")
        if self._control_mode != "explicit":
            raise ConfigError(
                f"{what} is not allowed with model_control_mode={self._control_mode!r} "
                "(make the server with model_control_mode='explicit')"
            )

    def model_names(self) -> List[str]:
        """The names of the models served."""
        return self._core.model_names()

    def model_profile(self, name: str) -> _core.LatencyProfile:
        """The latency profile the scheduler uses for the model."""
        return self._core.model_profile(name)

    @property
    def devices(self) -> Tuple[str, ...]:
        """The devices batches run on, e.g. ``("cpu:0",)``."""
        return self._devices

    # -- lifecycle --
    def start(self) -> None:
        """Starts scheduling; models added before are served from now on (models can
        also be added later), and makes the host memory pool requests' inputs land in."""
        self._core.start(self._pool_byte_size)

    def start_front(
        self,
        http: Optional[str] = None,
        grpc: Optional[str] = None,
        *,
        max_inflight: int = 8192,
        max_connections: int = 0,
        request_timeout_s: float = 10.0,
        idle_timeout_s: float = 60.0,
        overload_hold_s: float = 0.5,
        allow_client_shm: bool = False,
    ) -> Dict[str, str]:
        """Serves this server's models to Open Inference Protocol (KServe v2) clients,
        as ``symphony serve --http/--grpc`` does (docs/front.md): REST on ``http`` and
        gRPC on ``grpc``, each ``"HOST:PORT"`` (port 0 picks a free port).

        Returns the addresses it listens on, e.g. ``{"http": "127.0.0.1:41234"}``. Models
        added later are served too. :meth:`stop` stops the front with the server: new
        requests get 503, and those inside the server still get their responses.
        ``allow_client_shm`` lets clients register system shared memory regions and
        name them in requests (``--allow-client-shm``; docs/front.md#system-shared-memory).
        ``max_connections`` bounds the HTTP connections at once; 0 takes half the
        process's limit of open descriptors (at most 65536). ``overload_hold_s`` is how long
        a refusal is held under a flood (each hold 0.5-1.5 times it): over HTTP when the
        front is behind its clients, over gRPC when its connection had another within the
        hold (``--overload-hold``; 0: answer at once; docs/front.md#overload).

        Raises:
            ConfigError: no address given, an address that cannot be used, or a front
                already running.
        """
        if not http and not grpc:
            raise ConfigError("start_front needs http='HOST:PORT' and/or grpc='HOST:PORT'")
        return dict(
            self._core.start_front(
                http or "",
                grpc or "",
                max_inflight,
                max_connections,
                request_timeout_s,
                idle_timeout_s,
                overload_hold_s,
                allow_client_shm,
            )
        )

    def stop(self, cancel: bool = False) -> None:
        """Stops the server; every pending request resolves before this returns.

        Args:
            cancel: drop the queued requests (their futures raise :class:`Dropped`
                with reason ``"shutdown"``) instead of running them (the default).

        Idempotent; the GIL is released while it waits.
        """
        self._core.stop(cancel)

    def stats(self) -> Dict[str, Any]:
        """The figures of the ``symphony serve`` report, since ``start()``.

        Keys: ``elapsed_s``, ``sent``, ``ok``, ``late``, ``dropped``, ``errors``,
        ``goodput_rps``, ``bad_rate``, ``models`` (name -> ``model``, ``version``, ``loaded``, the same
        counts plus ``late_by_deadline`` (the late ones still answered by the client's
        deadline), ``dropped_by_reason``, ``latency_ms`` {p50, p99, max}, ``refusal_latency_ms``
        {count, p50, p99, max} (the requests refused on arrival: ``overload``, ``queue_full``,
        ``infeasible``; submission to the outcome), ``mean_batch``,
        ``batch_histogram`` {size: batches}, ``max_batch``, ``l1_ms``, ``profile``
        {``recalibrating``, ``samples``, ``updates``, ``offline_ms`` and ``in_use_ms``
        {batch size: l(b)}: the profile planned with now against the offline one}, ``staging``
        {``inputs``, ``views``, ``samples``, ``bytes_copied``, ``staging_us``, ``graph_batches``}: how
        its batches' inputs were formed, as in serve's report) and
        ``devices`` (a list of {``name``, ``busy_fraction``, ``busy_s``, ``batches``}) and ``dispatch``
        ({``overlap``, ``d_ctrl_us``, ``d_data_us``, ``samples``}: what batches are dispatched ahead by,
        and how many batches were measured, as of the learner's last update, every 200 ms) and
        ``host_memory_pool`` ({``byte_size``, ``pinned``, ``in_use``, ``high_water``,
        ``blocks_in_use``, ``acquired``, ``exhausted``}: the pool requests' inputs land in, and
        the requests refused because it was full).
        A model repository's model with several versions served since start is one entry per
        version, named ``"<model> version <v>"``. An unloaded version stays, with its final
        counts and ``loaded`` false; a version counts across its reloads.
        """
        return self._core.stats()

    # -- requests --
    def infer(
        self,
        model: str,
        inputs: Any,
        deadline_ms: Optional[float] = None,
        *,
        details: bool = False,
        priority: int = 0,
    ) -> "Future[Any]":
        """Submits one request and returns a :class:`concurrent.futures.Future`.

        Args:
            model: the model's name.
            inputs: per model input a ``torch.Tensor`` or a numpy array of the input
                spec's shape (one sample), or with a leading dimension k (k samples,
                1 to the model's max batch, answered as one output of k rows), or a
                list/tuple of them for a model with several inputs. Inputs in host memory
                are copied once, here, into the server's host memory pool (as ``serve``'s
                transports land a request's bytes), so they may be modified as soon as
                ``infer()`` returns; CUDA tensors are used where they are: do not modify
                them until the future is done.
            deadline_ms: the caller's deadline from now (default: none). The request is
                planned against the shorter of it and the model's SLO, so a generous
                deadline never adds waiting; ok means done by that target.
            details: resolve to an :class:`InferResult` (output, outcome, latency,
                batch size, device) instead of the output alone.
            priority: Triton's request priority: 1 (the highest) to the model's
                ``priority_levels``; 0 (the default) its ``default_priority_level``.
                Under overload lower priorities are refused first (``overload``);
                without overload it changes nothing. A model of one level takes any.

        The future resolves to the output (a tensor, or a tuple for a model returning a
        tuple; torch tensors when torch is importable, else numpy arrays), also when the
        request finished late; or raises :class:`Dropped` (with the reason) or
        :class:`ModelError` (with the model's message). Done-callbacks run on the
        server's completion thread: keep them short and never wait in them for
        another request. Cancelling the future does not withdraw the request.

        Raises (at once, nothing queued):
            ModelNotFound, InvalidInput (names the mismatch, or a priority beyond the
            model's levels), Overloaded (also when the host memory pool cannot hold the
            inputs now: the message names the pool), ServerNotRunning.
        """
        fut = _DetailedFuture(self._devices) if details else Future()
        self._submit(model, inputs, deadline_ms, fut, _priority(priority))
        return fut

    def infer_async(
        self,
        model: str,
        inputs: Any,
        deadline_ms: Optional[float] = None,
        *,
        details: bool = False,
        priority: int = 0,
    ) -> "asyncio.Future[Any]":
        """The same as :meth:`infer` for asyncio: returns an awaitable
        :class:`asyncio.Future` of the running event loop::

            y = await server.infer_async("linear", x)

        Bad requests raise at once, as in ``infer()``; cancelling the awaiting task
        discards the result.
        """
        fut = asyncio.get_running_loop().create_future()
        self._submit(model, inputs, deadline_ms, (fut, self._devices) if details else fut, _priority(priority))
        return fut

    def __repr__(self) -> str:
        return f"symphony.Server(devices={list(self._devices)!r}, models={self.model_names()!r})"
