"""Every error path: what infer() raises at call time, what the futures raise,
and configuration errors."""

import numpy as np
import pytest
import torch

import symphony


# ---- raised by infer() at call time, nothing queued --------------------------------------


def test_unknown_model_lists_the_served_models(cpu_server):
    s = cpu_server("linear")
    with pytest.raises(symphony.ModelNotFound, match=r"unknown model 'nope' \(serving: linear\)") as e:
        s.infer("nope", torch.randn(4))
    assert isinstance(e.value, LookupError) and isinstance(e.value, symphony.SymphonyError)
    with pytest.raises(symphony.ModelNotFound):
        s.remove_model("nope")
    assert s.stats()["sent"] == 0


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda: torch.randn(4, dtype=torch.float64), r"input 'input0': expected dtype float32, got float64"),
        (lambda: np.zeros(4, dtype=np.int64), r"expected dtype float32, got int64"),
        (lambda: torch.randn(5), r"expected shape \[4\] \(or \[k\] \+ that for k samples\), got \[5\]"),
        (lambda: torch.randn(2, 5), r"expected shape \[4\]"),
        (lambda: torch.randn(17, 4), r"a request of 17 samples exceeds its max batch 16"),
        (lambda: [torch.randn(4), torch.randn(4)], r"takes 1 input\(s\), got 2"),
        (lambda: "abc", r"input 0: expected a torch.Tensor or a numpy array, got str"),
        (lambda: [1.0, 2.0, 3.0, 4.0], r"input 0: expected a torch.Tensor or a numpy array, got float"),
        (lambda: np.zeros(4, dtype=np.uint16), r"input 0: unsupported element type 'H'"),
        (lambda: np.zeros(4, dtype=">f4"), r"input 0: unsupported element type '>f'"),
        (lambda: None, r"takes 1 input\(s\), got 0"),
        (lambda: torch.randn(4).to_sparse(), r"input 0: cannot pass this tensor"),
    ],
)
def test_bad_inputs_name_the_mismatch(cpu_server, make, pattern):
    s = cpu_server("linear")
    with pytest.raises(symphony.InvalidInput, match=pattern) as e:
        s.infer("linear", make())
    assert isinstance(e.value, ValueError)
    assert "model 'linear'" in str(e.value) or "input 0" in str(e.value)
    assert s.stats()["sent"] == 0


def test_mixed_batch_dimensions_and_counts(cpu_server):
    s = cpu_server("two_inputs")
    with pytest.raises(symphony.InvalidInput, match="mix samples with and without the batch dimension"):
        s.infer("two_inputs", (torch.randn(1, 2), torch.ones(3, dtype=torch.int64)))
    with pytest.raises(symphony.InvalidInput, match=r"takes 2 input\(s\), got 1"):
        s.infer("two_inputs", torch.randn(2))
    with pytest.raises(symphony.InvalidInput, match="input 'input1': expected dtype int64, got float32"):
        s.infer("two_inputs", (torch.randn(2), torch.randn(3)))


def test_impossible_deadlines(emulated_server):
    s = emulated_server(alpha_ms=1, beta_ms=5)
    # A deadline even a batch of one cannot meet is an outcome, not bad input.
    with pytest.raises(symphony.Dropped, match="its target of 2 ms cannot be met") as e:
        s.infer("m", None, deadline_ms=2).result(timeout=30)
    assert e.value.reason == "infeasible"
    with pytest.raises(symphony.InvalidInput, match="finite"):
        s.infer("m", None, deadline_ms=float("nan"))
    assert s.infer("m", None, deadline_ms=100).result(timeout=30) is None


def test_overloaded_when_max_pending_requests_are_inside(emulated_server):
    # Each batch runs 5 s on the one emulated GPU. The model's first request
    # runs at once (nothing is known of its arrivals yet); the second waits
    # for company, queued, far longer than the test takes.
    s = emulated_server(alpha_ms=0, beta_ms=5000, slo_ms=20000, max_pending=2)
    s.infer("m", None)
    queued = s.infer("m", None)
    with pytest.raises(symphony.Overloaded, match="2 requests are pending"):
        s.infer("m", None)
    s.stop(cancel=True)
    with pytest.raises(symphony.Dropped) as e:
        queued.result(timeout=30)
    assert e.value.reason == "shutdown"


def test_not_running_before_start_and_after_stop(models_dir, profiles_dir):
    s = symphony.Server(devices="emulated:1")
    s.add_model("m", slo_ms=50, alpha_ms=1, beta_ms=1)
    with pytest.raises(symphony.ServerNotRunning, match="not started"):
        s.infer("m", None)
    s.start()
    with pytest.raises(symphony.SymphonyError, match="already started"):
        s.start()
    s.stop()
    with pytest.raises(symphony.ServerNotRunning, match="stopped") as e:
        s.infer("m", None)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(symphony.ServerNotRunning):
        s.add_model("m2", slo_ms=50, alpha_ms=1, beta_ms=1)
    s.stop()  # idempotent


# ---- set on the future -----------------------------------------------------------------


