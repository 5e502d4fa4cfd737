"""Symphony's image, run as Triton's image is run:

    podman run -p 8000:8000 -p 8001:8001 -p 8002:8002 -v REPO:/models IMAGE \
        serve --model-repository /models --model-control-mode explicit --load-model ...

(each port published on a free loopback port, so that the test never collides
with a server of this machine), checked with clients we did not write: curl,
and grpcio stubs generated from front/proto/inference.proto. Health, metadata,
REST and gRPC inference, /metrics on 8002, the repository extension (load,
unload), the HEALTHCHECK, the labels and the non-root user; then SIGTERM with
requests in flight (each gets one answer, the container exits 0); then the
image with no arguments serves what is mounted at /mnt/models (KServe).

Run by ./scripts/image.sh --test (which builds the image and the test models).
Every wait is bounded; every container is removed at exit.
"""
import json
import os
import re
import struct
import tempfile
import threading
import time

import pytest

import container_harness as ch
from oip_harness import MODELS, curl, grpc_stubs, linear_expected

MODEL_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ %d ] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
parameters: { key: "symphony.slo_ms" value: { string_value: "%d" } }
"""
# linear: float32[4] -> float32[3]; busy: ~200 ms a batch on one core, so that
# a burst queues (its SLO lets every queued request run while the server drains).
MODELS_IN_REPO = {"linear": ("linear", 3, 5000), "linear_b": ("linear", 3, 5000), "busy": ("busy", 4, 120000)}
START_TIMEOUT = 600  # loading, profiling and warming up on a small shared CPU


def make_repo():
    src = tempfile.mkdtemp(prefix="symphony-image-repo-")
    for name, (model, out, slo) in MODELS_IN_REPO.items():
        os.makedirs(os.path.join(src, name, "1"))
        with open(os.path.join(MODELS, model + ".pt"), "rb") as f, \
                open(os.path.join(src, name, "1", "model.pt"), "wb") as g:
            g.write(f.read())
        with open(os.path.join(src, name, "config.pbtxt"), "w") as f:
            f.write(MODEL_CONFIG % (out, slo))
    return ch.writable_copy(src)


def ready(url):
    return curl(url + "/v2/health/ready", timeout=5)[0] == 200


class Served:
    """The image serving a repository mounted at `mount`, with `args` after the entrypoint."""

    def __init__(self, repo, mount, args, stem):
        self.out = ch.writable_copy(tempfile.mkdtemp(prefix="symphony-image-out-"))
        self.name = ch.run(ch.unique(stem), args, publish=(8000, 8001, 8002),
                           volumes=(repo + ":" + mount, self.out + ":/out"))
        self.http = ch.host_port(self.name, 8000)
        self.grpc = ch.host_port(self.name, 8001)
        self.metrics = ch.host_port(self.name, 8002)
        self.url = "http://" + self.http
        ch.wait_until("readiness on /v2/health/ready", lambda: ready(self.url), START_TIMEOUT, self.name)

    def post(self, path, body=None, timeout=120):
        status, headers, out = curl("-X", "POST", self.url + path, "-H", "Content-Type: application/json",
                                    body=None if body is None else json.dumps(body).encode(), timeout=timeout)
        return status, headers, json.loads(out) if out else None

    def infer(self, model, x, timeout=120):
        return self.post("/v2/models/%s/infer" % model,
                         {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": x}]},
                         timeout=timeout)


@pytest.fixture(scope="module")
def repo():
    return make_repo()


@pytest.fixture(scope="module")
def served(repo):
    return Served(repo, "/models",
                  ["serve", "--model-repository", "/models", "--model-control-mode", "explicit",
                   "--load-model", "linear", "--load-model", "busy", "--json", "/out/report.json", "--quiet"],
                  "symphony-image-test")


def test_health_and_server_metadata(served):
    assert curl(served.url + "/v2/health/live")[0] == 200
    assert curl(served.url + "/v2/health/ready")[0] == 200
    status, _, body = curl(served.url + "/v2")
    assert status == 200 and json.loads(body)["name"] == "symphony", body


def test_model_metadata(served):
    status, _, body = curl(served.url + "/v2/models/linear")
    meta = json.loads(body)
    assert status == 200 and meta["name"] == "linear", body
    assert meta["inputs"] == [{"name": "INPUT__0", "datatype": "FP32", "shape": [-1, 4]}], meta


def test_rest_inference_matches_torch(served):
    x = [0.5, -1.0, 2.0, 3.5]
    status, headers, body = served.infer("linear", x)
    assert status == 200, body
    assert headers.get("symphony-outcome") == "ok", headers
    assert body["outputs"][0]["data"] == pytest.approx(linear_expected(x), rel=1e-6)


def test_grpc_inference_matches_torch(served):
    import grpc
    pb, pb_grpc = grpc_stubs()
    with grpc.insecure_channel(served.grpc) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready
        meta = stub.ModelMetadata(pb.ModelMetadataRequest(name="linear"), timeout=10)
        assert meta.inputs[0].name == "INPUT__0" and list(meta.inputs[0].shape) == [-1, 4]
        x = [1.0, 2.0, 3.0, 4.0]
        req = pb.ModelInferRequest(model_name="linear", id="c1")
        req.inputs.add(name="INPUT__0", datatype="FP32", shape=[1, 4])
        req.raw_input_contents.append(struct.pack("<4f", *x))
        resp, call = stub.ModelInfer.with_call(req, timeout=60)
        assert dict(call.trailing_metadata())["symphony-outcome"] == "ok"
        assert resp.id == "c1" and list(resp.outputs[0].shape) == [1, 3]
        assert list(struct.unpack("<3f", resp.raw_output_contents[0])) == pytest.approx(linear_expected(x), rel=1e-6)


def test_metrics_on_8002_count_the_requests(served):
    status, _, body = curl("http://%s/metrics" % served.metrics)
    text = body.decode()
    assert status == 200
    m = re.search(r'^symphony_requests_total\{[^}]*model="linear"[^}]*outcome="ok"[^}]*\} (\S+)$', text, re.M)
    assert m and float(m.group(1)) >= 2, text[:2000]
    assert curl("http://%s/readyz" % served.metrics)[0] == 200


def index(served):
    status, _, body = served.post("/v2/repository/index", {})
    assert status == 200, body
    return {e["name"]: e for e in body}


def test_repository_load_infer_unload(served):
    # Known to the repository but not loaded: 503, not 404 (docs/front.md's error table).
    assert index(served)["linear_b"]["state"] == "UNAVAILABLE"
    assert served.infer("linear_b", [1, 2, 3, 4])[0] == 503
    status, _, body = served.post("/v2/repository/models/linear_b/load", timeout=START_TIMEOUT)
    assert status == 200, body
    assert index(served)["linear_b"]["state"] == "READY"
    status, _, body = served.infer("linear_b", [1, 2, 3, 4])
    assert status == 200 and body["outputs"][0]["name"] == "OUTPUT__0", body
    status, _, body = served.post("/v2/repository/models/linear_b/unload")
    assert status == 200, body
    assert index(served)["linear_b"]["state"] == "UNAVAILABLE"
    assert served.infer("linear_b", [1, 2, 3, 4])[0] == 503


def test_healthcheck_labels_user_and_logs(served):
    assert ch.podman("healthcheck", "run", served.name, check=False).returncode == 0
    labels = json.loads(ch.podman("image", "inspect", "--format", "{{json .Labels}}", ch.IMAGE).stdout)
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "VERSION")) as f:
        assert labels["org.opencontainers.image.version"] == f.read().strip()
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.source"]
    assert ch.podman("exec", served.name, "id", "-u").stdout.strip() == "1000"
    log = ch.logs(served.name)
    assert "front: listening on" in log and "0.0.0.0:8000" in log, log


def test_sigterm_drains_requests_in_flight_and_exits_0(served):
    """The last test of the module: SIGTERM while a burst is queued; every
    request gets exactly one answer (200, or 503 if it came after the stop),
    the report counts them, and the container exits 0."""
    n = 24
    answers = [None] * n

    def send(i):
        try:
            status, headers, body = served.infer("busy", [float(i), 0, 0, 0], timeout=180)
            answers[i] = (status, headers.get("symphony-outcome"))
        except Exception as e:  # a transport failure: no answer at all
            answers[i] = ("no answer", str(e))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()

    def inflight():
        text = curl("http://%s/metrics" % served.metrics, timeout=5)[2].decode()
        return int(float(re.search(r"^symphony_front_inflight (\S+)$", text, re.M).group(1)))

    ch.wait_until("8 requests in flight", lambda: inflight() >= 8, 60, served.name)
    held = inflight()
    ch.podman("kill", "--signal", "TERM", served.name)
    for t in threads:
        t.join(timeout=240)
    assert not any(t.is_alive() for t in threads)
    assert ch.wait_exit(served.name, 120) == 0, ch.logs(served.name)
    log = ch.logs(served.name)
    assert "SIGTERM: stopping" in log, log
    no_answer = [a for a in answers if a[0] not in (200, 503)]
    assert not no_answer, (no_answer, log)
    ok = sum(1 for a in answers if a[0] == 200)
    assert ok >= held, (answers, held)  # what was inside at the signal ran
    # The server's report counts what the clients saw, request by request.
    with open(os.path.join(served.out, "report.json")) as f:
        busy = json.load(f)["models"]["busy"]
    count = lambda a: sum(1 for x in answers if x == a)
    assert busy["ok"] == count((200, "ok")) and busy["late"] == count((200, "late")), (busy, answers)
    assert busy["dropped"] == sum(1 for x in answers if x[0] == 503) and busy["errors"] == 0, (busy, answers)
    print("SIGTERM drain: %d requests, %d in flight at the signal; answers %s; the report's busy: %s" %
          (n, held, {a: count(a) for a in set(answers)}, json.dumps(busy)))


def test_no_arguments_serve_kserves_mount(repo):
    """The image's default command is `serve`; with no repository given it
    serves /mnt/models (profiles cached there by the first container)."""
    s = Served(repo, "/mnt/models", [], "symphony-image-kserve")
    assert "/mnt/models (KServe's model mount)" in ch.logs(s.name)
    status, _, body = s.infer("linear", [1, 2, 3, 4])
    assert status == 200, body
    t0 = time.monotonic()
    ch.podman("stop", "-t", "60", s.name, timeout=90)
    assert ch.state(s.name) == ("exited", 0), ch.logs(s.name)
    print("podman stop of the KServe-style container: %.1f s" % (time.monotonic() - t0))
