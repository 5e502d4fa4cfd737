"""Shared fixtures of the binding tests.

The tests run against the package built in build/<preset>/bindings/python
(CTest puts it on PYTHONPATH) and the TorchScript test models written by
tests/data/make_test_models.py (SYMPHONY_TEST_MODELS).
"""

import os
import pathlib

import pytest
import torch

import symphony

MODELS = os.environ.get("SYMPHONY_TEST_MODELS")


@pytest.fixture(scope="session")
def models_dir() -> pathlib.Path:
    if not MODELS or not pathlib.Path(MODELS, "linear.pt").exists():
        pytest.skip("SYMPHONY_TEST_MODELS does not point at the built test models")
    return pathlib.Path(MODELS)


@pytest.fixture(scope="session")
def profiles_dir(tmp_path_factory) -> pathlib.Path:
    """One directory of measured profiles for the whole session: each model is
    profiled once, by the first server that loads it."""
    return tmp_path_factory.mktemp("profiles")


@pytest.fixture
def cpu_server(models_dir, profiles_dir):
    """A factory of started CPU servers serving test models; stopped after the test.

    These tests check answers and the API, so the policy is eager: a lone
    request runs at once instead of waiting in its window until shortly before
    its deadline, where a test machine busy with other tests (ctest -j2) once
    starved the dispatch past the safety margin and the request expired.
    Deferral itself is tested in C++ and on the emulated servers below. The
    safety margin absorbs timer jitter as well."""
    servers = []

    def make(*names, devices="cpu", policy="eager", slo_ms=500.0, max_batch=16, **opts):
        opts.setdefault("safety_margin_ms", 50.0)
        s = symphony.Server(devices=devices, policy=policy, profile_repeats=3, profile_max_batch=16, **opts)
        servers.append(s)
        for name in names:
            inputs = ["float32[2]", "int64[3]"] if name == "two_inputs" else ["float32[4]"]
            s.add_model(name, models_dir / f"{name}.pt", inputs=inputs, slo_ms=slo_ms, max_batch=max_batch,
                        profile=profiles_dir / f"{name}.yaml")
        s.start()
        return s

    yield make
    for s in servers:
        s.stop(cancel=True)


@pytest.fixture
def emulated_server():
    """A factory of started servers on emulated GPUs (no model runs); a
    20 ms safety margin, as above."""
    servers = []

    def make(gpus=1, *, alpha_ms=1.0, beta_ms=5.0, slo_ms=100.0, max_batch=8, policy="deferred", **opts):
        opts.setdefault("safety_margin_ms", 20.0)
        s = symphony.Server(devices=f"emulated:{gpus}", policy=policy, **opts)
        servers.append(s)
        s.add_model("m", slo_ms=slo_ms, max_batch=max_batch, alpha_ms=alpha_ms, beta_ms=beta_ms)
        s.start()
        return s

    yield make
    for s in servers:
        s.stop(cancel=True)


@pytest.fixture
def answers_as_direct_forward(models_dir):
    """Checks that `server` answers 64 random inputs to "linear", sent at
    once, as the TorchScript module does run directly."""
    module = torch.jit.load(str(models_dir / "linear.pt")).eval()

    def check(server, seed):
        g = torch.Generator().manual_seed(seed)
        xs = [torch.randn(4, generator=g) for _ in range(64)]
        futs = [server.infer("linear", x) for x in xs]
        with torch.no_grad():
            for x, f in zip(xs, futs):
                torch.testing.assert_close(f.result(timeout=60).reshape(1, 3), module(x.unsqueeze(0)),
                                           rtol=1e-5, atol=1e-6)

    return check