def test_dropped_requests_carry_the_reason(emulated_server):
    # One GPU, batches of one, l(1) = 200 ms, SLO 300 ms: the first request runs
    # at once; the second cannot finish by its deadline once the GPU frees
    # (refused on arrival when it finds the first still queued: overload).
    s = emulated_server(alpha_ms=0, beta_ms=200, slo_ms=300, max_batch=1, policy="eager")
    futs = [s.infer("m", None) for _ in range(3)]
    assert futs[0].result(timeout=30) is None
    reasons = []
    for f in futs[1:]:
        with pytest.raises(symphony.Dropped) as e:
            f.result(timeout=30)
        reasons.append(e.value.reason)
        assert e.value.reason in str(e.value)
    assert set(reasons) <= {"expired", "infeasible", "overload"}
    st = s.stats()["models"]["m"]
    assert st["dropped"] == 2 and sum(st["dropped_by_reason"].values()) == 2


def test_model_errors_carry_the_models_message(cpu_server):
    s = cpu_server("raises")
    bad = s.infer("raises", torch.full((4,), -1000.0))
    with pytest.raises(symphony.ModelError, match="input below -100 is not allowed") as e:
        bad.result(timeout=30)
    assert "input below -100 is not allowed" in e.value.message
    good = s.infer("raises", torch.zeros(4))
    torch.testing.assert_close(good.result(timeout=30), torch.ones(4))
    s.stop()
    assert s.stats()["errors"] == 1


def test_stop_with_cancel_drops_queued_requests(emulated_server):
    # Deferred: 20 requests wait for the end of their window (seconds away).
    # A model's first request goes at once (nothing is known of its arrivals
    # yet), so one is served first: on a loaded machine, the first of the 20
    # otherwise ran before stop() could drop it.
    s = emulated_server(alpha_ms=0, beta_ms=500, slo_ms=10000, max_batch=32)
    s.infer("m", None).result(timeout=30)
    futs = [s.infer("m", None) for _ in range(20)]
    s.stop(cancel=True)
    assert all(f.done() for f in futs), "stop() returns after every request resolved"
    for f in futs:
        e = f.exception()
        assert isinstance(e, symphony.Dropped) and e.reason == "shutdown"


# ---- configuration -------------------------------------------------------------------------


def test_configuration_errors(models_dir, tmp_path):
    with pytest.raises(symphony.ConfigError, match="policy 'sometimes' is not one of: deferred"):
        symphony.Server(devices="cpu", policy="sometimes")
    with pytest.raises(symphony.ConfigError, match="unknown deferred option 'windw=1'"):
        symphony.Server(devices="cpu", policy="deferred:windw=1")
    with pytest.raises(symphony.ConfigError, match="gather 'foo' is not one of: target_batch or sliding_window"):
        symphony.Server(devices="cpu", gather="foo")
    with pytest.raises(symphony.SymphonyError, match="gpu:7"):
        symphony.Server(devices="gpu:7")
    with pytest.raises(symphony.ConfigError, match="outputs"):
        symphony.Server(devices="cpu", outputs="pandas")
    with pytest.raises(symphony.ConfigError, match="load_run_wait_ms must be >= 0"):
        symphony.Server(devices="cpu", load_run_wait_ms=-1)
    symphony.Server(devices="emulated:1", load_run_wait_ms=0).stop()
    for bad in (0, 1.5, float("nan")):
        with pytest.raises(symphony.ConfigError, match="admission_backlog_share must be in \\[0.05, 1\\]"):
            symphony.Server(devices="emulated:1", admission_backlog_share=bad)
    symphony.Server(devices="emulated:1", admission=False, admission_backlog_share=0.3).stop()
    s = symphony.Server(devices="cpu")
    try:
        with pytest.raises(symphony.SymphonyError, match="missing.pt"):
            s.add_model("m", tmp_path / "missing.pt", input="float32[4]", slo_ms=50)
        with pytest.raises(symphony.ConfigError, match="float33"):
            s.add_model("m", models_dir / "linear.pt", input="float33[4]", slo_ms=50)
        with pytest.raises(symphony.ConfigError, match="slo_ms"):
            s.add_model("m", models_dir / "linear.pt", input="float32[4]", slo_ms=0)
        with pytest.raises(TypeError, match="input or inputs"):
            s.add_model("m", models_dir / "linear.pt", input="float32[4]", inputs=["float32[4]"], slo_ms=50)
        with pytest.raises(TypeError, match="input spec"):
            s.add_model("m", models_dir / "linear.pt", input=42, slo_ms=50)
        with pytest.raises(symphony.ConfigError, match="cuda_graphs must be 'auto', 'on' or 'off', got 'always'"):
            s.add_model("m", models_dir / "linear.pt", input="float32[4]", slo_ms=50, cuda_graphs="always")
        with pytest.raises(symphony.ConfigError, match="jit_executor must be 'auto', 'profiling' or 'simple'"):
            s.add_model("m", models_dir / "linear.pt", input="float32[4]", slo_ms=50, jit_executor="legacy")
    finally:
        s.stop()
    e = symphony.Server(devices="emulated:1")
    try:
        with pytest.raises(symphony.ConfigError, match="alpha and beta"):
            e.add_model("m", slo_ms=50)
        e.add_model("m", slo_ms=50, alpha_ms=1, beta_ms=1)
        with pytest.raises(symphony.ConfigError, match="already served"):
            e.add_model("m", slo_ms=50, alpha_ms=1, beta_ms=1)
    finally:
        e.stop()
