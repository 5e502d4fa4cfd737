"""symphony.Server end to end on CPU devices: outputs equal a direct forward,
many client threads, tensors in and out (torch and numpy), stats."""

import os
import threading
import time
from concurrent.futures import Future

import numpy as np

import pytest
import torch

import symphony


def direct(models_dir, name):
    return torch.jit.load(str(models_dir / f"{name}.pt")).eval()


def test_version_is_the_one_in_the_file_VERSION():
    with open(os.path.join(os.environ["SYMPHONY_SOURCE_DIR"], "VERSION")) as f:
        assert symphony.__version__ == f.read().strip()


def test_package_exports_what_it_documents():
    for name in symphony.__all__:
        assert hasattr(symphony, name), name
    assert symphony.HAVE_TORCH
    assert symphony.Server.__doc__ and symphony.Server.infer.__doc__ and symphony.simulate.__doc__


def test_thousand_requests_from_eight_threads_equal_a_direct_forward(cpu_server, models_dir):
    s = cpu_server("linear", devices="cpu:2", max_batch=32)
    module = direct(models_dir, "linear")
    n_threads, per_thread = 8, 125
    results = [None] * n_threads
    errors = []

    def client(t):
        try:
            g = torch.Generator().manual_seed(1000 + t)
            xs = [torch.randn(4, generator=g) for _ in range(per_thread)]
            # Half the requests carry a batch dimension of one, half are numpy arrays.
            futs = []
            for i, x in enumerate(xs):
                arg = x.numpy() if i % 2 else x
                if i % 3 == 0:
                    arg = arg[None] if isinstance(arg, np.ndarray) else arg.unsqueeze(0)
                futs.append(s.infer("linear", arg))
            results[t] = (xs, futs)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    done = 0
    with torch.no_grad():
        for xs, futs in results:
            for i, (x, f) in enumerate(zip(xs, futs)):
                assert isinstance(f, Future)
                y = f.result(timeout=60)
                assert isinstance(y, torch.Tensor)
                want = module(x.unsqueeze(0))
                batched = i % 3 == 0
                assert y.shape == (want.shape if batched else want.shape[1:])
                torch.testing.assert_close(y.reshape(1, 3), want, rtol=1e-5, atol=1e-6)
                done += 1
    assert done == 1000
    st = s.stats()
    assert st["sent"] == 1000
    assert st["ok"] + st["late"] == 1000
    m = st["models"]["linear"]
    assert sum(size * n for size, n in m["batch_histogram"].items()) == 1000
    assert m["mean_batch"] > 1, "deferred scheduling forms batches under a burst"


def test_numpy_in_numpy_out(cpu_server):
    s = cpu_server("tuple_out", outputs="numpy")
    x = np.arange(4, dtype=np.float32)
    doubled, total = s.infer("tuple_out", x).result(timeout=30)
    assert isinstance(doubled, np.ndarray) and isinstance(total, np.ndarray)
    np.testing.assert_array_equal(doubled, x * 2)
    assert total.shape == () and float(total) == 6.0
    assert not doubled.flags.owndata, "outputs are views of the server's tensors, not copies"


def test_strided_and_readonly_arrays_are_accepted(cpu_server):
    s = cpu_server("tuple_out")
    base = np.arange(8, dtype=np.float32)
    strided = base[::2]  # stride 2: viewed in place
    reversed_ = base[3::-1]  # negative stride: copied once
    readonly = base[:4].copy()
    readonly.flags.writeable = False
    for x in (strided, reversed_, readonly):
        doubled, _ = s.infer("tuple_out", x).result(timeout=30)
        np.testing.assert_array_equal(doubled.numpy(), np.asarray(x) * 2)
    t = torch.arange(8, dtype=torch.float32)[1::2]  # a strided torch view
    doubled, _ = s.infer("tuple_out", t).result(timeout=30)
    torch.testing.assert_close(doubled, t * 2)


