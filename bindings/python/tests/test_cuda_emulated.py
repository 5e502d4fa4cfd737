"""Devices "cuda-emulated": each batch is a busy kernel of l(b) on a real GPU
(no model). Without a GPU, or in a build without the CUDA toolkit, creating
the server must fail saying why; with one, requests are served and the
device reports its CUDA timings."""

import pytest

import symphony


def _server_or_error():
    try:
        return symphony.Server(devices="cuda-emulated:0", policy="deferred"), None
    except symphony.SymphonyError as e:
        return None, str(e)


def test_without_a_gpu_the_error_says_why():
    s, msg = _server_or_error()
    if s is not None:
        s.stop()
        pytest.skip("this machine has a GPU for the busy-kernel executor")
    assert "cuda-emulated:0" in msg, msg
    assert any(why in msg for why in ("which this build lacks", "cudaGetDeviceCount", "does not exist")), msg


def test_on_a_gpu_requests_are_served_as_busy_kernels():
    s, msg = _server_or_error()
    if s is None:
        pytest.skip(f"no GPU for the busy-kernel executor: {msg}")
    with s:
        s.add_model("m", alpha_ms=0.05, beta_ms=1.0, slo_ms=200, max_batch=16)
        s.start()
        assert s.devices == ("cuda-emulated:0",)
        rs = [f.result(timeout=30) for f in [s.infer("m", None, details=True) for _ in range(200)]]
        assert all(r.output is None and r.outcome in ("ok", "late") for r in rs)
        dev = s.stats()["devices"][0]
        assert dev["batches"] > 0
        assert dev["dispatch_overhead_p99_us"] > 0
