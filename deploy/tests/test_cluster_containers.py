"""The cluster's roles as containers of one image on one podman network, as
an orchestrator would start them (deploy/k8s/ has the Kubernetes form):
two schedulers (a primary and a hot spare), a backend with emulated GPUs and
a protocol frontend, each configured by its flags and environment alone
(the shared cluster.yaml mounted read-only as a ConfigMap would be, the token
in SYMPHONY_CLUSTER_TOKEN, the listeners in SYMPHONY_HTTP/GRPC/METRICS),
talking UCX over TCP between containers, found by their network aliases.

Under a bounded load through the frontend's published HTTP port, the
primary scheduler's container is killed (SIGKILL): the spare takes over and
every request still gets exactly one answer, none an error.

Run by ./scripts/image.sh --cluster-test. Every wait is bounded; every
container and the network are removed at exit.
"""
import json
import os
import tempfile
import threading
import time

import pytest

import container_harness as ch
from oip_harness import curl, grpc_stubs

TOKEN = "container-test-token"
CONFIG = """\
gpus: 2
policy: deferred
workload: {rate: 10}
delays: {safety_margin_ms: 30}
models:
  - {name: model, alpha_ms: 1, beta_ms: 20, slo_ms: 2000, max_batch: 8}
cluster:
  heartbeat_ms: 50
  heartbeat_timeout_ms: 1000
  schedulers: ["sched-0:7000", "sched-1:7000"]
  models:
    model: {input: "float32[4]", output: "uint8[16]"}
"""
BODY = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}).encode()


def logs_have(name, needle):
    return needle in ch.logs(name)


@pytest.fixture(scope="module")
def cluster():
    d = ch.writable_copy(tempfile.mkdtemp(prefix="symphony-cluster-containers-"))
    with open(os.path.join(d, "cluster.yaml"), "w") as f:
        f.write(CONFIG)
    net = ch.network("symphony-test-net")
    conf = d + ":/etc/symphony:ro"
    env = ("SYMPHONY_CLUSTER_TOKEN=" + TOKEN,)
    common = ["--network", net]
    c = {}
    # The primary first, then its spare, which must hear it within the heartbeat timeout (a
    # scheduler that hears no primary in time becomes one); an orchestrator starts them so too
    # (the StatefulSet's ordinals).
    for i in (0, 1):
        c["sched-%d" % i] = ch.run(ch.unique("symphony-sched-%d" % i),
                                   ["scheduler", "--listen", "sched-%d:7000" % i, "--config", "/etc/symphony/cluster.yaml"],
                                   volumes=(conf,), env=env, extra=common + ["--network-alias", "sched-%d" % i])
        if i == 0:
            ch.wait_until("a primary scheduler", lambda: logs_have(c["sched-0"], "primary now"), 60, c["sched-0"])
    ch.wait_until("the spare's start", lambda: logs_have(c["sched-1"], "a spare until it hears"), 60, c["sched-1"])
    time.sleep(2)  # past the spare's heartbeat timeout: it heard the primary, or took over
    assert not logs_have(c["sched-1"], "primary now"), ch.logs(c["sched-1"]) + ch.logs(c["sched-0"])
    c["backend"] = ch.run(ch.unique("symphony-backend"),
                          ["backend", "--config", "/etc/symphony/cluster.yaml", "--devices", "emulated:2",
                           "--name", "backend-0"], volumes=(conf,), env=env, extra=common)
    ch.wait_until("the backend's registration", lambda: logs_have(c["sched-0"], " registered "), 60, c["backend"])
    c["frontend"] = ch.run(ch.unique("symphony-frontend"),
                           ["frontend", "--config", "/etc/symphony/cluster.yaml", "--name", "frontend-0", "--quiet"],
                           publish=(8000, 8001, 8002), volumes=(conf,), env=env, extra=common)
    c["url"] = "http://" + ch.host_port(c["frontend"], 8000)
    c["grpc"] = ch.host_port(c["frontend"], 8001)
    c["metrics"] = "http://" + ch.host_port(c["frontend"], 8002)
    ch.wait_until("the frontend's readiness",
                  lambda: curl(c["url"] + "/v2/health/ready", timeout=5)[0] == 200, 60, c["frontend"])
    return c