def test_a_leading_batch_dimension_carries_k_samples(cpu_server, models_dir):
    s = cpu_server("tuple_out")
    x = torch.randn(5, 4)
    doubled, total = s.infer("tuple_out", x, deadline_ms=10_000).result(timeout=30)
    want = direct(models_dir, "tuple_out")(x)
    assert doubled.shape == (5, 4) and total.shape == (5,)
    torch.testing.assert_close(doubled, want[0])
    torch.testing.assert_close(total, want[1])
    with pytest.raises(symphony.InvalidInput, match="17 samples exceeds its max batch 16"):
        s.infer("tuple_out", torch.randn(17, 4))
    assert s.stats()["models"]["tuple_out"]["sent"] == 1


def test_two_inputs_and_tuple_outputs(cpu_server, models_dir):
    s = cpu_server("two_inputs", "tuple_out")
    a = torch.tensor([1.5, 2.5])
    b = torch.tensor([1, 2, 3])
    y = s.infer("two_inputs", (a, b)).result(timeout=30)
    assert y.item() == pytest.approx(10.0)
    y = s.infer("two_inputs", [a.numpy(), b.numpy()]).result(timeout=30)
    assert y.item() == pytest.approx(10.0)
    x = torch.randn(4)
    out = s.infer("tuple_out", x).result(timeout=30)
    assert isinstance(out, tuple) and len(out) == 2
    want = direct(models_dir, "tuple_out")(x.unsqueeze(0))
    torch.testing.assert_close(out[0], want[0][0])
    torch.testing.assert_close(out[1], want[1][0])


def test_details_say_how_the_request_was_served(cpu_server):
    s = cpu_server("linear")
    r = s.infer("linear", torch.randn(4), details=True).result(timeout=30)
    assert isinstance(r, symphony.InferResult)
    assert r.outcome in ("ok", "late")
    assert r.batch_size >= 1
    assert r.device == "cpu:0"
    assert r.latency_ms > 0
    assert isinstance(r.output, torch.Tensor) and r.output.shape == (3,)


def test_done_callbacks_run_once_per_request(cpu_server):
    s = cpu_server("linear")
    calls = []
    lock = threading.Lock()
    futs = [s.infer("linear", torch.randn(4)) for _ in range(50)]
    for i, f in enumerate(futs):
        f.add_done_callback(lambda f, i=i: (lock.acquire(), calls.append(i), lock.release()))
    for f in futs:
        f.result(timeout=30)
    s.stop()
    assert sorted(calls) == list(range(50))


def test_cancelled_futures_are_ignored(emulated_server):
    s = emulated_server(beta_ms=50, slo_ms=1000)  # room for a loaded machine
    f = s.infer("m", None)
    assert f.cancel()
    g = s.infer("m", None)
    assert g.result(timeout=30) is None  # emulated devices run no model
    s.stop()
    assert f.cancelled()


def test_a_dimension_of_minus_one_takes_samples_of_any_length(cpu_server, models_dir, tmp_path):
    s = cpu_server("linear")
    log = tmp_path / "profile.yaml"
    s.add_model("varlen", models_dir / "varlen.pt", input="float32[-1]", slo_ms=500, max_batch=4,
                profile=log, profile_inputs=["float32[6]"])
    futures = [(n, s.infer("varlen", torch.full((n,), float(n)))) for n in (1, 5, 3, 5, 8)]
    for n, f in futures:
        torch.testing.assert_close(f.result(timeout=30), torch.tensor([float(n * n), float(n)]))
    pair = s.infer("varlen", torch.ones(2, 7)).result(timeout=30)
    torch.testing.assert_close(pair, torch.tensor([[7.0, 7.0], [7.0, 7.0]]))
    assert "float32[6]" in log.read_text(), "profiled at profile_inputs"
    with pytest.raises(symphony.ConfigError, match="is not a sample of input"):
        s.add_model("varlen2", models_dir / "varlen.pt", input="float32[-1]", slo_ms=500,
                    profile_inputs=["float32[2,3]"])


def test_models_can_be_added_and_removed_while_serving(cpu_server, models_dir, profiles_dir):
    s = cpu_server("linear")
    s.add_model("tuple_out", models_dir / "tuple_out.pt", input=(torch.float32, (4,)), slo_ms=500,
                profile=profiles_dir / "tuple_out.yaml")
    assert sorted(s.model_names()) == ["linear", "tuple_out"]
    doubled, _ = s.infer("tuple_out", torch.ones(4)).result(timeout=30)
    torch.testing.assert_close(doubled, torch.full((4,), 2.0))
    s.remove_model("tuple_out")
    assert s.model_names() == ["linear"]
    with pytest.raises(symphony.ModelNotFound):
        s.infer("tuple_out", torch.ones(4))


