"""Type stubs of the compiled module symphony._core (use the symphony package)."""

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

__version__: str

class LatencyProfile:
    """A model's latency profile l(b), in milliseconds."""

    @staticmethod
    def linear(alpha_ms: float, beta_ms: float, max_batch: int) -> LatencyProfile: ...
    @staticmethod
    def from_table(
        points: Union[Mapping[int, float], Sequence[Tuple[int, float]]], max_batch: int = 0
    ) -> LatencyProfile: ...
    @staticmethod
    def read_csv(path: str, max_batch: int = 0) -> LatencyProfile: ...
    @property
    def max_batch(self) -> int: ...
    @property
    def alpha_ms(self) -> float: ...
    @property
    def beta_ms(self) -> float: ...
    def latency_ms(self, batch: int) -> float: ...
    def largest_batch_within(self, budget_ms: float, limit: Optional[int] = None) -> int: ...
    def table_ms(self) -> List[float]: ...
    def __len__(self) -> int: ...

class Server:
    def __init__(
        self,
        devices: str,
        policy: str,
        gather: str,
        cpu_threads: int,
        shards: int,
        max_models: int,
        max_pending: int,
        safety_margin_ms: float,
        profile_latency: str,
        profile_max_batch: int,
        profile_repeats: int,
        recalibrate: bool,
        load_run_wait_ms: float,
        overlap: str,
        log: Optional[Callable[[str], Any]],
        dispatcher: Callable[[List[tuple]], None],
        numpy_outputs: bool,
        defer_without_history: bool = ...,
    ) -> None: ...
    def add_model(
        self,
        name: str,
        path: str,
        inputs: List[str],
        slo_ms: float,
        max_batch: int,
        profile: str,
        alpha_ms: Optional[float],
        beta_ms: Optional[float],
        max_defer_ms: Optional[float] = None,
        max_queue: int = 0,
        devices: str = "",
        profile_inputs: List[str] = ...,
        priority_levels: int = 0,
        default_priority_level: int = 0,
    ) -> None: ...
    def remove_model(self, name: str) -> None: ...
    def serve_repository(
        self, dir: str, mode: str, load_models: List[str], poll_secs: float, default_slo_ms: float
    ) -> None: ...
    def load_model(self, name: str, config_json: str) -> None: ...
    def unload_model(self, name: str) -> None: ...
    def repository_index(self, ready_only: bool) -> List[Dict[str, str]]: ...
    def start(self, pool_byte_size: int = 0) -> None: ...
    def start_front(
        self,
        http: str,
        grpc: str,
        max_inflight: int,
        max_connections: int,
        request_timeout_s: float,
        idle_timeout_s: float,
        overload_hold_s: float,
        allow_client_shm: bool,
    ) -> Dict[str, str]: ...
    def stop(self, cancel: bool) -> None: ...
    def submit(
        self, model: str, inputs: Any, deadline_ms: Optional[float], token: Any, priority: int = 0
    ) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    @property
    def devices(self) -> List[str]: ...
    def model_names(self) -> List[str]: ...
    def model_profile(self, name: str) -> LatencyProfile: ...
    def _native_handle(self) -> Any: ...

def _register_errors(classes: Dict[str, type]) -> None: ...
def _set_torch(tensor_type: type, to_dlpack: Callable[..., Any], from_dlpack: Callable[..., Any]) -> None: ...
def _bound(
    profile: LatencyProfile, slo_ms: float, gpus: int, max_batch: Optional[int], staggered: bool
) -> Tuple[int, float, float]: ...
def _simulate(
    source: str,
    is_path: bool,
    origin: str,
    base_dir: str,
    mode: str,
    min_gpus_rate: float,
    policy: Optional[str],
    gather: Optional[str],
    seed: Optional[int],
    gpus: Optional[int],
    rate: Optional[float],
    progress: Optional[Callable[[str, int, float, float, bool], Any]],
    trace_out: Optional[str],
) -> str: ...