def infer(c, errors=None):
    """(status, outcome header); the error of an answer other than 200 goes to
    `errors`; a transport failure raises."""
    status, headers, out = curl(c["url"] + "/v2/models/model/infer", "-H", "Content-Type: application/json",
                                body=BODY, timeout=30)
    if status != 200 and errors is not None:
        errors.append("%d %s" % (status, out.decode(errors="replace")))
    return status, headers.get("symphony-outcome")


def test_frontend_serves_rest_grpc_and_metrics(cluster):
    for _ in range(20):  # the first request of a new backend-frontend pair may miss its deadline
        if infer(cluster) == (200, "ok"):
            break
    assert infer(cluster) == (200, "ok")
    import grpc
    pb, pb_grpc = grpc_stubs()
    with grpc.insecure_channel(cluster["grpc"]) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready
        req = pb.ModelInferRequest(model_name="model")
        req.inputs.add(name="input", datatype="FP32", shape=[1, 4])
        req.raw_input_contents.append(b"\0" * 16)
        resp, call = stub.ModelInfer.with_call(req, timeout=30)
        assert dict(call.trailing_metadata())["symphony-outcome"] == "ok"
        assert len(resp.raw_output_contents[0]) == 16
    status, _, body = curl(cluster["metrics"] + "/metrics")
    assert status == 200 and b"symphony_front_inflight" in body
    # The image's HEALTHCHECK: the frontend on /v2/health/ready, the others (a spare too) on /healthz.
    for role in ("frontend", "backend", "sched-0", "sched-1"):
        assert ch.podman("healthcheck", "run", cluster[role], check=False).returncode == 0, role


def test_killing_the_primary_schedulers_container_keeps_the_service_answering(cluster):
    answers = []
    errors = []
    lock = threading.Lock()
    stop = threading.Event()
    killed_at = [None]

    def sender():
        while not stop.is_set():
            try:
                a = infer(cluster, errors)
            except Exception as e:  # no answer at all
                a = ("no answer", str(e))
            with lock:
                answers.append((time.monotonic(), a))

    threads = [threading.Thread(target=sender) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(3)
        killed_at[0] = time.monotonic()
        ch.podman("kill", "--signal", "KILL", cluster["sched-0"])
        ch.wait_until("the spare's takeover", lambda: logs_have(cluster["sched-1"], "primary now"), 10)
        took_over = time.monotonic() - killed_at[0]
        time.sleep(4)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    before = [a for t, a in answers if t < killed_at[0]]
    after = [a for t, a in answers if t >= killed_at[0]]
    kinds = {}
    for _, a in answers:
        kinds[a] = kinds.get(a, 0) + 1
    print("requests: %d before the kill, %d after; answers %s; the spare took over within %.2f s; errors: %s" %
          (len(before), len(after), kinds, took_over, errors))
    assert not [a for _, a in answers if a[0] == "no answer"], kinds
    # While no scheduler is primary the frontend answers 503 (not ready; a client retries); outside
    # that gap, as the takeover was seen plus 1 s, every answer is ok.
    gap_end = killed_at[0] + took_over + 1
    assert not [(t, a) for t, a in answers if a != (200, "ok") and not (a[0] == 503 and killed_at[0] <= t <= gap_end)], \
        (kinds, errors)
    assert sum(1 for t, a in answers if a == (200, "ok") and t > gap_end) >= 10, kinds
    assert ch.state(cluster["sched-0"])[0] == "exited"


def test_sigterm_stops_every_role_with_status_0(cluster):
    for role in ("frontend", "backend", "sched-1"):
        ch.podman("stop", "-t", "30", cluster[role], timeout=60)
        assert ch.state(cluster[role]) == ("exited", 0), (role, ch.logs(cluster[role]))