def test_profiles_and_stats(cpu_server):
    s = cpu_server("linear")
    p = s.model_profile("linear")
    assert isinstance(p, symphony.LatencyProfile)
    assert 1 <= p.max_batch <= 16 and p.latency_ms(1) > 0
    for f in [s.infer("linear", torch.randn(4)) for _ in range(20)]:
        f.result(timeout=30)
    s.stop()
    st = s.stats()
    for key in ("elapsed_s", "sent", "ok", "late", "dropped", "errors", "goodput_rps", "bad_rate", "models",
                "devices"):
        assert key in st, key
    assert st["sent"] == 20 and st["ok"] + st["late"] == 20 and st["errors"] == 0
    m = st["models"]["linear"]
    assert m["sent"] == 20 and m["l1_ms"] == pytest.approx(p.latency_ms(1), rel=1e-3)
    assert m["latency_ms"]["p50"] > 0
    assert st["devices"][0]["name"] == "cpu:0" and st["devices"][0]["batches"] >= 1


@pytest.mark.parametrize("recalibrate", [True, False])
def test_recalibration_reports_the_profile_in_use(cpu_server, recalibrate):
    s = cpu_server("linear", recalibrate=recalibrate)
    for _ in range(24):
        s.infer("linear", torch.randn(4)).result(timeout=30)
    prof = s.stats()["models"]["linear"]["profile"]
    assert prof["recalibrating"] is recalibrate
    assert prof["samples"] == (24 if recalibrate else 0)
    assert set(prof["offline_ms"]) == set(prof["in_use_ms"]) and 1 in prof["offline_ms"]
    if not recalibrate:
        assert prof["in_use_ms"] == prof["offline_ms"]


def test_context_manager_drains(models_dir, profiles_dir):
    with symphony.Server(devices="cpu", safety_margin_ms=50) as s:
        s.add_model("linear", models_dir / "linear.pt", input="float32[4]", slo_ms=300,
                    profile=profiles_dir / "linear.yaml")
        s.start()
        futs = [s.infer("linear", torch.randn(4)) for _ in range(10)]
    assert all(f.done() for f in futs), "leaving the block drains every request"
    # Drained, not cut short: each ran, or (on a loaded machine, a CPU batch
    # that ran long) missed its target in the queue; none ended `shutdown`.
    for f in futs:
        try:
            assert isinstance(f.result(), torch.Tensor)
        except symphony.Dropped as e:
            assert e.reason == "expired", e
    assert any(f.exception() is None for f in futs)
    with pytest.raises(symphony.ServerNotRunning):
        s.infer("linear", torch.randn(4))


def test_max_defer_caps_how_long_a_lone_request_waits():
    """A 10 s SLO defers a lone request for almost 10 s; max_defer_ms=50 starts
    its batch by 50 ms after arrival. A 60 s deadline adds no waiting either."""
    with symphony.Server(devices="emulated:1", policy="deferred", safety_margin_ms=20) as s:
        s.add_model("capped", slo_ms=10_000, max_batch=8, alpha_ms=1.0, beta_ms=5.0, max_defer_ms=50)
        with pytest.raises(symphony.ConfigError, match="max_defer_ms"):
            s.add_model("bad", slo_ms=100, alpha_ms=1.0, beta_ms=5.0, max_defer_ms=-1)
        s.start()
        t0 = time.monotonic()
        s.infer("capped", None, deadline_ms=60_000).result(timeout=30)
        assert time.monotonic() - t0 < 5, "capped at 50 ms (uncapped: ~10 s)"


