"""`symphony serve --policy triton[:...]`: Triton's dynamic batcher serving
the Open Inference Protocol, driven by clients we did not write (curl, Python
grpcio with stubs generated from front/proto/inference.proto).

Two servers, each for a few seconds: the TorchScript test models on the CPU
(answers checked against torch in this process, the error model's error),
and an emulated device with a bounded queue (Triton's max_queue_size refuses
what does not fit). Every wait is bounded.
"""
import json
import os
import signal
import threading

import grpc
import pytest

from oip_harness import Serve, Tally, cpu_config, curl, grpc_infer_test_models, grpc_stubs, linear_expected


def infer_body(x, timeout_us=None):
    body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, len(x)], "data": x}]}
    if timeout_us:
        body["parameters"] = {"timeout": timeout_us}
    return json.dumps(body).encode()


def test_triton_on_the_cpu_answers_curl_and_grpc():
    d = os.path.realpath(os.path.join(os.environ.get("TMPDIR", "/tmp"), "symphony-triton-models-%d" % os.getpid()))
    os.makedirs(d, exist_ok=True)
    # The harness's CPU config with the policy on the command line, as a
    # user compares both schedulers with one flag.
    s = Serve(cpu_config(d), extra=["--policy", "triton:max_queue_delay_us=2000,preferred=2|4"])
    tally = Tally()
    try:
        assert "policy: triton:max_queue_delay_us=2000,preferred=2|4" in s.output()
        url = s.url + "/v2/models/linear/infer"
        for i in range(6):
            x = [float(i), 1.0, -2.0, 0.5]
            status, hdrs, body = curl(url, "-H", "Content-Type: application/json", body=infer_body(x))
            assert status == 200, body
            assert hdrs["symphony-outcome"] == "ok"
            tally.add("linear", "ok")
            assert json.loads(body)["outputs"][0]["data"] == pytest.approx(linear_expected(x), rel=1e-6)
        # Requests sent together may share a batch (preferred sizes 2 and 4).
        answers = []

        def one(i):
            x = [1.0, float(i), 0.0, 0.0]
            status, _, body = curl(url, "-H", "Content-Type: application/json", body=infer_body(x))
            answers.append((status, x, body))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(answers) == 8
        for status, x, body in answers:
            assert status == 200, body
            assert json.loads(body)["outputs"][0]["data"] == pytest.approx(linear_expected(x), rel=1e-6)
            tally.add("linear", "ok")
        pb, pb_grpc = grpc_stubs()
        with grpc.insecure_channel(s.grpc) as ch:
            grpc_infer_test_models(pb_grpc.GRPCInferenceServiceStub(ch), pb, tally, pytest.approx)
    finally:
        rc, report = s.stop(signal.SIGTERM)
    assert rc == 0, s.output()
    linear = report["models"]["linear"]
    # Every request ended once: what the clients saw is what serve counted.
    assert linear["sent"] == linear["ok"] + linear["late"] + linear["dropped"] + linear["errors"]
    assert linear["ok"] == tally.by_model["linear"]["ok"] and linear["dropped"] == 0, linear


EMULATED = """
    devices: emulated:1
    policy: triton:max_batch=1
    models:
      # l(1) = 2 s: one request runs while the next waits; the queue holds one.
      - {name: slow, input: "float32[4]", slo_ms: 5000, max_batch: 4, max_queue: 1, alpha_ms: 1, beta_ms: 1999}
"""


def test_triton_max_queue_size_refuses_what_does_not_fit():
    s = Serve(EMULATED)
    try:
        url = s.url + "/v2/models/slow/infer"
        answers = []
        lock = threading.Lock()

        def one():
            r = curl(url, "-H", "Content-Type: application/json", body=infer_body([0, 0, 0, 0]))
            with lock:
                answers.append(r)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(answers) == 6
        ok = [a for a in answers if a[0] == 200]
        full = [a for a in answers if a[0] == 429]
        assert len(ok) + len(full) == 6, [(a[0], a[2]) for a in answers]
        # At least one runs and one waits; six sent at once cannot all fit.
        assert len(ok) >= 2 and len(full) >= 1, [(a[0], a[2]) for a in answers]
        assert all(a[1].get("symphony-drop-reason") == "queue_full" for a in full), full
    finally:
        rc, report = s.stop(signal.SIGTERM)
    assert rc == 0, s.output()
    slow = report["models"]["slow"]
    assert slow["sent"] == 6 and slow["ok"] + slow["late"] == len(ok), slow
    assert slow["dropped_by_reason"] == {"queue_full": len(full)}, slow


REPOSITORY_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
# Under policy: triton, Triton's meaning: a lone request waits up to 20 s for
# company, and a batch of 2 (the preferred size) leaves at once.
dynamic_batching { preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 20000000 }
parameters: { key: "symphony.slo_ms" value: { string_value: "60000" } }
"""


def test_triton_reads_a_repository_models_dynamic_batching():
    import shutil
    import tempfile
    from oip_harness import MODELS
    repo = tempfile.mkdtemp(prefix="symphony-triton-repo-")
    os.makedirs(os.path.join(repo, "linear", "1"))
    shutil.copy(os.path.join(MODELS, "linear.pt"), os.path.join(repo, "linear", "1", "model.pt"))
    with open(os.path.join(repo, "linear", "config.pbtxt"), "w") as f:
        f.write(REPOSITORY_CONFIG)
    config = """
        devices: cpu
        policy: triton
        profiling: {max_batch: 4, repeats: 3}
    """
    s = Serve(config, extra=["--model-repository", repo])
    try:
        url = s.url + "/v2/models/linear/infer"
        answers = []

        def one(i):
            x = [float(i), 2.0, 3.0, 4.0]
            body = json.dumps({"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4],
                                           "data": x}]}).encode()
            status, _, out = curl(url, "-H", "Content-Type: application/json", body=body, timeout=60)
            answers.append((status, x, out))

        # Two at once: the second completes the preferred batch of 2, which
        # leaves at once (not after the 20 s delay; a lone request would wait it).
        threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert len(answers) == 2
        for status, x, out in answers:
            assert status == 200, out
            assert json.loads(out)["outputs"][0]["data"] == pytest.approx(linear_expected(x), rel=1e-6)
        status, _, body = curl(s.url + "/v2/models/linear/stats")
        (st,) = json.loads(body)["model_stats"]
        sizes = {b["batch_size"]: b["compute_infer"]["count"] for b in st["batch_stats"]}
        assert sizes == {2: 1}, st["batch_stats"]
    finally:
        rc, _ = s.stop(signal.SIGTERM)
        shutil.rmtree(repo, True)
    assert rc == 0, s.output()
