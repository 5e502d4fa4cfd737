"""symphony.cluster.Client against a real scheduler and backend (separate
processes of the symphony binary, TCP on loopback)."""

import os
import signal
import subprocess
import time

import pytest

cluster = pytest.importorskip("symphony.cluster", reason="symphony._cluster not built (no UCX)")
import symphony  # noqa: E402

CLI = os.environ.get("SYMPHONY_CLI")

CONFIG = """
gpus: 2
workload: {rate: 100}
models:
  - {name: m, alpha_ms: 0.5, beta_ms: 2, slo_ms: 2000, max_batch: 64}
  - {name: p, alpha_ms: 0.5, beta_ms: 2, slo_ms: 2000, max_batch: 64, priority_levels: 2}
delays: {safety_margin_ms: 300}
# defer_without_history: the paper's rule from a model's first request, which
# the cancel test below needs (a request held while the scheduler waits).
cluster: {token: py-token, heartbeat_ms: 50, heartbeat_timeout_ms: 2000, defer_without_history: true}
"""


def fnv1a64(data: bytes) -> int:
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


@pytest.fixture
def running_cluster(tmp_path):
    """A scheduler and a backend with 2 emulated GPUs; killed after the test."""
    if not CLI or not os.path.exists(CLI):
        pytest.skip("SYMPHONY_CLI does not name the symphony binary")
    cfg = tmp_path / "cluster.yaml"
    cfg.write_text(CONFIG)
    port_file = tmp_path / "port"
    procs, logs = [], []

    def spawn(*args, log):
        logs.append(open(tmp_path / log, "w"))
        procs.append(subprocess.Popen([CLI, *args], stdout=logs[-1], stderr=subprocess.STDOUT))
        return procs[-1]

    sched = spawn("scheduler", "--listen", "127.0.0.1:0", "--config", str(cfg), "--port-file", str(port_file),
                  log="scheduler.log")
    deadline = time.monotonic() + 10
    while not port_file.exists() or not port_file.read_text().strip():
        assert time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
        time.sleep(0.05)
    addr = "127.0.0.1:" + port_file.read_text().strip()
    spawn("backend", "--scheduler", addr, "--devices", "emulated:2", "--config", str(cfg), log="backend.log")
    deadline = time.monotonic() + 10
    while " registered " not in (tmp_path / "scheduler.log").read_text():
        assert time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
        time.sleep(0.05)
    try:
        yield addr, sched
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        for f in logs:
            f.close()


def test_infer_returns_the_backends_output_and_counts_balance(running_cluster):
    addr, _ = running_cluster
    with cluster.Client(addr, token="py-token", max_input_bytes=1024) as c:
        assert [m.name for m in c.models()] == ["m", "p"]
        inputs = [bytes([i % 256]) * (1 + i * 7) for i in range(40)]
        # The deferred scheduler dispatches near the deadline less the safety
        # margin; the 300 ms margin lets a loaded CI machine stall that long
        # before a request expires (with slo_ms=200 and no margin, one did).
        futures = [c.infer("m", x, slo_ms=1000) for x in inputs]
        for x, f in zip(inputs, futures):
            out = f.result(timeout=10)
            assert int.from_bytes(out[:8], "little") == fnv1a64(x)  # the backend read our input
        r = c.infer("m", bytearray(b"abc"), slo_ms=1000, details=True).result(timeout=10)
        assert r.outcome in ("ok", "late") and r.batch_size >= 1 and r.latency_ms > 0
        s = c.stats()
        assert s["sent"] == 41 == s["ok"] + s["late"] + s["dropped"] + s["errors"]
        assert s["duplicate_outputs"] == 0 and s["in_flight"] == 0


def test_a_cancelled_future_withdraws_its_request_while_it_waits(running_cluster):
    """Future.cancel() on a request the deferred scheduler still holds (2 s
    SLO: dispatched about 1.7 s after it arrives) withdraws it there: it ends
    dropped, `cancelled`, and never runs; the other request is answered."""
    addr, _ = running_cluster
    with cluster.Client(addr, token="py-token") as c:
        keep = c.infer("m", b"k", slo_ms=2000)
        gone = c.infer("m", b"g", slo_ms=2000)
        time.sleep(0.3)  # both taken into the scheduler's queue (a cancel before finds nothing)
        assert gone.cancel() and gone.cancelled()
        assert int.from_bytes(keep.result(timeout=10)[:8], "little") == fnv1a64(b"k")
        deadline = time.monotonic() + 10
        while c.stats()["in_flight"] > 0:
            assert time.monotonic() < deadline, c.stats()
            time.sleep(0.05)
        s = c.stats()
        assert s["cancels"] == 1, s
        assert s["dropped_by_reason"] == {"cancelled": 1} and s["ok"] + s["late"] == 1, s
        assert gone.cancel() and not keep.cancel()  # cancelled stays so; a done one cannot be


def test_bad_calls_raise_at_once(running_cluster):
    addr, _ = running_cluster
    with cluster.Client(addr, token="py-token", max_input_bytes=16) as c:
        with pytest.raises(symphony.ModelNotFound, match="serves: m"):
            c.infer("nope", b"x")
        with pytest.raises(symphony.InvalidInput):
            c.infer("m", b"x" * 17)
        with pytest.raises(symphony.InvalidInput):
            c.infer("m", "a string")
        # Priorities: checked against the scheduler's levels at once; a model
        # of one level takes any.
        with pytest.raises(symphony.InvalidInput, match="priority 3 is beyond model 'p''s priority_levels 2"):
            c.infer("p", b"x", priority=3)
        with pytest.raises(symphony.InvalidInput, match="priority must be a whole number"):
            c.infer("p", b"x", priority=-1)
        assert c.stats()["sent"] == 0
        futures = [c.infer(m, b"y", slo_ms=1000, priority=p) for m, p in (("p", 1), ("p", 2), ("p", 0), ("m", 5))]
        for f in futures:
            assert int.from_bytes(f.result(timeout=10)[:8], "little") == fnv1a64(b"y")
    with pytest.raises(symphony.ServerNotRunning, match="wrong cluster token"):
        cluster.Client(addr, token="wrong", connect_timeout=2)


def test_pending_requests_fail_within_a_second_when_the_scheduler_dies(running_cluster):
    addr, sched = running_cluster
    with cluster.Client(addr, token="py-token") as c:
        # A 2 s SLO and small load: the deferred scheduler holds these back.
        futures = [c.infer("m", b"payload") for _ in range(20)]
        time.sleep(0.2)
        sched.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        for f in futures:
            with pytest.raises(cluster.ClusterError, match="lost the scheduler"):
                f.result(timeout=1.0)
        assert time.monotonic() - t0 < 1.0
        s = c.stats()
        assert s["errors"] == 20 and s["scheduler_losses"] == 1