def test_max_queue_drops_what_exceeds_it_as_queue_full():
    """Two requests deferred (2 s SLO) fill max_queue=2: the next ones are
    dropped at once, queue_full; the queued two end when the server stops."""
    with symphony.Server(devices="emulated:1", policy="deferred") as s:
        s.add_model("bounded", slo_ms=2_000, max_batch=8, alpha_ms=1.0, beta_ms=5.0, max_queue=2)
        with pytest.raises(symphony.ConfigError, match="max_queue"):
            s.add_model("bad", slo_ms=100, alpha_ms=1.0, beta_ms=5.0, max_queue=-1)
        s.start()
        s.infer("bounded", None).result(timeout=10)  # the first request goes at once; later ones are deferred
        futs = [s.infer("bounded", None) for _ in range(4)]
        for f in futs[2:]:
            with pytest.raises(symphony.Dropped) as e:
                f.result(timeout=10)
            assert e.value.reason == "queue_full"
        assert not futs[0].done() and not futs[1].done()
        # Each refusal on arrival is timed once (none of the queued or run).
        st = s.stats()["models"]["bounded"]
        assert st["dropped_by_reason"] == {"queue_full": 2}, st
        refusals = st["refusal_latency_ms"]
        assert refusals["count"] == 2, refusals
        assert 0 < refusals["p50"] <= refusals["p99"] <= refusals["max"], refusals
    assert all(f.done() for f in futs)


def test_a_model_served_on_some_devices_runs_there_only():
    """devices= names the server's devices that serve a model (as s.devices
    names them): its batches run there only; a name the server lacks, or
    that is not a device's name, is refused."""
    with symphony.Server(devices="emulated:3", policy="eager") as s:
        s.add_model("pinned", slo_ms=500, max_batch=8, alpha_ms=0.5, beta_ms=1.0, devices=["emulated:2"])
        s.add_model("two", slo_ms=500, max_batch=8, alpha_ms=0.5, beta_ms=1.0, devices="emulated:0, emulated:1")
        with pytest.raises(symphony.ConfigError, match=r"emulated:3 is not one of the server's devices "
                                                       r"\(emulated:0, emulated:1, emulated:2\)"):
            s.add_model("missing", slo_ms=500, alpha_ms=0.5, beta_ms=1.0, devices="emulated:3")
        with pytest.raises(symphony.ConfigError, match="not a device's name"):
            s.add_model("bad", slo_ms=500, alpha_ms=0.5, beta_ms=1.0, devices="gpu:0")
        s.start()
        futs = [s.infer(m, None, details=True) for _ in range(40) for m in ("pinned", "two")]
        rs = [f.result(timeout=30) for f in futs]
    assert {r.device for r in rs[0::2]} == {"emulated:2"}
    assert {r.device for r in rs[1::2]} <= {"emulated:0", "emulated:1"}


def test_emulated_devices(emulated_server):
    s = emulated_server(gpus=2, alpha_ms=1.0, beta_ms=2.0, slo_ms=200, max_batch=8)
    assert s.devices == ("emulated:0", "emulated:1")
    futs = [s.infer("m", None, details=True) for _ in range(64)]
    rs = [f.result(timeout=30) for f in futs]
    assert all(r.output is None and r.outcome in ("ok", "late") for r in rs)
    assert max(r.batch_size for r in rs) > 1
    assert s.model_profile("m").latency_ms(4) == pytest.approx(6.0)


@pytest.mark.parametrize(
    "policy,gather",
    [("timeout:0.25slo", "sliding_window"), ("deferred:paper", "target_batch"), ("eager", "sliding_window")],
)
def test_every_policy_of_the_language_serves(emulated_server, policy, gather):
    # The policy and gather texts are those of every Symphony tool (docs/policies.md).
    s = emulated_server(gpus=2, alpha_ms=1.0, beta_ms=2.0, slo_ms=200, max_batch=8, policy=policy, gather=gather)
    rs = [f.result(timeout=30) for f in [s.infer("m", None, details=True) for _ in range(32)]]
    assert all(r.outcome == "ok" for r in rs)
    assert s.stats()["ok"] == 32


def test_overlap_stages_beside_the_worker_and_reports_what_it_learned(cpu_server, answers_as_direct_forward):
    # overlap="on" on a CPU device: a staging thread forms each batch while the
    # worker runs the one before (docs/serving.md); answers are unchanged.
    s = cpu_server("linear", overlap="on", max_batch=16)
    answers_as_direct_forward(s, seed=3)
    # The learner reports every 200 ms: wait for it (bounded).
    for _ in range(100):
        d = s.stats()["dispatch"]
        if d["samples"] > 0:
            break
        time.sleep(0.05)
    assert d["overlap"] is True and d["samples"] > 0, d
    with pytest.raises(symphony.ConfigError, match="overlap must be 'auto', 'on' or 'off'"):
        symphony.Server(devices="cpu", overlap="sometimes")
    assert symphony.Server(devices="cpu").stats()["dispatch"]["overlap"] is False, "off on CPU by default"


def _pool_settles(s, timeout_s=20.0):
    """The pool's counters once every block is back (the last tensor holding
    one may die on a server thread just after its future resolved): a bounded
    poll."""
    deadline = time.monotonic() + timeout_s
    while True:
        pool = s.stats()["host_memory_pool"]
        if pool["blocks_in_use"] == 0 or time.monotonic() > deadline:
            return pool
        time.sleep(0.005)


def test_inputs_land_once_in_the_host_memory_pool_and_may_change_after_infer(cpu_server, models_dir):
    s = cpu_server("linear", max_batch=8)
    module = direct(models_dir, "linear")
    xs = [torch.randn(4) for _ in range(40)]
    want = [module(x.unsqueeze(0))[0] for x in xs]
    futs = [s.infer("linear", x.numpy() if i % 2 else x) for i, x in enumerate(xs)]
    for x in xs:  # copied at the call: what the server runs is what was passed
        x.fill_(1e6)
    for f, w in zip(futs, want):
        assert torch.allclose(f.result(timeout=60), w, atol=1e-5)
    pool = _pool_settles(s)
    assert pool["acquired"] == 40 and pool["exhausted"] == 0
    assert pool["blocks_in_use"] == 0 and pool["in_use"] == 0
    assert pool["byte_size"] == 64 << 20 and not pool["pinned"]  # the default's floor, plain on a CPU
    staged = s.stats()["models"]["linear"]["staging"]
    assert staged["samples"] == 40 and staged["views"] <= staged["inputs"]  # each sample batched once
    # 16-byte samples in 64-byte blocks are never side by side: each is copied into its batch once.
    assert staged["bytes_copied"] == 16 * (40 - staged["views"])


def test_a_full_host_memory_pool_refuses_at_once_naming_it(cpu_server):
    s = cpu_server("linear", pinned_memory_pool_byte_size=64)  # one input of up to 64 bytes
    with pytest.raises(symphony.Overloaded, match=r"larger than the whole host memory pool \(64 B\)"):
        s.infer("linear", torch.randn(8, 4))  # 128 bytes
    assert s.infer("linear", torch.randn(4)).result(timeout=60).shape == (3,)
    pool = _pool_settles(s)
    assert pool["exhausted"] == 1 and pool["acquired"] == 1 and pool["blocks_in_use"] == 0
    assert s.stats()["sent"] == 1  # the refused request never reached the scheduler


def test_every_block_returns_when_the_model_fails(cpu_server):
    s = cpu_server("raises")
    futs = [s.infer("raises", torch.full((4,), -1000.0)) for _ in range(5)]  # below -100: it raises
    for f in futs:
        with pytest.raises(symphony.ModelError, match="below -100"):
            f.result(timeout=60)
    pool = _pool_settles(s)
    assert pool["acquired"] == 5 and pool["blocks_in_use"] == 0 and pool["in_use"] == 0


@pytest.mark.parametrize("end", ["stop", "unload"])
def test_every_block_returns_when_queued_requests_are_dropped(models_dir, profiles_dir, end):
    s = symphony.Server(devices="cpu", policy="deferred", profile_repeats=3, profile_max_batch=16,
                        safety_margin_ms=50.0)
    try:
        s.add_model("linear", models_dir / "linear.pt", inputs=["float32[4]"], slo_ms=1000.0, max_batch=16,
                    profile=profiles_dir / "linear.yaml")
        s.start()
        # Deferred with a 1 s SLO: they wait in the model's window, queued.
        futs = [s.infer("linear", torch.randn(4)) for _ in range(10)]
        if end == "stop":
            s.stop(cancel=True)
        else:
            s.remove_model("linear")
        for f in futs:
            try:
                f.result(timeout=60)
            except symphony.Dropped:
                pass
        pool = _pool_settles(s)
        assert pool["acquired"] == 10 and pool["blocks_in_use"] == 0 and pool["in_use"] == 0
    finally:
        s.stop(cancel=True)
