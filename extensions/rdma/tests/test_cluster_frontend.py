"""`symphony frontend`, the cluster's Open Inference Protocol front, as real
processes (a scheduler, backends and one or two frontends on loopback, UCX
over TCP), driven by clients we did not write: curl, Python's http.client
and grpcio with stubs generated here from front/proto/inference.proto.

Two clusters:
  torch:    TorchScript test models on a CPU backend (eager policy): metadata
            from cluster.models, outputs checked against torch, 400, 404, a
            model that raises (500), a budget too short (504 infeasible), and
            the clients' counts equal to the frontend's report and /metrics;
  emulated: emulated GPUs (deferred policy): an opaque model answers with the
            hash of its input, a cancelled queued request never runs, and a
            killed backend or scheduler mid-run leaves every protocol request
            with exactly one response, errors naming what failed, and the
            frontends serving again once it is back.
Every wait is bounded; every process started is killed at the end.
"""
import http.client
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request

import grpc
import pytest

from oip_harness import (BAD_LINEAR_INPUTS, CLI, MODELS, Process, Tally, curl, curl_hung_up_once_held, front_inflight,
                         grpc_infer_test_models, grpc_stubs, linear_expected, read_json, read_ports, wait_stopped)

TOKEN = "frontend-test-token"


def fnv1a64(data):
    """The hash emulated backends answer with (node_common.hpp's fnv1a64, its constants)."""
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & (2 ** 64 - 1)
    return h


def http_get(url, timeout=5):
    """(status, body) of a GET; (0, reason) when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        return 0, str(e).encode()


def wait_until(pred, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out after %d s waiting for %s" % (timeout, what)
        time.sleep(0.05)


class Frontend:
    def __init__(self, cluster, name, extra=(), env=None):
        self.name = name
        self.port_file = os.path.join(cluster.dir, name + ".ports")
        self.report_file = os.path.join(cluster.dir, name + ".json")
        self.process = Process([CLI, "frontend", "--config", cluster.config, "--scheduler", cluster.address(),
                                "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--port-file", self.port_file,
                                "--metrics", "127.0.0.1:0", "--json", self.report_file, "--name", name, "--quiet"]
                               + list(extra), os.path.join(cluster.dir, name + ".log"), env=env)
        self.process.wait_for("its port file", lambda: os.path.exists(self.port_file), timeout=60)
        self.http, self.grpc = read_ports(self.port_file)
        self.url = "http://" + self.http
        self.process.wait_for("its metrics address", lambda: "metrics: listening on" in self.output(), timeout=10)
        self.metrics_url = re.search(r"metrics: listening on (http://\S+/metrics)", self.output()).group(1)

    def output(self):
        return self.process.output()

    def ready(self):
        return http_get(self.url + "/v2/health/ready")[0] == 200

    def wait_ready(self, timeout=30):
        wait_until(self.ready, "frontend %s to be ready:\n%s" % (self.name, self.output()), timeout)

    def stop(self, sig=signal.SIGTERM):
        """Stops it; returns its report (and checks it exited 0)."""
        rc = self.process.stop(sig, timeout=60)
        assert rc == 0, self.output()
        report = read_json(self.report_file)
        assert report is not None, self.output()
        return report


class Cluster:
    """A scheduler, backends and frontends on loopback, sharing one cluster.yaml."""

    def __init__(self, config_text):
        self.dir = tempfile.mkdtemp(prefix="symphony-cluster-front-")
        self.config = os.path.join(self.dir, "cluster.yaml")
        with open(self.config, "w") as f:
            f.write(textwrap.dedent(config_text))
        self.port = 0
        self.scheduler = None
        self.backends = {}
        self.frontends = []

    def address(self):
        return "127.0.0.1:%d" % self.port

    def start_scheduler(self, name="scheduler", extra=()):
        port_file = os.path.join(self.dir, name + ".port")
        self.scheduler = Process([CLI, "scheduler", "--listen", "127.0.0.1:%d" % self.port, "--config", self.config,
                                  "--port-file", port_file, "--json", os.path.join(self.dir, name + ".json")]
                                 + list(extra), os.path.join(self.dir, name + ".log"))
        self.scheduler.wait_for("its port file", lambda: os.path.exists(port_file), timeout=30)
        with open(port_file) as f:
            port = int(f.read())
        assert self.port in (0, port)
        self.port = port
        return self.scheduler

    def registered(self):
        return self.scheduler.output().count(" registered ")

    def start_backend(self, name, devices, models=(), wait=True, extra=()):
        before = self.registered()
        args = [CLI, "backend", "--scheduler", self.address(), "--devices", devices,
                "--name", name, "--json", os.path.join(self.dir, name + ".json")] + list(extra)
        args += ["--config", self.config]
        for m in models:
            args += ["--model", m]
        b = Process(args, os.path.join(self.dir, name + ".log"))
        self.backends[name] = b
        if wait:
            b.wait_for("its registration", lambda: self.registered() > before, timeout=60)
        return b

    def start_frontend(self, name, extra=(), env=None):
        f = Frontend(self, name, extra, env)
        self.frontends.append(f)
        return f

    def report(self, name):
        return read_json(os.path.join(self.dir, name + ".json"))

    def stop_all(self):
        for f in self.frontends:
            if f.process.running():
                f.process.kill()
        for b in self.backends.values():
            if b.running():
                b.stop(signal.SIGTERM, timeout=30)
        if self.scheduler and self.scheduler.running():
            self.scheduler.stop(signal.SIGTERM, timeout=30)


KINDS = {"ok": "ok", "late": "late", "dropped": "dropped", "error": "errors"}


def kind_of(status_or_code, outcome):
    """ok / late / dropped / errors, as the front counts a response: its outcome
    when the request reached the cluster, else refusals by the front itself
    (429 at its in-flight bound, 503 while not ready) as dropped, the rest
    (400, 404) as errors."""
    if outcome:
        return KINDS[outcome]
    if status_or_code in (429, 503, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
        return "dropped"
    return "errors"


def http_infer(f, model, body, tally=None, headers=()):
    args = [f.url + "/v2/models/%s/infer" % model, "-H", "Content-Type: application/json"]
    for h in headers:
        args += ["-H", h]
    status, hdrs, out = curl(*args, body=body if isinstance(body, bytes) else json.dumps(body).encode())
    if tally is not None:
        tally.add(model, kind_of(status, hdrs.get("symphony-outcome")))
    return status, hdrs, out


def metric_lines(f):
    status, body = http_get(f.metrics_url)
    assert status == 200, body
    return body.decode()


def inflight(f):
    """symphony_front_inflight from a frontend's /metrics."""
    return front_inflight(metric_lines(f))


def check_report_equals(report, tally, what):
    """Per model: the frontend's report holds exactly what the clients counted."""
    for model, counts in tally.by_model.items():
        r = report["models"][model]
        for key in ("ok", "late", "dropped", "errors"):
            assert r[key] == counts[key], (what, model, key, r, counts)
        assert r["sent"] == sum(counts.values()), (what, model, r, counts)
        assert r["sent"] == r["ok"] + r["late"] + r["dropped"] + r["errors"]


# ---- torch: TorchScript models on a CPU backend ---------------------------------------

TORCH_CONFIG = """
    gpus: 1
    policy: eager
    workload: {rate: 10}
    models:
      - {name: linear, alpha_ms: 0.05, beta_ms: 1, slo_ms: 3000, max_batch: 4}
      - {name: two_inputs, alpha_ms: 0.05, beta_ms: 1, slo_ms: 3000, max_batch: 4}
      - {name: tuple_out, alpha_ms: 0.05, beta_ms: 1, slo_ms: 3000, max_batch: 4}
      - {name: raises, alpha_ms: 0.05, beta_ms: 1, slo_ms: 3000, max_batch: 4}
      # A profile of ~1 us for busy.pt, which takes ~200 ms: planned feasible, answered late.
      - {name: busy, alpha_ms: 0.001, beta_ms: 0.001, slo_ms: 50, max_batch: 4}
    cluster:
      token: "%s"
      heartbeat_ms: 50
      heartbeat_timeout_ms: 500
      models:
        linear: {input: "float32[4]", output: "float32[3]"}
        two_inputs: {inputs: ["float32[2]", "int64[3]"], output: "float32[]"}
        tuple_out: {input: "float32[4]", outputs: ["float32[4]", "float32[]"]}
        raises: {input: "float32[4]"}
        busy: {input: "float32[4]", output: "float32[4]"}
""" % TOKEN


def need_test_model(name):
    """Skips the test without the TorchScript test model `name` (SYMPHONY_TEST_MODELS)."""
    if not MODELS or not os.path.exists(os.path.join(MODELS, name)):
        pytest.skip("no TorchScript test models (SYMPHONY_TEST_MODELS): built without libtorch")


@pytest.fixture(scope="module")
def torch_cluster():
    need_test_model("linear.pt")
    c = Cluster(TORCH_CONFIG)
    c.start_scheduler()
    m = lambda name, spec: "%s:%s:%s" % (name, os.path.join(MODELS, name + ".pt"), spec)
    c.start_backend("cpu", "cpu", [m("linear", "float32[4]"), m("two_inputs", "float32[2]+int64[3]"),
                                   m("tuple_out", "float32[4]"), m("raises", "float32[4]"),
                                   m("busy", "float32[4]")])
    f = c.start_frontend("fe")
    f.wait_ready()
    c.fe = f
    c.tally = Tally()
    yield c
    c.stop_all()


def test_torch_health_and_metadata_from_the_cluster_config(torch_cluster):
    f = torch_cluster.fe
    assert curl(f.url + "/v2/health/live")[0] == 200
    status, _, body = curl(f.url + "/v2/health/ready")
    assert status == 200 and json.loads(body) == {"ready": True}
    status, _, body = curl(f.url + "/v2")
    assert status == 200 and json.loads(body)["name"] == "symphony"
    # It lists what it implements: statistics from the scheduler's counts
    # (test_emulated_statistics_are_the_schedulers_and_exact_across_a_frontend_restart).
    assert sorted(json.loads(body)["extensions"]) == ["binary_tensor_data", "model_configuration", "statistics"]
    status, _, body = curl(f.url + "/v2/models/linear/stats")
    assert status == 200 and [(m["name"], m["version"]) for m in json.loads(body)["model_stats"]] == [
        ("linear", "1")], body
    status, _, body = curl(f.url + "/v2/models/linear/config")
    c = json.loads(body)
    assert status == 200 and c["name"] == "linear" and c["input"][0]["dims"] == [4], body
    status, _, body = curl(f.url + "/v2/models/linear")
    m = json.loads(body)
    assert status == 200 and m["platform"] == "symphony_cluster" and m["versions"] == ["1"]
    assert m["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}]
    assert m["outputs"] == [{"name": "output", "datatype": "FP32", "shape": [-1, 3]}]
    m = json.loads(curl(f.url + "/v2/models/two_inputs")[2])
    assert [(i["name"], i["datatype"], i["shape"]) for i in m["inputs"]] == [
        ("input0", "FP32", [-1, 2]), ("input1", "INT64", [-1, 3])]
    assert m["outputs"] == [{"name": "output", "datatype": "FP32", "shape": [-1]}]
    m = json.loads(curl(f.url + "/v2/models/tuple_out")[2])
    assert [(o["name"], o["shape"]) for o in m["outputs"]] == [("output0", [-1, 4]), ("output1", [-1])]
    assert json.loads(curl(f.url + "/v2/models/raises")[2])["outputs"] == []  # not declared, not yet answered
    status, _, body = curl(f.url + "/v2/models/linear/ready")
    assert status == 200 and json.loads(body) == {"name": "linear", "ready": True}
    status, _, body = curl(f.url + "/v2/models/nope")
    assert status == 404 and "unknown model 'nope'" in json.loads(body)["error"]
    status, _, body = curl(f.url + "/v2/models/linear/versions/2")
    assert status == 404 and "no version '2'" in json.loads(body)["error"]


def input_counts(f):
    """(in place, copied, bytes copied): how a frontend's requests reached the registered pool."""
    text = metric_lines(f)
    return tuple(int(float(re.search(r"^%s (\S+)$" % name, text, re.M).group(1))) for name in (
        "symphony_frontend_inputs_in_place_total", "symphony_frontend_inputs_copied_total",
        "symphony_frontend_input_bytes_copied_total"))


def test_torch_outputs_match_torch_json_and_binary(torch_cluster):
    """JSON and binary REST requests and raw and typed gRPC requests of one
    sample are decoded straight into the registered pool: the frontend
    copies none of their bytes."""
    f, tally = torch_cluster.fe, torch_cluster.tally
    before = input_counts(f)
    x = [0.5, -1.0, 2.0, 3.5]
    want = linear_expected(x)
    for shape, out_shape in (([1, 4], [1, 3]), ([4], [3])):
        status, hdrs, body = http_infer(
            f, "linear", {"id": "r1", "inputs": [{"name": "input", "datatype": "FP32", "shape": shape, "data": x}]},
            tally)
        assert status == 200, body
        r = json.loads(body)
        assert hdrs["symphony-outcome"] in ("ok", "late") and r["id"] == "r1" and r["model_name"] == "linear"
        (out,) = r["outputs"]
        assert out["name"] == "output" and out["datatype"] == "FP32" and out["shape"] == out_shape
        assert out["data"] == pytest.approx(want, rel=1e-6)
        assert r["parameters"]["batch_size"] >= 1
    header = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4],
                                     "parameters": {"binary_data_size": 16}}],
                         "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
    status, hdrs, body = http_infer(f, "linear", header + struct.pack("<4f", *x), tally,
                                    headers=["Inference-Header-Content-Length: %d" % len(header),
                                             "Content-Type: application/octet-stream"])
    assert status == 200, body
    n = int(hdrs["inference-header-content-length"])
    assert list(struct.unpack("<3f", body[n:])) == pytest.approx(want, rel=1e-6)
    # gRPC: raw contents copied off gRPC's buffers into the slot, typed ones decoded there.
    pb, pb_grpc = grpc_stubs()
    raw = pb.ModelInferRequest(model_name="linear")
    raw.inputs.add(name="input", datatype="FP32", shape=[1, 4])
    raw.raw_input_contents.append(struct.pack("<4f", *x))
    typed = pb.ModelInferRequest(model_name="linear")
    typed.inputs.add(name="input", datatype="FP32", shape=[1, 4]).contents.fp32_contents.extend(x)
    with grpc.insecure_channel(f.grpc) as ch:
        for r in (raw, typed):
            resp = pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(r, timeout=30)
            tally.add("linear", resp.parameters["outcome"].string_param)
            assert list(struct.unpack("<3f", resp.raw_output_contents[0])) == pytest.approx(want, rel=1e-6)
    in_place, copied, copied_bytes = input_counts(f)
    assert (in_place - before[0], copied - before[1], copied_bytes - before[2]) == (5, 0, 0), (before, in_place)


def test_torch_a_request_of_k_samples_is_one_answer_of_k_rows(torch_cluster):
    """[k, 4] to linear: k requests to the cluster, one answer [k, 3] in the
    order sent, counted once; two inputs and tuple outputs likewise."""
    f, tally = torch_cluster.fe, torch_cluster.tally
    xs = [[0.5, -1.0, 2.0, 3.5], [1, 2, 3, 4], [-3, 0, 0.25, 8]]
    status, hdrs, body = http_infer(f, "linear", {"inputs": [
        {"name": "input", "datatype": "FP32", "shape": [3, 4], "data": xs}]}, tally)
    assert status == 200, body
    (out,) = json.loads(body)["outputs"]
    assert out["shape"] == [3, 3]
    assert out["data"] == pytest.approx([v for x in xs for v in linear_expected(x)], rel=1e-6)
    status, _, body = http_infer(f, "tuple_out", {"inputs": [
        {"name": "input", "datatype": "FP32", "shape": [2, 4], "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}, tally)
    assert status == 200, body
    outs = {o["name"]: (o["shape"], o["data"]) for o in json.loads(body)["outputs"]}
    assert outs == {"output0": ([2, 4], [2, 4, 6, 8, 10, 12, 14, 16]), "output1": ([2], [10, 26])}
    # gRPC: the same rows, raw.
    pb, pb_grpc = grpc_stubs()
    r = pb.ModelInferRequest(model_name="linear")
    r.inputs.add(name="input", datatype="FP32", shape=[2, 4])
    r.raw_input_contents.append(struct.pack("<8f", *(xs[0] + xs[1])))
    with grpc.insecure_channel(f.grpc) as ch:
        resp = pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(r, timeout=30)
    tally.add("linear", resp.parameters["outcome"].string_param)
    assert list(resp.outputs[0].shape) == [2, 3]
    assert list(struct.unpack("<6f", resp.raw_output_contents[0])) == pytest.approx(
        linear_expected(xs[0]) + linear_expected(xs[1]), rel=1e-6)


def test_torch_two_inputs_and_tuple_outputs(torch_cluster):
    f, tally = torch_cluster.fe, torch_cluster.tally
    status, _, body = http_infer(f, "two_inputs", {"inputs": [
        {"name": "input1", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 3]},
        {"name": "input0", "datatype": "FP32", "shape": [1, 2], "data": [0.5, 0.25]}]}, tally)
    assert status == 200, body
    assert json.loads(body)["outputs"][0]["data"] == pytest.approx([6.75])
    status, _, body = http_infer(f, "tuple_out", {"inputs": [
        {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}, tally)
    outs = {o["name"]: o["data"] for o in json.loads(body)["outputs"]}
    assert status == 200 and outs == {"output0": [2, 4, 6, 8], "output1": [10]}


def test_torch_model_error_is_500_naming_the_backend_and_the_error(torch_cluster):
    f, tally = torch_cluster.fe, torch_cluster.tally
    status, hdrs, body = http_infer(f, "raises", {"inputs": [
        {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [-1000, 0, 0, 0]}]}, tally)
    err = json.loads(body)["error"]
    assert status == 500 and hdrs["symphony-outcome"] == "error", body
    assert "model 'raises' failed in the cluster" in err and "'cpu'" in err and "below -100" in err, err
    # Undeclared outputs come back as the backend's bytes, UINT8; the metadata learns them.
    status, _, body = http_infer(f, "raises", {"inputs": [
        {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}, tally)
    assert status == 200, body
    (out,) = json.loads(body)["outputs"]
    assert out["datatype"] == "UINT8" and out["shape"] == [1, 16]
    assert list(struct.unpack("<4f", bytes(out["data"]))) == [2, 3, 4, 5]
    meta = json.loads(curl(f.url + "/v2/models/raises")[2])
    assert meta["outputs"] == [{"name": "output", "datatype": "UINT8", "shape": [-1, 16]}]


@pytest.mark.parametrize("inputs,says", BAD_LINEAR_INPUTS)
def test_torch_bad_input_is_400_naming_the_problem(torch_cluster, inputs, says):
    status, hdrs, body = http_infer(torch_cluster.fe, "linear", {"inputs": inputs}, torch_cluster.tally)
    assert status == 400 and says in json.loads(body)["error"], body
    assert "symphony-outcome" not in hdrs  # refused by the front: it never reached the cluster


def test_torch_late_is_after_the_target_and_the_report_says_if_by_the_deadline(torch_cluster):
    """busy takes ~200 ms against a 50 ms SLO: with a 20 s budget the request
    is late (after its target, the SLO) but by its deadline; without one it is
    late past its deadline too. The zz test checks the report's count."""
    f, tally = torch_cluster.fe, torch_cluster.tally
    x = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
    for params in ({"timeout": 20_000_000}, {}):
        status, hdrs, body = http_infer(f, "busy", {"inputs": [x], "parameters": params}, tally)
        assert status == 200 and hdrs["symphony-outcome"] == "late", (params, body)
        assert json.loads(body)["outputs"][0]["data"] == [1, 2, 3, 4]


def test_torch_budget_too_short_is_504_infeasible(torch_cluster):
    x = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
    status, hdrs, body = http_infer(torch_cluster.fe, "linear", {"inputs": [x], "parameters": {"timeout": 1}},
                                    torch_cluster.tally)
    assert status == 504, body
    assert hdrs["symphony-outcome"] == "dropped" and hdrs["symphony-drop-reason"] == "infeasible", hdrs
    error = json.loads(body)["error"]
    assert "budget of 0.001 ms" in error, body
    # Judged at the frontend with the least budget the scheduler sent: at
    # least linear's l(1) of 1.05 ms.
    least = re.search(r"its target of 0.001 ms cannot be met; even a batch of one needs ([0-9.]+) ms", error)
    assert least and float(least.group(1)) >= 1.05, body


def test_torch_a_budget_spent_waiting_to_be_read_expires_at_once(torch_cluster):
    # The frontend stopped (SIGSTOP, for less than a heartbeat's timeout)
    # while a request with a 150 ms budget reaches its socket: when it runs
    # again it ends the request at once as expired, naming the wait (counted
    # from the kernel's receive stamp), and sends the scheduler nothing.
    # Python's http.client is the client. Sent once every thread is stopped
    # (wait_stopped); a stop that still misses (the request then served) is
    # tried again, up to three tries.
    f, tally = torch_cluster.fe, torch_cluster.tally
    host, port = f.http.rsplit(":", 1)
    x = {"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
    tries = []
    for _ in range(3):
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            c.request("GET", "/v2/health/ready")  # connected and read once
            assert c.getresponse().read() == b'{"ready":true}'
            os.kill(f.process.proc.pid, signal.SIGSTOP)
            try:
                wait_stopped(f.process.proc.pid)
                c.request("POST", "/v2/models/linear/infer", headers={"Content-Type": "application/json"},
                          body=json.dumps({"inputs": [x], "parameters": {"timeout": 150_000}}))
                time.sleep(0.3)
            finally:
                os.kill(f.process.proc.pid, signal.SIGCONT)
            r = c.getresponse()
            status, outcome, body = r.status, r.getheader("Symphony-Outcome"), r.read().decode()
            reason = r.getheader("Symphony-Drop-Reason")
        finally:
            c.close()
        tally.add("linear", kind_of(status, outcome))
        tries.append((status, reason, body))
        if status == 504:
            break
    assert all(t[0] == 200 for t in tries[:-1]), tries  # a missed stop: served
    status, reason, body = tries[-1]
    assert status == 504 and reason == "expired", tries
    m = re.search(r"it waited ([0-9.]+) ms to be read", body)
    assert m and float(m.group(1)) >= 300 and "deadline of 150 ms" in body, body


def test_torch_grpc_with_stubs_generated_from_the_proto(torch_cluster):
    f, tally = torch_cluster.fe, torch_cluster.tally
    pb, pb_grpc = grpc_stubs()
    with grpc.insecure_channel(f.grpc) as ch:
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        assert stub.ServerLive(pb.ServerLiveRequest(), timeout=10).live
        assert stub.ServerReady(pb.ServerReadyRequest(), timeout=10).ready
        assert stub.ModelReady(pb.ModelReadyRequest(name="linear"), timeout=10).ready
        mm = stub.ModelMetadata(pb.ModelMetadataRequest(name="two_inputs"), timeout=10)
        assert mm.platform == "symphony_cluster"
        assert [(t.name, t.datatype, list(t.shape)) for t in mm.inputs] == [
            ("input0", "FP32", [-1, 2]), ("input1", "INT64", [-1, 3])]
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelMetadata(pb.ModelMetadataRequest(name="nope"), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND

        grpc_infer_test_models(stub, pb, tally, pytest.approx, only_ok=False)


def test_torch_zz_counts_of_the_clients_equal_the_report_and_metrics(torch_cluster):
    """Last of the torch tests: /metrics and the report (after SIGINT) hold what the clients counted."""
    f, tally = torch_cluster.fe, torch_cluster.tally
    assert tally.total() > 10
    text = metric_lines(f)
    for model, counts in tally.by_model.items():
        for outcome, key in (("ok", "ok"), ("late", "late"), ("dropped", "dropped")):
            line = 'symphony_requests_total{model="%s",outcome="%s"} %d' % (model, outcome, counts[key])
            assert line in text, (line, text)
    assert "symphony_frontend_scheduler_connected 1" in text
    assert "symphony_frontend_backends 1" in text
    report = f.stop(signal.SIGINT)
    check_report_equals(report, tally, "fe")
    assert report["unknown_model"] == 0  # 404s for metadata do not count as requests
    assert report["client"]["in_flight_at_end"] == 0 and report["client"]["duplicate_outputs"] == 0
    # Every slot a request was decoded into came back, the bad inputs' too.
    assert report["client"]["reserved_at_end"] == 0, report["client"]
    # One late answer within its deadline (above); a missed stop of the
    # SIGSTOP test may add one each.
    assert 1 <= report["client"]["late_by_deadline"] <= 3, report["client"]
    assert report["models"]["linear"]["dropped_by_reason"] == {"infeasible": 1, "expired": 1}
    assert report["models"]["linear"]["errors_by_kind"]["invalid"] == len(BAD_LINEAR_INPUTS) + 1
    assert report["http"] == f.http and report["grpc"] == f.grpc


# ---- torch, from a model repository: no models in cluster.yaml ----------------------

REPOSITORY_CLUSTER_CONFIG = """
    gpus: 1
    policy: eager
    workload: {rate: 10}
    cluster: {token: "%s", heartbeat_ms: 50, heartbeat_timeout_ms: 500}
""" % TOKEN


# For loads of busy.pt (~0.2 s of CPU a batch, 17 or more runs): on a busy
# machine a backend loading it answered its pings late enough to be lost at
# 500 ms, and the load took longer than curl's default 30 s.
BUSY_LOAD_CONFIG = REPOSITORY_CLUSTER_CONFIG.replace("heartbeat_timeout_ms: 500", "heartbeat_timeout_ms: 2000")


class RepositoryCluster(Cluster):
    """A cluster whose roles read a model repository (--model-repository),
    cluster.yaml giving only its token and heartbeats: the scheduler, CPU
    backends and frontends read the repository; emulated backends (which
    open no file) read cluster.yaml's cluster: section alone."""

    def __init__(self, repo, config=REPOSITORY_CLUSTER_CONFIG):
        super().__init__(config)
        self.args = ["--model-repository", str(repo)]

    def start(self, mode=None, backends=(("cpu", "cpu"),), frontends=("fa",), scheduler_extra=()):
        """Starts the scheduler (with --model-control-mode `mode` when given),
        each backend (name, devices) registered, then the frontends; returns
        the frontends once ready."""
        control = ["--model-control-mode", mode] if mode else []
        self.start_scheduler(extra=self.args + control + list(scheduler_extra))
        for name, devices in backends:
            self.add_backend(name, devices)
        return self.add_frontends(frontends)

    def add_backend(self, name, devices="cpu", repo=None, extra=()):
        """Starts a backend on `devices` reading the repository (or `repo`), or,
        emulated, cluster.yaml's cluster: section alone (a repository cluster's
        has no models:); returns it once registered."""
        if devices.startswith("emulated"):
            return self.start_backend(name, devices, extra=extra)
        args = self.args if repo is None else ["--model-repository", str(repo)]
        return self.start_backend(name, devices, extra=args + list(extra))

    def add_frontends(self, names, repo=None):
        """Starts frontends reading the repository (or `repo`); returns them once ready."""
        args = self.args if repo is None else ["--model-repository", str(repo)]
        fronts = [self.start_frontend(n, extra=args) for n in names]
        for f in fronts:
            f.wait_ready()
        return fronts


@pytest.fixture()
def repository_cluster():
    """Makes RepositoryClusters, RepositoryCluster(repo, config), and stops
    every process they started at the end of the test."""
    made = []

    def make(repo, config=REPOSITORY_CLUSTER_CONFIG):
        made.append(RepositoryCluster(repo, config))
        return made[-1]

    yield make
    for c in made:
        c.stop_all()


LINEAR_PBTXT = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
parameters { key: "symphony.slo_ms" value { string_value: "3000" } }
"""

# linear.pt takes [k, 4] and gives [k, 3]: requests send [2, 2], answers are [3, 1].
RESHAPED_PBTXT = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2, 2 ] reshape { shape: [ 4 ] } } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3, 1 ] reshape { shape: [ 3 ] } } ]
parameters { key: "symphony.slo_ms" value { string_value: "3000" } }
"""

# No batch dimension: linear.pt takes the whole [3, 4] and gives [3, 3].
WHOLE_PBTXT = """
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 3, 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3, 3 ] } ]
parameters { key: "symphony.slo_ms" value { string_value: "3000" } }
"""

# Each request its own number of rows: [n, 4] -> [n, 3] (linear.pt on [b, n, 4]).
WILD_PBTXT = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1, 3 ] } ]
parameters { key: "symphony.slo_ms" value { string_value: "3000" } }
"""


# For GPUs only: a CPU backend does not load it, and the scheduler says so.
GPU_ONLY_PBTXT = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
instance_group [ { kind: KIND_GPU } ]
parameters { key: "symphony.slo_ms" value { string_value: "200" } }
"""


# Two versions, both served: 1 is sleepy.pt ([4] -> the same [4]), 2 is
# linear.pt ([4] -> [3]); the output's -1 lets each answer its own size.
VERSIONED_PBTXT = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
version_policy: { all { } }
parameters { key: "symphony.slo_ms" value { string_value: "3000" } }
"""


def rows(n, seed):
    return [[0.25 * (seed + r) - c for c in range(4)] for r in range(n)]


def linear_body(xs):
    """A REST request of linear's samples `xs` (rows of 4), as one tensor."""
    return {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [len(xs), 4], "data": sum(xs, [])}]}


def flat_expected(xs):
    return [v for x in xs for v in linear_expected(x)]


def test_torch_a_cluster_from_a_model_repository_alone(tmp_path, repository_cluster):
    """The scheduler, a CPU backend and a frontend all take --model-repository:
    models, SLO, profile, model file and tensor names come from the repository,
    none from cluster.yaml; the scheduler refuses to start without a profile,
    naming the command that makes one. Models with reshapes, without a batch
    dimension and with dims of -1 (requests of different sizes in one batch)
    are served as serve serves them."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    for name, pbtxt in (("linear", LINEAR_PBTXT), ("reshaped", RESHAPED_PBTXT), ("whole", WHOLE_PBTXT),
                        ("wild", WILD_PBTXT), ("only_gpu", GPU_ONLY_PBTXT)):
        (repo / name / "2").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(pbtxt)
        with open(os.path.join(MODELS, "linear.pt"), "rb") as src:
            (repo / name / "2" / "model.pt").write_bytes(src.read())
    (repo / "versioned" / "1").mkdir(parents=True)
    (repo / "versioned" / "2").mkdir(parents=True)
    (repo / "versioned" / "config.pbtxt").write_text(VERSIONED_PBTXT)
    for version, pt in (("1", "sleepy.pt"), ("2", "linear.pt")):
        with open(os.path.join(MODELS, pt), "rb") as src:
            (repo / "versioned" / version / "model.pt").write_bytes(src.read())
    c = repository_cluster(repo)
    p = Process([CLI, "scheduler", "--listen", "127.0.0.1:0", "--config", c.config] + c.args,
                os.path.join(c.dir, "noprofile.log"))
    assert p.proc.wait(timeout=30) == 2, p.output()
    assert "no latency profile" in p.output() and "symphony profile %s" % (
        repo / "linear" / "2" / "model.pt") in p.output(), p.output()
    # The profile `symphony profile` would write beside the model file (l(b) = 1 + 0.05 b ms).
    # A -1 is profiled at 1 (no model_warmup); a model without a batch dimension at its dims.
    for name, version, inputs, top in (
            ("linear", "2", "float32[4]", 8), ("reshaped", "2", "float32[2,2]", 8),
            ("whole", "2", "float32[3,4]", 1), ("wild", "2", "float32[1,4]", 8),
            ("only_gpu", "2", "float32[4]", 8), ("versioned", "1", "float32[4]", 8),
            ("versioned", "2", "float32[4]", 8)):
        points = "".join("  - [%d, %.2f, %.2f, %.2f]\n" % ((b,) + (1 + 0.05 * b,) * 3)
                         for b in range(1, top + 1))
        (repo / name / version / "model.cpu0.profile.yaml").write_text(
            'model: %s\ndevice: cpu:0\ninputs: ["%s"]\nmax_batch: %d\nalpha_ms: 0.05\n'
            "beta_ms: 1\nstopped_because: test\npoints:\n" % (name, inputs, top) + points)
    (f,) = c.start(frontends=("fe",))
    m = json.loads(curl(f.url + "/v2/models/linear")[2])
    assert m["inputs"] == [{"name": "INPUT__0", "datatype": "FP32", "shape": [-1, 4]}], m
    assert m["outputs"] == [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [-1, 3]}], m
    assert m["versions"] == ["2"], m  # the folder's version, served
    for i in range(5):
        x = [0.5 + i, -1.0, 2.0, 3.5 * i]
        status, hdrs, body = http_infer(
            f, "linear", {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": x}]})
        assert status == 200 and hdrs["symphony-outcome"] in ("ok", "late"), body
        (out,) = json.loads(body)["outputs"]
        assert out["name"] == "OUTPUT__0" and out["shape"] == [1, 3]
        assert out["data"] == pytest.approx(linear_expected(x), rel=1e-6)
    m = json.loads(curl(f.url + "/v2/models/reshaped")[2])
    assert m["inputs"][0]["shape"] == [-1, 2, 2] and m["outputs"][0]["shape"] == [-1, 3, 1], m
    xs = [[1.0, 2.0, 3.0, 4.0], [-2.0, 0.5, 8.0, 1.0]]
    status, hdrs, body = http_infer(f, "reshaped", {"inputs": [
        {"name": "INPUT__0", "datatype": "FP32", "shape": [2, 2, 2], "data": xs[0] + xs[1]}]})
    assert status == 200 and hdrs["symphony-outcome"] in ("ok", "late"), body
    (out,) = json.loads(body)["outputs"]
    assert out["shape"] == [2, 3, 1], out
    assert out["data"] == pytest.approx(linear_expected(xs[0]) + linear_expected(xs[1]), rel=1e-6)

    m = json.loads(curl(f.url + "/v2/models/whole")[2])
    assert m["inputs"][0]["shape"] == [3, 4] and m["outputs"][0]["shape"] == [3, 3], m
    assert json.loads(curl(f.url + "/v2/models/whole/config")[2])["max_batch_size"] == 0
    xs = rows(3, 1)
    status, hdrs, body = http_infer(f, "whole", {"inputs": [
        {"name": "INPUT__0", "datatype": "FP32", "shape": [3, 4], "data": sum(xs, [])}]})
    assert status == 200 and hdrs["symphony-outcome"] in ("ok", "late"), body
    (out,) = json.loads(body)["outputs"]
    assert out["shape"] == [3, 3] and out["data"] == pytest.approx(flat_expected(xs), rel=1e-6), out
    status, _, body = http_infer(f, "whole", {"inputs": [
        {"name": "INPUT__0", "datatype": "FP32", "shape": [1, 3, 4], "data": sum(xs, [])}]})
    assert status == 400 and b"expected shape [3,4]" in body, body

    m = json.loads(curl(f.url + "/v2/models/wild")[2])
    assert m["inputs"][0]["shape"] == [-1, -1, 4] and m["outputs"][0]["shape"] == [-1, -1, 3], m
    # Requests of 1 to 6 rows at once (batches of mixed sizes), one of them
    # without the batch dimension, one of two samples of 2 rows each.
    answers = {}

    def send(n):
        xs = rows(n, n)
        shape = [n, 4] if n == 5 else [1, n, 4]
        answers[n] = (xs, shape, http_infer(f, "wild", {"inputs": [
            {"name": "INPUT__0", "datatype": "FP32", "shape": shape, "data": sum(xs, [])}]}))

    threads = [threading.Thread(target=send, args=(n,)) for n in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(answers) == list(range(1, 7)), answers
    for n, (xs, shape, (status, hdrs, body)) in answers.items():
        assert status == 200 and hdrs["symphony-outcome"] in ("ok", "late"), (n, body)
        (out,) = json.loads(body)["outputs"]
        assert out["shape"] == shape[:-1] + [3], (n, out)
        assert out["data"] == pytest.approx(flat_expected(xs), rel=1e-6), n
    two = rows(2, 7) + rows(2, 9)
    status, hdrs, body = http_infer(f, "wild", {"inputs": [
        {"name": "INPUT__0", "datatype": "FP32", "shape": [2, 2, 4], "data": sum(two, [])}]})
    assert status == 200, body
    (out,) = json.loads(body)["outputs"]
    assert out["shape"] == [2, 2, 3] and out["data"] == pytest.approx(flat_expected(two), rel=1e-6), out
    # Every version the policy chose is served: no version runs the highest.
    m = json.loads(curl(f.url + "/v2/models/versioned")[2])
    assert m["versions"] == ["1", "2"], m
    x = [0.5, -1.0, 2.0, 3.5]
    one = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": x}]}
    for path, version, want in (("versioned", "2", linear_expected(x)),
                                ("versioned/versions/2", "2", linear_expected(x)),
                                ("versioned/versions/1", "1", x)):
        status, hdrs, body = http_infer(f, path, one)
        assert status == 200 and hdrs["symphony-outcome"] in ("ok", "late"), (path, body)
        reply = json.loads(body)
        (out,) = reply["outputs"]
        assert out["shape"] == [1, len(want)] and out["data"] == pytest.approx(want, rel=1e-6), (path, out)
        assert reply["model_name"] == "versioned" and reply["model_version"] == version, reply
    status, _, body = http_infer(f, "versioned/versions/3", one)
    assert status == 404 and b"no version" in body, body
    assert "model 'only_gpu': no registered device is of its instance_group" in c.scheduler.output()
    status, hdrs, body = http_infer(f, "only_gpu", {"inputs": [
        {"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]})
    assert status == 504 and hdrs["symphony-drop-reason"] == "expired", body
    report = f.stop(signal.SIGINT)
    assert report["models"]["linear"]["sent"] == 5 and report["models"]["linear"]["errors"] == 0, report
    for name in ("reshaped", "wild"):
        assert report["models"][name]["errors"] == 0, report
    assert report["models"]["whole"]["errors_by_kind"]["invalid"] == 1, report  # the [1, 3, 4]
    assert report["models"]["wild"]["sent"] == 7, report


# A model that must answer within 300 ms (above the ~100 ms a backend's first
# read from a new frontend may take, docs/cluster.md#limitations), and a
# profile that says a batch of 8 takes 1.4 ms.
COLD_PBTXT = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
parameters { key: "symphony.slo_ms" value { string_value: "%d" } }
"""


def test_torch_a_cold_cluster_answers_its_first_request_within_target(tmp_path, repository_cluster):
    """A fresh scheduler, CPU backend and frontend from a model repository:
    the backend warms the model at every size of its profile before it
    registers, so the very first request, of 8 samples (a batch of 8, a size
    nothing ran before the warm-up), is answered ok, within its target."""
    need_test_model("linear.pt")
    slo_ms = 300
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % slo_ms)
    c = repository_cluster(repo)
    (f,) = c.start(frontends=("fe",))
    xs = rows(8, 3)
    start = time.monotonic()
    status, hdrs, body = http_infer(f, "linear", {"inputs": [
        {"name": "INPUT__0", "datatype": "FP32", "shape": [8, 4], "data": sum(xs, [])}]})
    took_ms = (time.monotonic() - start) * 1e3
    print("first request: %d %s in %.1f ms" % (status, hdrs.get("symphony-outcome"), took_ms))
    assert status == 200 and hdrs["symphony-outcome"] == "ok", (status, hdrs, body, took_ms,
                                                                c.backends["cpu"].output())
    (out,) = json.loads(body)["outputs"]
    assert out["data"] == pytest.approx(flat_expected(xs), rel=1e-6)
    assert "warmed up model 'linear'" in c.backends["cpu"].output(), c.backends["cpu"].output()


def test_torch_backends_follow_a_repository_models_executor_and_graphs(tmp_path, repository_cluster):
    """A backend loads a repository model as serve does: TorchScript's simple
    executor on a CPU unless ENABLE_JIT_PROFILING (or ENABLE_JIT_EXECUTOR)
    asks for the profiling one, and optimization.cuda.graphs on a CPU says
    that there is no CUDA GPU to capture on; both models answer."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    write_torch_model(repo, "profiled", COLD_PBTXT % 3000 + """
parameters { key: "ENABLE_JIT_PROFILING" value { string_value: "true" } }
optimization { cuda { graphs: true } }
""")
    c = repository_cluster(repo)
    (f,) = c.start()
    out = c.backends["cpu"].output()
    assert re.search(r"warmed up model 'linear' .*TorchScript's simple executor\)", out), out
    assert re.search(r"warmed up model 'profiled' .*TorchScript's profiling executor\)", out), out
    assert "model 'profiled': CUDA graphs: on, but it runs on no CUDA GPU: ordinary launches" in out, out
    assert "model 'linear': CUDA graphs" not in out, out
    xs = rows(2, 5)
    for model in ("linear", "profiled"):
        status, hdrs, body = http_infer(f, model, linear_body(xs))
        assert status == 200 and hdrs["symphony-outcome"] == "ok", (model, status, hdrs, body)
        (o,) = json.loads(body)["outputs"]
        assert o["data"] == pytest.approx(flat_expected(xs), rel=1e-6)


def write_torch_model(repo, name, pbtxt, model_bytes=None, top=8):
    """A repository model of linear.pt (or `model_bytes`), version 1, with the
    profile `symphony profile` would write beside it (l(b) = 1 + 0.05 b ms)."""
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(pbtxt)
    if model_bytes is None:
        with open(os.path.join(MODELS, "linear.pt"), "rb") as src:
            model_bytes = src.read()
    (repo / name / "1" / "model.pt").write_bytes(model_bytes)
    points = "".join("  - [%d, %.2f, %.2f, %.2f]\n" % ((b,) + (1 + 0.05 * b,) * 3) for b in range(1, top + 1))
    (repo / name / "1" / "model.cpu0.profile.yaml").write_text(
        'model: %s\ndevice: cpu:0\ninputs: ["float32[4]"]\nmax_batch: %d\nalpha_ms: 0.05\n'
        "beta_ms: 1\nstopped_because: test\npoints:\n" % (name, top) + points)


class InferLoop:
    """Requests of one model, one after the other, on every frontend in turn,
    until stopped: each answer's status."""

    def __init__(self, fronts, model, body):
        self.fronts, self.model, self.body = fronts, model, body
        self.statuses = []
        self.bad = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        i = 0
        while not self.done.is_set():
            f = self.fronts[i % len(self.fronts)]
            status, _, out = http_infer(f, self.model, self.body)
            self.statuses.append(status)
            if status != 200:
                self.bad.append((f.name, status, out))
            i += 1

    def stop(self):
        self.done.set()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self.statuses


def test_torch_a_model_added_to_the_repository_loads_while_the_cluster_serves(tmp_path, repository_cluster):
    """--model-control-mode explicit with a CPU backend: a model folder added
    to the repository after start loads (REST on one frontend): the backend
    loads and warms it up, and once it answers the load is 200, both
    frontends list it READY and answer its requests 200 with torch's outputs
    (its metadata from their own read of the folder). Failed loads leave the
    served models as they were and name the cause in the error and in both
    indexes: a corrupt model file (the backend's error), a folder without a
    model file (the scheduler's read), a model no backend may run (its
    instance_group). A client loop on another model meanwhile gets 200 for
    every request."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo)
    loop = None
    try:
        fa, fb = c.start("explicit", frontends=("fa", "fb"))
        xs = rows(2, 5)
        body = linear_body(xs)
        for f in (fa, fb):
            assert http_infer(f, "linear", body)[0] == 200
        loop = InferLoop([fa, fb], "linear", body)
        wait_until(lambda: len(loop.statuses) >= 10, "the client loop's first answers", timeout=30)

        # A new folder, not read by any role at start: listed, not loaded (not unknown).
        assert curl(fa.url + "/v2/models/fresh/ready")[0] == 404
        write_torch_model(repo, "fresh", COLD_PBTXT % 3000)
        (e,) = [x for x in repository_index(fb) if x[0] == "fresh"]
        assert e[1:3] == ("", "UNAVAILABLE") and "not loaded" in e[3], e
        status, _, out = curl(fa.url + "/v2/models/fresh/ready")
        assert status == 400 and "not loaded" in json.loads(out)["error"], out
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/fresh/load")
        assert status == 200, (out, c.scheduler.output())
        assert ("fresh", "1", "READY", "") in repository_index(fa)
        status, _, out = http_infer(fa, "fresh", body)
        assert status == 200, out
        (got,) = json.loads(out)["outputs"]
        assert got["name"] == "OUTPUT__0" and got["shape"] == [2, 3]
        assert got["data"] == pytest.approx(flat_expected(xs), rel=1e-6)
        wait_until(lambda: ("fresh", "1", "READY", "") in repository_index(fb), "fb to list 'fresh' READY",
                   timeout=10)
        assert curl(fb.url + "/v2/models/fresh/ready")[0] == 200
        meta = json.loads(curl(fb.url + "/v2/models/fresh")[2])
        assert meta["inputs"] == [{"name": "INPUT__0", "datatype": "FP32", "shape": [-1, 4]}], meta
        status, _, out = curl(fb.url + "/v2/models/fresh/config")
        assert status == 200 and json.loads(out)["max_batch_size"] == 8, out
        assert http_infer(fb, "fresh", body)[0] == 200
        assert "warmed up model 'fresh'" in c.backends["cpu"].output(), c.backends["cpu"].output()
        assert "loaded model 'fresh' on " in c.scheduler.output(), c.scheduler.output()
        pb, pbg = grpc_stubs()
        with grpc.insecure_channel(fb.grpc) as ch:
            stub = pbg.GRPCInferenceServiceStub(ch)
            stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="fresh"), timeout=60)  # served: ok
            assert stub.ModelReady(pb.ModelReadyRequest(name="fresh"), timeout=10).ready is True

            # A corrupt model file: the backend cannot load it; the load fails naming it.
            write_torch_model(repo, "broken", COLD_PBTXT % 3000, model_bytes=b"not a TorchScript archive")
            with pytest.raises(grpc.RpcError) as e:
                stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="broken"), timeout=60)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
            assert "could not load it" in e.value.details() and "'cpu'" in e.value.details(), e.value.details()
            assert stub.ModelReady(pb.ModelReadyRequest(name="broken"), timeout=10).ready is False
        for f in (fa, fb):
            wait_until(lambda: any(x[0] == "broken" and x[2] == "UNAVAILABLE" and "a load failed" in x[3]
                                   for x in repository_index(f)), "%s to list 'broken' failed" % f.name,
                       timeout=10)
            (e,) = [x for x in repository_index(f) if x[0] == "broken"]
            assert "could not load it" in e[3] and "'cpu'" in e[3], e
            status, _, out = http_infer(f, "broken", body)
            assert status == 503 and "not loaded" in json.loads(out)["error"], out
            assert http_infer(f, "fresh", body)[0] == 200

        # No model file: the scheduler's read of the folder fails.
        (repo / "nofile" / "1").mkdir(parents=True)
        (repo / "nofile" / "config.pbtxt").write_text(COLD_PBTXT % 3000)
        status, _, out = curl("-X", "POST", fb.url + "/v2/repository/models/nofile/load")
        assert status == 400 and "nofile" in json.loads(out)["error"], out
        for f in (fa, fb):
            wait_until(lambda: any(x[0] == "nofile" and x[2] == "UNAVAILABLE" and "a load failed" in x[3]
                                   for x in repository_index(f)), "%s to list 'nofile' failed" % f.name,
                       timeout=10)
        # No backend may run it: its instance_group wants a GPU, the backend has a CPU.
        write_torch_model(repo, "gpu_only", GPU_ONLY_PBTXT)
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/gpu_only/load")
        assert status == 503 and "no registered backend has a device of its instance_group" in \
            json.loads(out)["error"], out
        (e,) = [x for x in repository_index(fa) if x[0] == "gpu_only"]
        assert e[2] == "UNAVAILABLE" and "instance_group" in e[3], e
        # A name the repository does not hold.
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/nope/load")
        assert status in (400, 404) and "no folder 'nope'" in json.loads(out)["error"], out

        bad = loop.bad
        statuses = loop.stop()
        loop = None
        print("client loop on 'linear' during the loads: %d answers, statuses %s" % (len(statuses), set(statuses)))
        print("index:", repository_index(fa))
        assert len(statuses) >= 20 and set(statuses) == {200}, (len(statuses), set(statuses), bad[:3])
        for f in (fa, fb):
            assert ("linear", "1", "READY", "") in repository_index(f)
            assert ("fresh", "1", "READY", "") in repository_index(f)
    finally:
        if loop:
            loop.stop()


def write_profile(repo, name, version, top=8):
    points = "".join("  - [%d, %.2f, %.2f, %.2f]\n" % ((b,) + (1 + 0.05 * b,) * 3) for b in range(1, top + 1))
    (repo / name / version / "model.cpu0.profile.yaml").write_text(
        'model: %s\ndevice: cpu:0\ninputs: ["float32[4]"]\nmax_batch: %d\nalpha_ms: 0.05\n'
        "beta_ms: 1\nstopped_because: test\npoints:\n" % (name, top) + points)


def test_torch_a_reload_switches_to_the_new_version_without_a_gap(tmp_path, repository_cluster):
    """--model-control-mode explicit: a load of a served model whose folder
    has a new version (another TorchScript file, made here by torch) loads it
    beside the served one and switches over once the backend has warmed it
    up: a client loop through both frontends gets 200 for every request, each
    answer is the old model's or the new one's, and after the switch the new
    one's; both frontends list version 2 READY and its metadata. A load with
    nothing changed does nothing; a reload whose new file is corrupt fails
    naming it, and the served version answers on; both indexes name the
    cause (the new version UNAVAILABLE; a served version whose own file broke
    READY with it) until a reload succeeds."""
    need_test_model("linear.pt")
    import torch
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    v2 = torch.nn.Linear(4, 3)
    with torch.no_grad():
        v2.weight.fill_(0.5)
        v2.bias.fill_(-1.0)
    scripted = torch.jit.script(v2.eval())
    xs = rows(2, 5)
    old = flat_expected(xs)
    new = scripted(torch.tensor(xs, dtype=torch.float32)).flatten().tolist()
    assert old != pytest.approx(new, rel=1e-3)
    c = repository_cluster(repo)
    answers = []  # (frontend, status, outputs or error)
    done = threading.Event()
    body = linear_body(xs)

    def loop(fronts):
        i = 0
        while not done.is_set():
            f = fronts[i % len(fronts)]
            status, _, out = http_infer(f, "linear", body)
            answers.append((f.name, status, json.loads(out)["outputs"][0]["data"] if status == 200 else out))
            i += 1

    thread = None
    try:
        fa, fb = c.start("explicit", frontends=("fa", "fb"))
        for f in (fa, fb):
            assert http_infer(f, "linear", body)[0] == 200
        thread = threading.Thread(target=loop, args=([fa, fb],))
        thread.start()
        wait_until(lambda: len(answers) >= 10, "the client loop's first answers", timeout=30)
        # Nothing changed: nothing to do.
        assert curl("-X", "POST", fa.url + "/v2/repository/models/linear/load")[0] == 200
        assert "again" not in c.scheduler.output()
        # A new version folder with another model file.
        (repo / "linear" / "2").mkdir()
        scripted.save(str(repo / "linear" / "2" / "model.pt"))
        write_profile(repo, "linear", "2")
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/linear/load")
        assert status == 200, (out, c.scheduler.output())
        switched_at = len(answers)
        assert ("linear", "2", "READY", "") in repository_index(fa), repository_index(fa)
        status, _, out = http_infer(fa, "linear", body)
        assert status == 200 and json.loads(out)["outputs"][0]["data"] == pytest.approx(new, rel=1e-5), out
        wait_until(lambda: ("linear", "2", "READY", "") in repository_index(fb), "fb to list version 2",
                   timeout=10)
        status, _, out = http_infer(fb, "linear", body)
        assert status == 200 and json.loads(out)["outputs"][0]["data"] == pytest.approx(new, rel=1e-5), out
        assert json.loads(curl(fb.url + "/v2/models/linear")[2])["versions"] == ["2"]
        assert curl(fb.url + "/v2/models/linear/versions/2/ready")[0] == 200
        wait_until(lambda: len(answers) >= switched_at + 20, "answers after the switch", timeout=30)
        # A corrupt new file: the reload fails naming it; version 2 serves on.
        (repo / "linear" / "3").mkdir()
        (repo / "linear" / "3" / "model.pt").write_bytes(b"not a TorchScript archive")
        write_profile(repo, "linear", "3")
        status, _, out = curl("-X", "POST", fb.url + "/v2/repository/models/linear/load")
        assert status == 400 and "could not load it" in json.loads(out)["error"] and \
            "serves on as it was" in json.loads(out)["error"], out
        # Every frontend's index names the cause, as serve's does: version 3
        # UNAVAILABLE with the backend's error, version 2 READY as it was.
        for f in (fa, fb):
            wait_until(lambda: any(x[:3] == ("linear", "3", "UNAVAILABLE") for x in repository_index(f)),
                       "%s to list the failed version 3" % f.name, timeout=10)
            index = repository_index(f)
            assert ("linear", "2", "READY", "") in index, index
            (e,) = [x for x in index if x[:2] == ("linear", "3")]
            assert "could not load it" in e[3] and "'cpu'" in e[3], e
            assert "model 'linear' version 3" in e[3] and "#reload" not in e[3], e  # as the repository names it
        wait_until(lambda: len(answers) >= switched_at + 30, "answers after the failed reload", timeout=30)
        # Version 2's own file changed, and corrupt (version 3 gone): the
        # reload fails; version 2 serves on, READY with the cause.
        shutil.rmtree(repo / "linear" / "3")
        good = (repo / "linear" / "2" / "model.pt").read_bytes()
        (repo / "linear" / "2" / "model.pt").write_bytes(b"not a TorchScript archive either")
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/linear/load")
        assert status == 400 and "serves on as it was" in json.loads(out)["error"], out
        for f in (fa, fb):
            wait_until(lambda: any(x[:3] == ("linear", "2", "READY") and
                                   "the reload failed (the previous files serve on)" in x[3] and
                                   "could not load it" in x[3] for x in repository_index(f)),
                       "%s to list version 2 READY with the failed reload's cause" % f.name, timeout=10)
            assert [x for x in repository_index(f) if x[0] == "linear"] == \
                [x for x in repository_index(f) if x[:2] == ("linear", "2")], repository_index(f)
        # Fixed: the reload succeeds and the cause is gone from every index.
        (repo / "linear" / "2" / "model.pt").write_bytes(good)
        status, _, out = curl("-X", "POST", fb.url + "/v2/repository/models/linear/load")
        assert status == 200, out
        for f in (fa, fb):
            wait_until(lambda: ("linear", "2", "READY", "") in repository_index(f),
                       "%s to list version 2 READY without a reason" % f.name, timeout=10)
        reloaded_at = len(answers)
        wait_until(lambda: len(answers) >= reloaded_at + 10, "answers after the last reload", timeout=30)
        done.set()
        thread.join(timeout=60)
        statuses = set(a[1] for a in answers)
        print("client loop during the reloads: %d answers, statuses %s, %d before the switch" %
              (len(answers), statuses, switched_at))
        assert statuses == {200}, [a for a in answers if a[1] != 200][:3]
        for f, _, data in answers:
            assert data == pytest.approx(old, rel=1e-5) or data == pytest.approx(new, rel=1e-5), (f, data)
        for f, _, data in answers[switched_at + 4:]:  # the other frontend may take a moment to switch
            assert data == pytest.approx(new, rel=1e-5), (f, data)
        c.scheduler.wait_for("the replaced version's drain", lambda: "its id is free" in c.scheduler.output(),
                             timeout=20)
        assert "switched model 'linear' to its new files" in c.scheduler.output(), c.scheduler.output()
        # The backend freed the replaced versions once they drained: the
        # start's (version 1) and the first reload's (version 2's first files).
        c.backends["cpu"].wait_for("the replaced versions freed",
                                   lambda: "freed model 'linear'" in c.backends["cpu"].output() and
                                   "freed model 'linear#reload" in c.backends["cpu"].output(), timeout=20)
    finally:
        done.set()
        if thread:
            thread.join(timeout=60)


def backend_models(metrics_url):
    """The models a backend's devices hold (symphony_backend_model on its /metrics)."""
    status, body = http_get(metrics_url)
    assert status == 200, body
    return set(re.findall(r'symphony_backend_model\{[^}]*model="([^"]+)"[^}]*\} 1', body.decode()))


def test_torch_an_unloaded_model_is_freed_on_its_backends_and_loads_again(tmp_path, repository_cluster):
    """--model-control-mode explicit with two CPU backends: once an unload
    has drained, the backends that hold the model free it (their /metrics no
    longer list it, their log says so), for a model loaded while serving and
    for one of the start alike; a later load of the same name reads the
    folder again, the backends load it anew and it answers 200 with torch's
    outputs. A load that fails on one backend (its own copy of the file is
    corrupt) leaves nothing on the other, which frees what it loaded or, its
    next lease refused, stops loading it."""
    need_test_model("linear.pt")
    repo, bad_repo = tmp_path / "models", tmp_path / "models_b2"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo)
    c.start("explicit", backends=(), frontends=())
    metrics = {}
    for name in ("b1", "b2"):
        copy = repo if name == "b1" else bad_repo
        if name == "b2":
            shutil.copytree(repo, bad_repo)
        b = c.add_backend(name, repo=copy, extra=["--metrics", "127.0.0.1:0"])
        b.wait_for("its metrics address", lambda: "metrics: listening on" in b.output(), timeout=10)
        metrics[name] = re.search(r"metrics: listening on (http://\S+/metrics)", b.output()).group(1)
    (f,) = c.add_frontends(["fa"])
    xs = rows(2, 5)
    body = linear_body(xs)

    def load(model):
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/%s/load" % model)
        assert status == 200, (model, out, c.scheduler.output())

    def unload_and_freed(model):
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/%s/unload" % model)
        assert status == 200, (model, out)
        for name, url in metrics.items():
            wait_until(lambda: model not in backend_models(url), "%s to free '%s':\n%s" %
                       (name, model, c.backends[name].output()), timeout=10)
            assert "freed model '%s'" % model in c.backends[name].output(), c.backends[name].output()

    def answers(model):
        status, _, out = http_infer(f, model, body)
        assert status == 200, (model, out)
        assert json.loads(out)["outputs"][0]["data"] == pytest.approx(flat_expected(xs), rel=1e-6)

    for model in ("fresh", "linear"):  # loaded while serving; of the start
        if model == "fresh":
            for r in (repo, bad_repo):
                write_torch_model(r, "fresh", COLD_PBTXT % 3000)
            load("fresh")
        answers(model)
        for url in metrics.values():
            assert model in backend_models(url)
        unload_and_freed(model)
        status, _, out = http_infer(f, model, body)
        assert status == 503 and "not loaded" in json.loads(out)["error"], out
        load(model)  # the same name again: read and loaded anew
        for url in metrics.values():
            assert model in backend_models(url)
        answers(model)
        assert ("%s" % model, "1", "READY", "") in repository_index(f)

    # b2's own copy of the file is corrupt: the load fails; b1 frees what it loaded, or gives its load
    # up when a lease for it is refused (the load has failed).
    write_torch_model(repo, "half", COLD_PBTXT % 3000)
    write_torch_model(bad_repo, "half", COLD_PBTXT % 3000, model_bytes=b"not a TorchScript archive")
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/half/load")
    assert status == 400 and "'b2'" in json.loads(out)["error"], out
    c.backends["b1"].wait_for("b1 to free 'half' or give it up",
                              lambda: "freed model 'half'" in c.backends["b1"].output() or
                              re.search(r"could not load model 'half': .*the load of model 'half' it runs for has "
                                        r"already failed", c.backends["b1"].output()),
                              timeout=30)
    wait_until(lambda: "half" not in backend_models(metrics["b1"]), "b1's metrics to drop 'half'", timeout=10)
    assert "half" not in backend_models(metrics["b2"])
    answers("fresh")
    answers("linear")
    for name in metrics:
        assert c.backends[name].stop(signal.SIGTERM, timeout=30) == 0, c.backends[name].output()
        assert read_json(os.path.join(c.dir, name + ".json"))["models_freed"] >= 2


BUSY_PBTXT = """
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
parameters { key: "symphony.slo_ms" value { string_value: "3000" } }
"""


def test_torch_a_loads_runs_hold_their_device_in_gaps_of_its_schedule(tmp_path, repository_cluster):
    """A model loaded while the cluster serves warms up in gaps of its
    device's schedule, as serve's loads do: each of its runs (the load check
    and a batch of every size twice, ~0.2 s each with busy.pt) waits until
    the scheduler holds the device for it, with no batch there, and the
    scheduler sends the device no batch until the run has ended. Two client
    loops keep the served model busy throughout: every answer is 200, the
    backend counts every run of the load as leased (17 or more) and no
    batch that reached the device during one, and the scheduler granted as
    many leases, their runs taking as long in all as the backend says."""
    need_test_model("busy.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo, BUSY_LOAD_CONFIG)
    loops = []
    try:
        (f,) = c.start("explicit")
        xs = rows(2, 5)
        body = linear_body(xs)
        assert http_infer(f, "linear", body)[0] == 200
        loops = [InferLoop([f], "linear", body) for _ in range(2)]
        wait_until(lambda: sum(len(x.statuses) for x in loops) >= 20, "the client loops' first answers", timeout=30)
        with open(os.path.join(MODELS, "busy.pt"), "rb") as src:
            write_torch_model(repo, "slowload", BUSY_PBTXT, model_bytes=src.read())
        before = sum(len(x.statuses) for x in loops)
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/slowload/load", timeout=120)
        assert status == 200, (out, c.backends["cpu"].output())
        during = sum(len(x.statuses) for x in loops) - before
        statuses = [s for x in loops for s in x.stop()]
        bad = [b for x in loops for b in x.bad]
        loops = []
        print("client loops: %d answers, %d during the load" % (len(statuses), during))
        print([l for l in c.backends["cpu"].output().splitlines() if "slowload" in l][-1])
        assert set(statuses) == {200}, bad[:3]
        assert during >= 5, during  # served between the load's runs
        held = re.search(r"loaded and warmed up model 'slowload' in \d+ ms; (\d+) of its runs held their device "
                         r"in gaps of its schedule \(.*; they ran ([\d.]+) s", c.backends["cpu"].output())
        assert held, c.backends["cpu"].output()
        runs, ran_ms = int(held.group(1)), round(float(held.group(2)) * 1000)
        assert runs >= 11, runs  # its load check (3), and batches 1 to 8 once (the simple executor)
        assert c.backends["cpu"].stop(signal.SIGTERM, timeout=30) == 0
        b = c.report("cpu")
        assert b["leased_runs"] == runs and b["batches_during_lease"] == 0, b
        c.scheduler.stop(signal.SIGTERM, timeout=30)
        leases = c.report("scheduler")["leases"]
        assert leases["granted"] == runs and leases["refused"] == 0, leases
        # The backends' LeaseEnd measures, summed: the same runs as the backend's log. The log
        # truncates to the millisecond and the node's measure brackets the model's own (a clock
        # read more per run), so the sum is at least the log's and less than 1.5 ms above it.
        assert ran_ms > 0 and ran_ms <= leases["ran_ms"] < ran_ms + 1.5, (leases, ran_ms)
    finally:
        for x in loops:
            x.stop()

def test_torch_a_loaded_models_max_batch_fits_what_the_served_models_can_wait(tmp_path, repository_cluster):
    """As on serve, a model loaded while others serve batches no more than
    what its first run at that size (three times its profiled time) leaves
    the served models able to wait: half the least slack (SLO less a batch
    of one). Beside linear with a 25 ms SLO (12 ms), a model profiled at
    1 + 2 b ms is capped from 8 to batch 1 (3 ms); the scheduler says so,
    the backend warms up batch 1 only (its load check and one run, all
    leased; 11 uncapped), and a request of 4 samples still answers 200."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 25)
    c = repository_cluster(repo)
    (f,) = c.start("explicit")
    write_torch_model(repo, "wide", COLD_PBTXT % 3000)
    points = "".join("  - [%d, %.1f, %.1f, %.1f]\n" % ((b,) + (1 + 2 * b,) * 3) for b in range(1, 9))
    (repo / "wide" / "1" / "model.cpu0.profile.yaml").write_text(
        'model: wide\ndevice: cpu:0\ninputs: ["float32[4]"]\nmax_batch: 8\nalpha_ms: 2\nbeta_ms: 1\n'
        "stopped_because: test\npoints:\n" + points)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/wide/load")
    assert status == 200, (out, c.scheduler.output())
    assert "model 'wide': max batch 1, not 8" in c.scheduler.output() and "model 'linear' can wait" in \
        c.scheduler.output(), c.scheduler.output()
    held = re.search(r"loaded and warmed up model 'wide' in \d+ ms; (\d+) of its runs held their device",
                     c.backends["cpu"].output())
    assert held, c.backends["cpu"].output()
    # Its load check and batch 1 once; at 8 it would be the check and 8 more.
    assert int(held.group(1)) <= 5, held.group(0)
    xs = rows(4, 2)
    body = linear_body(xs)
    status, _, out = http_infer(f, "wide", body)
    assert status == 200, out
    assert json.loads(out)["outputs"][0]["data"] == pytest.approx(flat_expected(xs), rel=1e-6)

def test_torch_a_load_whose_batch_of_one_outlasts_what_the_served_can_wait_fails(tmp_path, repository_cluster):
    """As on serve, a model whose batch of one already runs longer than the
    served models can wait (half of the least SLO less its batch of one)
    would make their requests late with each of its runs, so its load
    fails: busy.pt, its profile saying 2 s a batch, beside linear with a 1 s
    SLO (0.5 s) is refused by the scheduler from its profile before any run
    (no backend is asked to load it), the answer and both frontends' index
    name both models and the remedy, and a client loop on linear gets 200
    for every request throughout."""
    need_test_model("busy.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 1000)
    c = repository_cluster(repo, BUSY_LOAD_CONFIG)
    loop = None
    try:
        fa, fb = c.start("explicit", frontends=("fa", "fb"))
        xs = rows(2, 5)
        body = linear_body(xs)
        assert http_infer(fa, "linear", body)[0] == 200
        loop = InferLoop([fa, fb], "linear", body)
        with open(os.path.join(MODELS, "busy.pt"), "rb") as src:
            write_torch_model(repo, "slowload", BUSY_PBTXT, model_bytes=src.read())
        points = "".join("  - [%d, 2000.0, 2000.0, 2000.0]\n" % b for b in range(1, 9))
        (repo / "slowload" / "1" / "model.cpu0.profile.yaml").write_text(
            'model: slowload\ndevice: cpu:0\ninputs: ["float32[4]"]\nmax_batch: 8\nalpha_ms: 0\n'
            "beta_ms: 2000\nstopped_because: test\npoints:\n" + points)
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/slowload/load", timeout=120)
        why = json.loads(out)["error"]
        assert status == 400, (status, out)
        for part in ("model 'slowload' cannot be loaded beside the models the cluster serves: its batch of one "
                     "runs about 2000 ms (by its profile ", "longer than model 'linear' can wait (",
                     "give it devices of its own (instance_group)"):
            assert part in why, (part, why)
        for f in (fa, fb):
            wait_until(lambda: any(x[0] == "slowload" and x[2] == "UNAVAILABLE" and "cannot be loaded beside" in x[3]
                                   for x in repository_index(f)), "%s to list why 'slowload' failed" % f.name,
                       timeout=10)
            status, _, out = http_infer(f, "slowload", body)
            assert status == 503 and "not loaded" in json.loads(out)["error"], out
        wait_until(lambda: len(loop.statuses) >= 10, "the client loop's answers", timeout=30)
        statuses = loop.stop()
        bad = loop.bad
        loop = None
        assert set(statuses) == {200}, bad[:3]
        assert "slowload" not in c.backends["cpu"].output(), c.backends["cpu"].output()  # never asked: no run
    finally:
        if loop:
            loop.stop()


def test_torch_a_load_whose_runs_show_a_batch_of_one_too_long_fails_after_its_second(tmp_path, repository_cluster):
    """A profile can understate a model: busy.pt with the profile of linear
    (1.05 ms a batch of one) fits beside linear with a 25 ms SLO (12 ms to
    wait) by its profile, but its batch of one takes ~0.2 s. A model's first
    run says nothing of its batch of one (TorchScript optimizes the graph in
    it), so the backend, which the scheduler told what linear can wait,
    refuses the load after its second run, in serve's words: the load fails
    (400, naming the batch of one, the served model and the remedy; both
    frontends' index gives it), the backend counts two leased runs and the
    scheduler granted two; linear answers 200 after it."""
    need_test_model("busy.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 25)
    c = repository_cluster(repo, BUSY_LOAD_CONFIG)
    fa, fb = c.start("explicit", frontends=("fa", "fb"))
    xs = rows(2, 5)
    body = linear_body(xs)
    wait_until(lambda: http_infer(fa, "linear", body)[0] == 200, "linear to answer", timeout=30)
    with open(os.path.join(MODELS, "busy.pt"), "rb") as src:
        write_torch_model(repo, "slowload", BUSY_PBTXT, model_bytes=src.read())  # linear's profile
    status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/slowload/load", timeout=120)
    why = json.loads(out)["error"]
    assert status == 400, (status, out)
    refused = re.search(r"could not load it: model 'slowload'.*: cannot be loaded beside the models the cluster "
                        r"serves: its batch of one runs about ([\d.]+) ms \(by its runs on \S+ while loading, the "
                        r"first not counted\), longer than model 'linear' can wait \(([\d.]+) ms: half of its SLO "
                        r"less its own batch of one\), so each of its runs would make that model's requests late; "
                        r"give it devices of its own \(instance_group\)", why)
    assert refused, why
    print("busy's batch of one: %s ms, linear can wait %s ms" % refused.groups())
    assert float(refused.group(2)) == pytest.approx((25 - 1.05) / 2)
    for f in (fa, fb):
        wait_until(lambda: any(x[0] == "slowload" and x[2] == "UNAVAILABLE" and "cannot be loaded beside" in x[3]
                               for x in repository_index(f)), "%s to list why 'slowload' failed" % f.name,
                   timeout=10)
    backend = c.backends["cpu"]
    backend.wait_for("it to give the load up", lambda: "could not load model 'slowload'" in backend.output(),
                     timeout=30)
    print([l for l in backend.output().splitlines() if "could not load model 'slowload'" in l][-1])
    wait_until(lambda: http_infer(fb, "linear", body)[0] == 200, "linear to answer after it", timeout=30)
    assert backend.stop(signal.SIGTERM, timeout=30) == 0
    assert c.report("cpu")["leased_runs"] == 2, c.report("cpu")
    c.scheduler.stop(signal.SIGTERM, timeout=30)
    leases = c.report("scheduler")["leases"]
    assert leases["granted"] == 2 and leases["refused"] == 0, leases


def test_torch_a_load_whose_first_run_is_slow_but_its_batch_of_one_fits_is_served(tmp_path, repository_cluster):
    """A model's first run is no measure of its batch of one: under
    TorchScript's profiling executor the graph is optimized in it (sleepy.pt:
    57 ms on serve, its batch of one ~1.2 ms after; the backends' simple
    executor, a CPU's default, makes it a few ms). Beside linear with a 20 ms
    SLO (9.475 ms to wait) it loads (200; the backend logs its first and
    fastest leased runs) and answers 200, and so does linear."""
    need_test_model("sleepy.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 20)
    c = repository_cluster(repo)
    (f,) = c.start("explicit")
    xs = rows(2, 5)
    body = linear_body(xs)
    wait_until(lambda: http_infer(f, "linear", body)[0] == 200, "linear to answer", timeout=30)
    with open(os.path.join(MODELS, "sleepy.pt"), "rb") as src:
        write_torch_model(repo, "sleepy", BUSY_PBTXT, model_bytes=src.read())  # linear's profile
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/sleepy/load")
    backend = c.backends["cpu"]
    assert status == 200, (status, out, backend.output())
    held = re.search(r"loaded and warmed up model 'sleepy' in \d+ ms; (\d+) of its runs held their device .*"
                     r"the first ([\d.]+) ms, the fastest ([\d.]+) ms[;)]", backend.output())
    assert held, backend.output()
    print("sleepy's load: %s leased runs, the first %s ms, the fastest %s ms; linear can wait %.3f ms" %
          (held.group(1), held.group(2), held.group(3), (20 - 1.05) / 2))
    status, _, out = http_infer(f, "sleepy", body)
    assert status == 200, out
    assert json.loads(out)["outputs"][0]["shape"] == [2, 4], out
    wait_until(lambda: http_infer(f, "linear", body)[0] == 200, "linear to answer after it", timeout=30)


def test_torch_a_load_that_finds_no_gap_in_its_devices_schedule_fails_saying_so(tmp_path, repository_cluster):
    """A load's run never takes the device from the models it serves: when
    no gap comes, the backend gives up waiting for its lease and the load
    fails. A model of one request a batch, ~0.2 s each (busy.pt), is kept
    queued by three client loops (two requests always wait, so the device
    is never free of one that must go now); a load of another model on that
    backend asks for the device for its first run, finds no gap within the
    backend's wait (5 s), and fails (400) naming the device, the wait and
    why; the scheduler counts the lease refused, the model is not served,
    and every request of the loops is answered 200."""
    need_test_model("busy.pt")
    repo = tmp_path / "models"
    with open(os.path.join(MODELS, "busy.pt"), "rb") as src:
        write_torch_model(repo, "hog", BUSY_PBTXT.replace("max_batch_size: 8", "max_batch_size: 1"),
                          model_bytes=src.read(), top=1)
    c = repository_cluster(repo)
    loops = []
    try:
        (f,) = c.start("explicit")
        body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": [1.0] * 4}]}
        assert http_infer(f, "hog", body)[0] == 200
        loops = [InferLoop([f], "hog", body) for _ in range(3)]
        wait_until(lambda: sum(len(x.statuses) for x in loops) >= 3, "the client loops' first answers", timeout=30)
        write_torch_model(repo, "fresh", COLD_PBTXT % 3000)
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/fresh/load")
        why = json.loads(out)["error"]
        assert status == 400 and "could not load it" in why, (status, out)
        assert re.search(r"waiting for cpu\S* to run a batch of 1: found no gap of \d+ ms in the schedule of cpu\S* "
                         r"within 5000 ms: the models it serves keep it busy", why), why
        statuses = [s for x in loops for s in x.stop()]
        bad = [b for x in loops for b in x.bad]
        loops = []
        assert set(statuses) == {200}, bad[:3]
        status, _, out = http_infer(f, "fresh", {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4],
                                                              "data": [1.0] * 4}]})
        assert status == 503 and "not loaded" in json.loads(out)["error"], out
        c.scheduler.stop(signal.SIGTERM, timeout=30)
        leases = c.report("scheduler")["leases"]
        assert leases["refused"] >= 1, leases
    finally:
        for x in loops:
            x.stop()


def test_torch_a_spare_that_takes_over_accepts_a_backend_that_freed_a_model_of_the_start(tmp_path, repository_cluster):
    """Two hot-spare schedulers read one repository. A model of the start
    unloaded under the first primary is freed by the TorchScript backend;
    the primary is killed (SIGKILL) and the spare takes over with the models
    of its own start, which the backend re-registers without: the spare
    accepts it (it used to refuse it, "cannot run these models of the
    cluster", leaving the cluster without a backend), lists the freed model
    unloaded, serves the other (200), and a load of the freed one reads it
    again and answers 200."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    write_torch_model(repo, "gone", COLD_PBTXT % 3000)
    ports = (free_port(), free_port())
    c = repository_cluster(repo, REPOSITORY_CLUSTER_CONFIG.replace(
        "heartbeat_timeout_ms: 500}", 'heartbeat_timeout_ms: 500, schedulers: ["127.0.0.1:%d", "127.0.0.1:%d"]}'
        % ports))
    first = None
    try:
        schedulers = []
        for i, port in enumerate(ports):
            c.port = port
            schedulers.append(c.start_scheduler("s%d" % i, extra=c.args + ["--model-control-mode", "explicit"]))
        first, spare = schedulers
        first.wait_for("it to be primary", lambda: "primary now" in first.output(), timeout=10)
        c.port, c.scheduler = ports[0], first
        c.add_backend("cpu")
        (f,) = c.add_frontends(["fa"])
        xs = rows(2, 5)
        body = linear_body(xs)
        for model in ("linear", "gone"):
            assert http_infer(f, model, body)[0] == 200, model
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/gone/unload")
        assert status == 200, out
        c.backends["cpu"].wait_for("it to free 'gone'", lambda: "freed model 'gone'" in c.backends["cpu"].output(),
                                   timeout=10)

        first.kill()
        spare.wait_for("it to take over", lambda: "primary now" in spare.output(), timeout=10)
        c.scheduler = spare
        spare.wait_for("the backend to register", lambda: " registered " in spare.output(), timeout=30)
        wait_until(lambda: http_infer(f, "linear", body)[0] == 200, "linear to answer after the takeover", timeout=30)
        assert "cannot run these models" not in spare.output(), spare.output()
        wait_until(lambda: any(x[0] == "gone" and x[2] == "UNAVAILABLE" for x in repository_index(f)),
                   "the frontend to list 'gone' unloaded", timeout=10)
        status, _, out = http_infer(f, "gone", body)
        assert status == 503 and "not loaded" in json.loads(out)["error"], out
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/gone/load")
        assert status == 200, (out, spare.output())
        status, _, out = http_infer(f, "gone", body)
        assert status == 200, out
        assert json.loads(out)["outputs"][0]["data"] == pytest.approx(flat_expected(xs), rel=1e-6)
        assert http_infer(f, "linear", body)[0] == 200
    finally:
        if first and first.running():
            first.kill()


def test_torch_a_backend_that_joins_after_a_load_holds_the_model_once(tmp_path, repository_cluster):
    """A model loaded while the cluster serves, then a second CPU backend
    started: its start reads the model's folder too, and the scheduler asks
    it to load the model under a name of its own. It takes the copy its
    start loaded (the same files, unchanged) instead of loading a second one
    (it used to hold both: its start's, unused, and the one it was asked to
    load): its /metrics list one copy, its log warms the model up once, it
    answers the model's requests with torch's outputs once the first backend
    is gone, and an unload leaves no copy of it."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo)
    (f,) = c.start("explicit", backends=(("b1", "cpu"),), frontends=("fa",))
    write_torch_model(repo, "fresh", COLD_PBTXT % 3000)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/fresh/load")
    assert status == 200, (out, c.scheduler.output())
    b2 = c.add_backend("b2", extra=["--metrics", "127.0.0.1:0"])
    b2.wait_for("its metrics address", lambda: "metrics: listening on" in b2.output(), timeout=10)
    url = re.search(r"metrics: listening on (http://\S+/metrics)", b2.output()).group(1)
    c.scheduler.wait_for("b2 to run 'fresh'", lambda: re.search(
        r"'b2' \(\S+\) runs model 'fresh' too", c.scheduler.output()), timeout=60)
    copies = sorted(m for m in backend_models(url) if m.split("#")[0] == "fresh")
    assert len(copies) == 1, (copies, b2.output())
    assert b2.output().count("warmed up model 'fresh") == 1, b2.output()
    c.backends["b1"].kill()
    c.scheduler.wait_for("b1's loss", lambda: "GPUs leave the runtime" in c.scheduler.output(), timeout=30)
    xs = rows(2, 5)
    body = linear_body(xs)
    wait_until(lambda: http_infer(f, "fresh", body)[0] == 200, "b2 to serve 'fresh'", timeout=30)
    status, _, out = http_infer(f, "fresh", body)
    assert status == 200 and json.loads(out)["outputs"][0]["data"] == pytest.approx(flat_expected(xs), rel=1e-6)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/fresh/unload")
    assert status == 200, out
    wait_until(lambda: not any(m.split("#")[0] == "fresh" for m in backend_models(url)),
               "b2 to free every copy of 'fresh':\n%s" % b2.output(), timeout=10)
    assert http_infer(f, "linear", body)[0] == 200


def test_torch_a_backend_that_registers_after_a_reload_frees_its_older_copy(tmp_path, repository_cluster):
    """A backend whose start read a model's older files and that registers
    after the model was reloaded (b2, lost during the reload: SIGSTOP past
    the heartbeat timeout) is asked to load the new files under a name of
    its own, and frees its start's copy, which no model of the scheduler
    runs (it used to keep it, unused, beside the new one): its /metrics list
    one copy, its log says which it freed, and it answers the model's
    requests once the first backend is gone."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo)
    (f,) = c.start("explicit", backends=(("b1", "cpu"),), frontends=("fa",))
    b2 = c.add_backend("b2", extra=["--metrics", "127.0.0.1:0"])
    b2.wait_for("its metrics address", lambda: "metrics: listening on" in b2.output(), timeout=10)
    url = re.search(r"metrics: listening on (http://\S+/metrics)", b2.output()).group(1)
    assert backend_models(url) == {"linear"}
    b2.proc.send_signal(signal.SIGSTOP)
    try:
        c.scheduler.wait_for("b2's loss", lambda: re.search(r"'b2' \(\S+\) lost", c.scheduler.output()),
                             timeout=10)
        # Version 2 (linear.pt again, another file): the reload loads it on b1 alone.
        (repo / "linear" / "2").mkdir()
        shutil.copy(os.path.join(MODELS, "linear.pt"), repo / "linear" / "2" / "model.pt")
        write_profile(repo, "linear", "2")
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/linear/load")
        assert status == 200, (out, c.scheduler.output())
    finally:
        b2.proc.send_signal(signal.SIGCONT)
    c.scheduler.wait_for("b2 to run 'linear'", lambda: re.search(
        r"'b2' \(\S+\) runs model 'linear' too", c.scheduler.output()), timeout=60)
    copies = sorted(m for m in backend_models(url) if m.split("#")[0].split("/")[0] == "linear")
    assert len(copies) == 1 and copies[0].startswith("linear#join"), (copies, b2.output())
    assert re.search(r"freed model 'linear': a copy of older files", b2.output()), b2.output()
    c.backends["b1"].kill()
    c.scheduler.wait_for("b1's loss", lambda: re.search(r"'b1' \(\S+\) lost", c.scheduler.output()), timeout=30)
    xs = rows(2, 5)
    body = linear_body(xs)
    wait_until(lambda: http_infer(f, "linear", body)[0] == 200, "b2 to serve 'linear'", timeout=30)
    status, _, out = http_infer(f, "linear", body)
    assert status == 200 and json.loads(out)["outputs"][0]["data"] == pytest.approx(flat_expected(xs), rel=1e-6)
    assert ("linear", "2", "READY", "") in repository_index(f)


def test_torch_a_spare_that_takes_over_serves_each_model_on_the_backends_that_hold_it(tmp_path,
                                                                                      repository_cluster):
    """A model loaded while serving, held by some backends under its own
    name and by others under the name a later join gave it: b1 loads it;
    b2, lost meanwhile (SIGSTOP past the heartbeat timeout), registers
    again and loads it as a backend that joined after the load; b3 starts
    afterwards. A hot spare started since reads the model as one of its
    start. The primary is killed (SIGKILL) and the spare takes over: it
    accepts every backend with the models it holds (it used to refuse a
    backend without the model that another one held, "cannot run these
    models of the cluster", or to list the model unloaded when that backend
    registered first) and the model answers 200 while any of them is left."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    ports = (free_port(), free_port())
    c = repository_cluster(repo, REPOSITORY_CLUSTER_CONFIG.replace(
        "heartbeat_timeout_ms: 500}", 'heartbeat_timeout_ms: 500, schedulers: ["127.0.0.1:%d", "127.0.0.1:%d"]}'
        % ports))
    control = c.args + ["--model-control-mode", "explicit"]
    first = spare = None
    try:
        c.port = ports[0]
        first = c.start_scheduler("s0", extra=control)
        first.wait_for("it to be primary", lambda: "primary now" in first.output(), timeout=10)
        c.add_backend("b1")
        b2 = c.add_backend("b2")
        (f,) = c.add_frontends(["fa"])
        xs = rows(2, 5)
        body = linear_body(xs)
        b2.proc.send_signal(signal.SIGSTOP)
        first.wait_for("b2's loss", lambda: re.search(r"'b2' \(\S+\) lost", first.output()), timeout=10)
        write_torch_model(repo, "fresh", COLD_PBTXT % 3000)
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/fresh/load")
        assert status == 200, (out, first.output())
        b2.proc.send_signal(signal.SIGCONT)
        first.wait_for("b2 to run 'fresh'", lambda: re.search(r"'b2' \(\S+\) runs model 'fresh' too",
                                                              first.output()), timeout=60)
        c.add_backend("b3")
        first.wait_for("b3 to run 'fresh'", lambda: re.search(r"'b3' \(\S+\) runs model 'fresh' too",
                                                              first.output()), timeout=60)
        for model in ("linear", "fresh"):
            assert http_infer(f, model, body)[0] == 200, model
        c.port = ports[1]
        spare = c.start_scheduler("s1", extra=control)  # reads 'fresh' as a model of its start
        c.scheduler = first
        time.sleep(1.0)  # the spare links to the primary

        first.kill()
        spare.wait_for("it to take over", lambda: "primary now" in spare.output(), timeout=10)
        c.scheduler = spare
        for b in ("b1", "b2", "b3"):
            spare.wait_for("%s to register" % b, lambda: re.search(r"'%s' \(\S+\) registered" % b, spare.output()),
                           timeout=30)
        wait_until(lambda: http_infer(f, "fresh", body)[0] == 200, "'fresh' to answer after the takeover:\n%s"
                   % spare.output(), timeout=30)
        assert "cannot run these models" not in spare.output(), spare.output()
        # Each backend serves what it holds: 'fresh' answers while any of them is left.
        for gone in ("b1", "b2"):
            c.backends[gone].kill()
            spare.wait_for("%s's loss" % gone, lambda: re.search(r"'%s' \(\S+\) lost" % gone, spare.output()),
                           timeout=30)
            for model in ("fresh", "linear"):
                wait_until(lambda: http_infer(f, model, body)[0] == 200, "'%s' to answer without %s:\n%s"
                           % (model, gone, spare.output()), timeout=30)
        status, _, out = http_infer(f, "fresh", body)
        assert status == 200 and json.loads(out)["outputs"][0]["data"] == pytest.approx(flat_expected(xs),
                                                                                      rel=1e-6), out
    finally:
        for s in (first, spare):
            if s and s.running():
                s.kill()


def explicit_primary_and_spare(repository_cluster, repo, heartbeat_timeout_ms=500):
    """Two hot-spare schedulers on one repository, explicit model control:
    (the cluster, its primary, the spare), the first primary and the
    cluster's processes started next pointed at it. The caller kills both."""
    ports = (free_port(), free_port())
    c = repository_cluster(repo, REPOSITORY_CLUSTER_CONFIG.replace(
        "heartbeat_timeout_ms: 500}", 'heartbeat_timeout_ms: %d, schedulers: ["127.0.0.1:%d", "127.0.0.1:%d"]}'
        % ((heartbeat_timeout_ms,) + ports)))
    schedulers = []
    try:
        for port in ports:
            c.port = port
            schedulers.append(c.start_scheduler("s%d" % len(schedulers),
                                                extra=c.args + ["--model-control-mode", "explicit"]))
        first, spare = schedulers
        first.wait_for("it to be primary", lambda: "primary now" in first.output(), timeout=10)
    except BaseException:
        for s in schedulers:
            s.kill()
        raise
    c.port, c.scheduler = ports[0], first
    return c, first, spare


def test_emulated_a_spare_that_takes_over_serves_the_repository_as_the_primary_did(tmp_path, repository_cluster):
    """Two hot-spare schedulers start from one repository (explicit model
    control). Under the first primary a model added since is loaded, a
    model of the start reloaded with a changed config.pbtxt and another
    unloaded; a fourth stays as it was. The primary is killed (SIGKILL):
    the spare that takes over loads, reloads and unloads to match (it used
    to serve its own start: the added model unknown, the unloaded one
    served again, the reloaded one on the files of its start), says so in
    its log, and the frontend, unchanged, answers the loaded model (200),
    lists the unloaded one unavailable (503 "not loaded") and serves the
    others."""
    repo = tmp_path / "models"
    for name in ("same", "changed", "gone"):
        write_emulated_model(repo, name)
    c, first, spare = explicit_primary_and_spare(repository_cluster, repo)
    try:
        c.add_backend("one", "emulated:1")  # the repository's cluster.yaml: the token and both schedulers
        (f,) = c.add_frontends(["fa"])
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}

        def control(model, op):
            status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/%s/%s" % (model, op))
            assert status == 200, (model, op, out, first.output())

        write_emulated_model(repo, "fresh")
        control("fresh", "load")
        (repo / "changed" / "config.pbtxt").write_text(GROUPED_PBTXT % (3000, "# reloaded"))
        control("changed", "load")
        assert "switched model 'changed' to its new files" in first.output(), first.output()
        control("gone", "unload")
        for model in ("same", "changed", "fresh"):
            assert http_infer(f, model, body)[0] == 200, model
        time.sleep(1.0)  # a few Standings (every 50 ms) reach the spare

        first.kill()
        spare.wait_for("it to take over", lambda: "primary now" in spare.output(), timeout=10)
        c.scheduler = spare
        spare.wait_for("it to match the repository", lambda: "as the old primary did" in spare.output(), timeout=30)
        assert ("serving the repository as the old primary did: loading 'fresh'; reloading 'changed'; "
                "unloading 'gone'") in spare.output(), spare.output()
        spare.wait_for("the reload", lambda: "switched model 'changed' to its new files" in spare.output(),
                       timeout=30)
        for model in ("fresh", "same", "changed"):
            wait_until(lambda: http_infer(f, model, body)[0] == 200, "'%s' to answer after the takeover:\n%s"
                       % (model, spare.output()), timeout=30)
        wait_until(lambda: any(x[0] == "gone" and x[2] == "UNAVAILABLE" for x in repository_index(f)),
                   "the frontend to list 'gone' unloaded", timeout=10)
        status, _, out = http_infer(f, "gone", body)
        assert status == 503 and "not loaded" in json.loads(out)["error"], out
        index = {e[0]: e for e in repository_index(f)}
        assert all(index[m][2] == "READY" for m in ("same", "changed", "fresh")), index
        # What the old primary served is this one's now: an unload and a load answer as usual.
        control("fresh", "unload")
        control("gone", "load")
        assert http_infer(f, "gone", body)[0] == 200
        # No model here has an instance_group: an unload of one loaded while
        # serving used to be logged as "no registered device is of its instance_group".
        assert "instance_group" not in spare.output(), spare.output()
    finally:
        for s in (first, spare):
            if s.running():
                s.kill()


def test_emulated_a_load_under_way_when_the_primary_dies_is_carried_out_by_the_spare(tmp_path, repository_cluster):
    """A load asked of the primary (explicit model control) is under way when
    the primary is killed (SIGKILL): its one backend is stopped (SIGSTOP)
    before the load is asked, so it has not answered. The frontend that
    asked is told the control may or may not have happened; the spare that
    takes over (the backend resumed) loads it, since the old primary's
    Standing listed it as loading, says so, and the model answers. (Before
    protocol 18 it was not matched: the spare served without it, 503 "not
    loaded".)"""
    repo = tmp_path / "models"
    write_emulated_model(repo, "same")
    # A heartbeat timeout longer than the backend's pause (the takeover
    # itself is at once: the killed primary's connections fail).
    c, first, spare = explicit_primary_and_spare(repository_cluster, repo, heartbeat_timeout_ms=5000)
    try:
        backend = c.add_backend("one", "emulated:1")
        (f,) = c.add_frontends(["fa"])
        write_emulated_model(repo, "slow")
        backend.proc.send_signal(signal.SIGSTOP)
        answer = []
        asker = threading.Thread(target=lambda: answer.append(
            curl("-X", "POST", f.url + "/v2/repository/models/slow/load", timeout=60)))
        try:
            asker.start()
            first.wait_for("the load to be asked of the backend",
                           lambda: "asked to load model 'slow'" in first.output(), timeout=10)
            time.sleep(0.3)  # Standings (every 50 ms) reach the spare
            first.kill()
        finally:
            backend.proc.send_signal(signal.SIGCONT)
        asker.join(60)
        status, _, out = answer[0]
        assert status != 200 and "may or may not have happened" in out.decode(), (status, out)
        spare.wait_for("it to take over", lambda: "primary now" in spare.output(), timeout=10)
        c.scheduler = spare
        spare.wait_for("it to match the repository", lambda: "as the old primary did" in spare.output(), timeout=30)
        assert ("serving the repository as the old primary did: loading 'slow'; reloading none; "
                "unloading none") in spare.output(), spare.output()
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
        wait_until(lambda: http_infer(f, "slow", body)[0] == 200, "'slow' to answer after the takeover:\n%s"
                   % spare.output(), timeout=60)
        assert http_infer(f, "same", body)[0] == 200
        index = {e[0]: e for e in repository_index(f)}
        assert index["slow"][2] == "READY" and index["same"][2] == "READY", index
    finally:
        for s in (first, spare):
            if s.running():
                s.kill()


def test_torch_a_model_being_loaded_is_not_ready_and_a_lost_backend_fails_its_load(tmp_path, repository_cluster):
    """A model whose warm-up takes seconds (busy.pt, ~0.2 s a batch, batches
    1 to 8 once): while it loads both frontends list it LOADING and answer
    at once that it is not loaded (REST ready 400, inference 503, gRPC
    ready false); one of the two backends asked is killed mid-load: the load
    answers 503 naming the lost backend, both indexes give the cause, the
    other backend still serves the served model (200), and loading it again
    succeeds on the backend left."""
    need_test_model("busy.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo)
    fa, fb = c.start("explicit", backends=[("b1", "cpu"), ("b2", "cpu")], frontends=("fa", "fb"))
    xs = rows(2, 5)
    body = linear_body(xs)
    with open(os.path.join(MODELS, "busy.pt"), "rb") as src:
        write_torch_model(repo, "slowload", BUSY_PBTXT, model_bytes=src.read())
    result = {}

    def load():
        result["answer"] = curl("-X", "POST", fa.url + "/v2/repository/models/slowload/load")

    t = threading.Thread(target=load)
    t.start()
    for f in (fa, fb):
        wait_until(lambda: ("slowload", "1", "LOADING", "loading") in repository_index(f),
                   "%s to list 'slowload' LOADING" % f.name, timeout=10)
    start = time.monotonic()
    status, _, out = curl(fb.url + "/v2/models/slowload/ready")
    assert status == 400 and "not loaded" in json.loads(out)["error"], out
    busy_body = {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": [1.0] * 4}]}
    status, _, out = http_infer(fb, "slowload", busy_body)
    assert status == 503 and "not loaded" in json.loads(out)["error"] and "loading" in \
        json.loads(out)["error"], out
    pb, pbg = grpc_stubs()
    with grpc.insecure_channel(fa.grpc) as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        assert stub.ModelReady(pb.ModelReadyRequest(name="slowload"), timeout=10).ready is False
    assert time.monotonic() - start < 2, "the answers during the load waited"
    assert t.is_alive(), "the load ended before the backend was killed"
    c.backends["b1"].kill()
    t.join(timeout=60)
    status, _, out = result["answer"]
    assert status == 503 and "lost while it loaded the model" in json.loads(out)["error"], out
    for f in (fa, fb):
        wait_until(lambda: any(x[0] == "slowload" and "lost while it loaded" in x[3]
                               for x in repository_index(f)), "%s to list why" % f.name, timeout=10)
        wait_until(lambda: http_infer(f, "linear", body)[0] == 200, "%s to serve 'linear'" % f.name,
                   timeout=10)
    status, _, out = curl("-X", "POST", fb.url + "/v2/repository/models/slowload/load")
    assert status == 200, (out, c.scheduler.output())
    for f in (fa, fb):
        wait_until(lambda: ("slowload", "1", "READY", "") in repository_index(f),
                   "%s to list 'slowload' READY" % f.name, timeout=10)
    status, _, out = http_infer(fa, "slowload", busy_body)
    assert status == 200 and json.loads(out)["outputs"][0]["data"] == [1.0] * 4, out
    # A backend that joins later is asked to load it too, and serves it once the others are gone.
    c.add_backend("b3")
    c.scheduler.wait_for("b3 to run 'slowload'", lambda: re.search(
        r"'b3' \(\S+\) runs model 'slowload' too", c.scheduler.output()), timeout=60)
    c.backends["b2"].kill()
    c.scheduler.wait_for("b2's loss", lambda: c.scheduler.output().count("GPUs leave the runtime") >= 2,
                         timeout=30)
    wait_until(lambda: http_infer(fb, "slowload", busy_body)[0] == 200, "b3 to serve 'slowload'", timeout=30)
    assert http_infer(fb, "linear", body)[0] == 200


def test_torch_poll_mode_loads_reloads_and_unloads_what_changes_in_the_repository(tmp_path, repository_cluster):
    """--model-control-mode poll (--repository-poll-secs 0.3): the scheduler
    rescans the repository itself: a folder added is loaded (READY on both
    frontends, 200), a corrupt one fails once with its cause in the index
    (not tried again while its files stay as they are), a new version of a
    served model is switched to, a removed folder is unloaded; the
    frontends' load requests are refused naming the mode; a client loop on
    another model gets 200 for every request throughout."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo)
    loop = None
    try:
        fa, fb = c.start("poll", frontends=("fa", "fb"), scheduler_extra=["--repository-poll-secs", "0.3"])
        xs = rows(2, 5)
        body = linear_body(xs)
        loop = InferLoop([fa, fb], "linear", body)
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/linear/load")
        assert status == 503 and "polls its repository" in json.loads(out)["error"], out

        write_torch_model(repo, "fresh", COLD_PBTXT % 3000)
        for f in (fa, fb):
            wait_until(lambda: ("fresh", "1", "READY", "") in repository_index(f), "%s to list 'fresh'" % f.name,
                       timeout=30)
            assert http_infer(f, "fresh", body)[0] == 200

        write_torch_model(repo, "broken", COLD_PBTXT % 3000, model_bytes=b"not a TorchScript archive")
        for f in (fa, fb):
            wait_until(lambda: any(x[0] == "broken" and "could not load it" in x[3] for x in repository_index(f)),
                       "%s to list why 'broken' failed" % f.name, timeout=30)
        time.sleep(1.2)  # four polls more: its files did not change, so it is not tried again
        assert c.backends["cpu"].output().count("could not load model 'broken'") == 1, c.backends["cpu"].output()

        (repo / "fresh" / "2").mkdir()
        with open(os.path.join(MODELS, "linear.pt"), "rb") as src:
            (repo / "fresh" / "2" / "model.pt").write_bytes(src.read())
        write_profile(repo, "fresh", "2")
        for f in (fa, fb):
            wait_until(lambda: ("fresh", "2", "READY", "") in repository_index(f), "%s to list 'fresh' 2" % f.name,
                       timeout=30)
            assert http_infer(f, "fresh", body)[0] == 200

        shutil.rmtree(repo / "fresh")
        for f in (fa, fb):
            wait_until(lambda: ("fresh", "2", "UNAVAILABLE", "unloaded") in repository_index(f),
                       "%s to list 'fresh' unloaded" % f.name, timeout=30)
            status, _, out = http_infer(f, "fresh", body)
            assert status == 503 and "not loaded" in json.loads(out)["error"], out

        bad = loop.bad
        statuses = loop.stop()
        loop = None
        assert len(statuses) >= 20 and set(statuses) == {200}, (len(statuses), set(statuses), bad[:3])
        assert "the folder of model 'fresh' is gone" in c.scheduler.output(), c.scheduler.output()
    finally:
        if loop:
            loop.stop()


# ---- emulated: GPUs that run l(b) and answer with the input's hash --------------------

EMULATED_CONFIG = """
    gpus: 2
    policy: deferred
    workload: {rate: 10}
    # Deferred batches start at their latest moment less this margin: with the
    # 1 ms default, a scheduler thread woken late on a machine loaded by other
    # work expired the lone `busy` probe before it ran (3 runs in 4 failed
    # beside two CPU hogs; none of 4 with 30 ms).
    delays: {safety_margin_ms: 30}
    models:
      - {name: fast, alpha_ms: 0.05, beta_ms: 1, slo_ms: 100, max_batch: 16}
      # l(1) = 201 ms: a lone request waits ~3.8 s for company (deferred).
      - {name: slow, alpha_ms: 1, beta_ms: 200, slo_ms: 4000, max_batch: 8}
      # l(1) = 601 ms: a lone request runs from ~350 ms after it came to ~950 ms.
      - {name: busy, alpha_ms: 1, beta_ms: 600, slo_ms: 1000, max_batch: 4}
    cluster:
      token: "%s"
      heartbeat_ms: 50
      heartbeat_timeout_ms: 500
      # The paper's rule from a model's first request, which the tests of a
      # lone request waiting for company (above) are about.
      defer_without_history: true
      models:
        slow: {input: "float32[4]", output: "uint8[16]"}
        busy: {input: "float32[4]", output: "uint8[16]"}
""" % TOKEN


@pytest.fixture()
def emulated():
    c = Cluster(EMULATED_CONFIG)
    c.start_scheduler()
    c.start_backend("b1", "emulated:2")
    yield c
    c.stop_all()


def test_emulated_a_models_first_request_goes_at_once_and_the_rule_defers_the_next():
    """By default (cluster.defer_without_history: false, as on serve) the
    scheduler sends a model's batches at their earliest until it has seen a
    gap between two of its requests: the first request to `slow` (SLO 4 s,
    l(1) = 201 ms) is answered in about l(1), where the paper's rule held it
    ~3.8 s for company; the next, with that gap seen, is deferred as before."""
    c = Cluster(EMULATED_CONFIG.replace("defer_without_history: true", "defer_without_history: false"))
    try:
        c.start_scheduler()
        c.start_backend("b1", "emulated:2")
        f = c.start_frontend("fe")
        f.wait_ready()
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}]}
        took = []
        for _ in range(2):
            t0 = time.monotonic()
            status, hdrs, out = http_infer(f, "slow", body)
            took.append(time.monotonic() - t0)
            assert status == 200 and hdrs["symphony-outcome"] == "ok", (status, hdrs, out)
        print("first request %.2f s, second %.2f s" % tuple(took))
        assert took[0] < 2, "the first request waited %.1f s: deferred without history" % took[0]
        assert took[1] > 2, "the second request went after %.1f s: not deferred once a gap was seen" % took[1]
    finally:
        c.stop_all()


def warm_up(f, tally):
    """The first request through a new backend-frontend pair can miss a tight
    deadline (the backend's first one-sided read from the frontend sets up its
    transport): sends `fast` requests until one is answered (bounded)."""
    body = {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1], "data": ["warm"]}]}
    for _ in range(20):
        status, hdrs, out = http_infer(f, "fast", body, tally)
        if status == 200:
            return
        assert status == 504 and hdrs["symphony-drop-reason"] == "expired", out
    raise AssertionError("no answer in 20 tries")


# Emulated GPUs answer each request with 16 bytes (its input's hash): a
# repository model with those outputs; `pinned` only on GPU 1 of a backend.
GROUPED_PBTXT = """
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "h" data_type: TYPE_UINT8 dims: [ 16 ] } ]
parameters { key: "symphony.slo_ms" value { string_value: "%d" } }
%s
"""


def backend_requests_by_device(backend):
    """symphony_backend_requests_total by device, from the backend's /metrics."""
    m = re.search(r"metrics: listening on (http://\S+/metrics)", backend.output())
    assert m, backend.output()
    out = {}
    for line in http_get(m.group(1))[1].decode().splitlines():
        r = re.match(r'symphony_backend_requests_total\{device="[^"]*/([^"]+)"\} (\S+)', line)
        if r:
            out[r.group(1)] = float(r.group(2))
    return out


def test_emulated_an_instance_group_pins_a_model_to_its_devices(tmp_path, repository_cluster):
    """A repository model with instance_group [KIND_GPU, gpus: [1]] runs on each
    backend's GPU 1 only: while the only backend has one GPU (GPU 0) its
    requests are dropped and the scheduler says why; once a backend with two
    joins, every one runs on that backend's emulated:1, and a model without a
    group runs anywhere."""
    repo = tmp_path / "models"
    points = "".join("  - [%d, %.2f, %.2f, %.2f]\n" % ((b,) + (1 + 0.05 * b,) * 3) for b in range(1, 9))
    for name, slo, group in (("pinned", 300, "instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]"),
                             ("anywhere", 3000, "")):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(GROUPED_PBTXT % (slo, group))
        (repo / name / "1" / "model.pt").write_bytes(b"")  # emulated GPUs open no file
        (repo / name / "1" / "model.cpu0.profile.yaml").write_text(
            'model: %s\ndevice: cpu:0\ninputs: ["float32[4]"]\nmax_batch: 8\nalpha_ms: 0.05\n'
            "beta_ms: 1\nstopped_because: test\npoints:\n" % name + points)
    c = repository_cluster(repo)
    c.start(backends=[("one", "emulated:1")], frontends=())
    c.scheduler.wait_for("the log line", lambda: "no registered device is of its instance_group"
                         in c.scheduler.output(), timeout=30)
    (f,) = c.add_frontends(["fe"])
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    status, hdrs, out = http_infer(f, "pinned", body)
    assert status == 504 and hdrs["symphony-drop-reason"] == "expired", (status, out)
    two = c.add_backend("two", "emulated:2", extra=["--metrics", "127.0.0.1:0"])
    c.scheduler.wait_for("the log line", lambda: "it is served again" in c.scheduler.output(), timeout=30)
    answered = 0
    for i in range(40):  # the first through a new backend-frontend pair may be late or expire
        status, hdrs, out = http_infer(f, "pinned", body)
        if status == 200:
            answered += 1
            assert json.loads(out)["outputs"][0]["shape"] == [1, 16], out
        if answered == 12:
            break
    assert answered == 12, out
    by_device = backend_requests_by_device(two)
    assert by_device.get("emulated:1") == 12 and by_device.get("emulated:0") == 0, by_device
    for i in range(4):
        status, _, out = http_infer(f, "anywhere", body)
        assert status == 200, out


def write_emulated_model(repo, name, versions=("1",), slo=3000, extra="", beta_ms=1):
    """A repository model for emulated backends (which open no file), with a profile per version:
    a batch of b takes beta_ms + 0.05 b ms."""
    points = "".join("  - [%d, %.2f, %.2f, %.2f]\n" % ((b,) + (beta_ms + 0.05 * b,) * 3) for b in range(1, 9))
    (repo / name).mkdir(parents=True, exist_ok=True)
    (repo / name / "config.pbtxt").write_text(GROUPED_PBTXT % (slo, extra))
    for v in versions:
        (repo / name / v).mkdir()
        (repo / name / v / "model.pt").write_bytes(b"")
        (repo / name / v / "model.cpu0.profile.yaml").write_text(
            'model: %s\ndevice: cpu:0\ninputs: ["float32[4]"]\nmax_batch: 8\nalpha_ms: 0.05\n'
            "beta_ms: %g\nstopped_because: test\npoints:\n" % (name, beta_ms) + points)


def repository_index(f, ready=None):
    status, _, body = curl("-X", "POST", f.url + "/v2/repository/index", "-H", "Content-Type: application/json",
                           body=json.dumps({} if ready is None else {"ready": ready}).encode())
    assert status == 200, body
    return [(e["name"], e.get("version", ""), e["state"], e.get("reason", "")) for e in json.loads(body)]


def test_emulated_the_repository_index_and_readiness_of_a_model_that_is_not_served(tmp_path, repository_cluster):
    """With --model-repository, every frontend lists every version of the
    repository it read (POST /v2/repository/index, gRPC RepositoryIndex):
    READY what the scheduler serves, UNAVAILABLE with why otherwise (a
    version without its model file; a model the scheduler's repository does
    not hold). Readiness of those is not ready (REST 400 "not loaded", gRPC
    ready = false; metadata and inference 503 "not loaded"), and only a name
    the repository does not hold is unknown (404, NOT_FOUND). Load and unload
    are refused while the cluster's models are fixed at start."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain")
    write_emulated_model(repo, "versioned", versions=("1",), extra="version_policy: { all { } }")
    (repo / "versioned" / "2").mkdir()  # a version folder without its model file
    # The frontends' repository holds one model more than the scheduler's.
    front_repo = tmp_path / "front_models"
    shutil.copytree(repo, front_repo)
    write_emulated_model(front_repo, "extra")
    c = repository_cluster(repo)
    c.start(backends=[("one", "emulated:1")], frontends=())
    fronts = c.add_frontends(("fa", "fb"), repo=front_repo)
    idx = repository_index(fronts[0])
    assert [e[:3] for e in idx] == [("extra", "1", "UNAVAILABLE"), ("plain", "1", "READY"),
                                    ("versioned", "1", "READY"), ("versioned", "2", "UNAVAILABLE")], idx
    assert "not served by the cluster's scheduler at " + c.address() in idx[0][3], idx
    assert "no model file" in idx[3][3], idx
    assert repository_index(fronts[1]) == idx  # every frontend lists the same
    assert repository_index(fronts[0], ready=True) == [e for e in idx if e[2] == "READY"]
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    for path, what in (("extra", "'extra' is not loaded"), ("versioned/versions/2", "version '2' is not loaded")):
        status, _, out = curl(fronts[0].url + "/v2/models/%s/ready" % path)
        assert status == 400 and what in json.loads(out)["error"], (path, status, out)
        status, _, out = curl(fronts[0].url + "/v2/models/" + path)
        assert status == 503 and what in json.loads(out)["error"], (path, status, out)
        status, _, out = http_infer(fronts[0], path, body)
        assert status == 503 and what in json.loads(out)["error"], (path, status, out)
    status, _, out = curl(fronts[0].url + "/v2/models/nope/ready")
    assert status == 404 and "unknown model 'nope'" in json.loads(out)["error"], out
    for path in ("plain", "versioned", "versioned/versions/1"):
        assert curl(fronts[1].url + "/v2/models/%s/ready" % path)[0] == 200, path
    m = json.loads(curl(fronts[0].url + "/v2/models/versioned")[2])
    assert m["versions"] == ["1"], m
    status, hdrs, out = http_infer(fronts[1], "plain", body)
    assert status == 200, out
    for verb, flag in (("load", "none"), ("unload", "none")):
        status, _, out = curl("-X", "POST", fronts[0].url + "/v2/repository/models/plain/" + verb)
        assert status == 503 and "--model-control-mode " + flag in json.loads(out)["error"], out
    assert "model_repository" in json.loads(curl(fronts[0].url + "/v2")[2])["extensions"]
    pb, pbg = grpc_stubs()
    with grpc.insecure_channel(fronts[1].grpc) as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        got = stub.RepositoryIndex(pb.RepositoryIndexRequest(), timeout=10)
        assert [(e.name, e.version, e.state, e.reason) for e in got.models] == idx, got
        got = stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=10)
        assert [e.state for e in got.models] == ["READY", "READY"], got
        assert stub.ModelReady(pb.ModelReadyRequest(name="extra"), timeout=10).ready is False
        assert stub.ModelReady(pb.ModelReadyRequest(name="versioned", version="2"), timeout=10).ready is False
        assert stub.ModelReady(pb.ModelReadyRequest(name="versioned"), timeout=10).ready is True
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelReady(pb.ModelReadyRequest(name="nope"), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND and "unknown model 'nope'" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="plain"), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "none" in e.value.details()


def test_emulated_the_learned_delays_cap_follows_the_models_loaded_and_unloaded(tmp_path, repository_cluster):
    """The scheduler caps its learned delays at a quarter of the tightest SLO
    it serves, also of models loaded and unloaded while it serves: with 30 ms
    injected into every message the scheduler receives it learns a d_ctrl of
    about 15 ms from its backend's pongs beside a 2 s SLO; a model of 40 ms
    loaded caps it at 10 ms, and its unload lifts the cap again."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "roomy", slo=2000)
    config = REPOSITORY_CLUSTER_CONFIG.replace("heartbeat_timeout_ms: 500",
                                               "heartbeat_timeout_ms: 2000, inject_delay_us: 30000")
    c = repository_cluster(repo, config)
    (f,) = c.start("explicit", backends=[("one", "emulated:1")])

    def delays():
        r = c.report("scheduler")
        return r["delays_us"] if r else {}

    def above_cap():
        return delays().get("ctrl", 0) > 12000
    wait_until(above_cap, "a d_ctrl of more than 12 ms learned beside a 2 s SLO", timeout=30)
    write_emulated_model(repo, "tight", slo=40)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/tight/load")
    assert status == 200, out
    wait_until(lambda: 0 < delays().get("ctrl", 0) <= 10000,
               "d_ctrl capped at a quarter of the loaded model's 40 ms SLO: %s" % delays(), timeout=30)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/tight/unload")
    assert status == 200, out
    wait_until(above_cap, "the cap lifted after the unload: %s" % delays(), timeout=30)


def test_emulated_the_room_for_models_loaded_while_serving_is_what_spare_models_says(tmp_path, repository_cluster):
    """--spare-models 1: a scheduler serving the model of its start loads
    one more added to the repository while it serves and refuses a second,
    naming the flag. An unload frees the room: the second loads once the
    first is unloaded (taking its model id), every index still lists the
    first, unloaded, with its statistics, and the first loads again once
    the second is unloaded. A start whose room exceeds the protocol's 4096
    models is refused, naming --spare-models."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "start")
    c = repository_cluster(repo)
    (f,) = c.start("explicit", backends=[("one", "emulated:1")],
                   scheduler_extra=["--spare-models", "1", "--metrics", "127.0.0.1:0"])
    sched_metrics = re.search(r"metrics: listening on (http://\S+/metrics)", c.scheduler.output()).group(1)

    def accepted(model):  # the scheduler's /metrics series of the model
        status, text = http_get(sched_metrics)
        assert status == 200, text
        m = re.search(r'symphony_requests_accepted_total\{model="%s"\} (\S+)' % model, text.decode())
        return float(m.group(1)) if m else None

    write_emulated_model(repo, "first")
    write_emulated_model(repo, "second")
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/first/load")
    assert status == 200, out
    assert http_infer(f, "first", body)[0] == 200
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/second/load")
    assert status == 503 and b"all are taken" in out and b"--spare-models" in out, (status, out)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/first/unload")
    assert status == 200, out
    # At once: the load waits until the frontend has seen the first go.
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/second/load")
    assert status == 200, out
    assert http_infer(f, "second", body)[0] == 200
    assert accepted("second") == 1, "its id's series starts at zero, not at what 'first' counted"
    index = {e[0]: e for e in repository_index(f)}
    assert index["first"][2] == "UNAVAILABLE" and "unloaded" in index["first"][3], index
    assert index["second"][2] == "READY" and index["start"][2] == "READY", index
    assert stats_rest(f)["first"]["inference_stats"]["success"]["count"] == 1
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/first/unload")
    assert status == 200, out  # unloaded already
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/first/load")
    assert status == 503 and b"all are taken" in out, (status, out)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/second/unload")
    assert status == 200, out
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/first/load")
    assert status == 200, out
    assert http_infer(f, "first", body)[0] == 200
    assert http_infer(f, "start", body)[0] == 200
    index = {e[0]: e for e in repository_index(f)}
    assert index["first"][2] == "READY" and index["second"][2] == "UNAVAILABLE", index
    stats = stats_rest(f)
    assert stats["first"]["inference_stats"]["success"]["count"] == 2, stats["first"]
    assert stats["second"]["inference_stats"]["success"]["count"] == 1, stats["second"]
    assert "model 'first' (unloaded) gives its room to model 'second'" in c.scheduler.output()
    refused = subprocess.run([CLI, "scheduler", "--listen", "127.0.0.1:0", "--model-repository", str(repo),
                              "--model-control-mode", "explicit", "--spare-models", "5000",
                              "--config", c.config], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "--spare-models" in refused.stderr, refused


def test_emulated_a_load_of_several_versions_takes_room_for_all_or_none(tmp_path, repository_cluster):
    """--spare-models 2, a model of two versions: with one room held by a
    served model and one by an unloaded model, its load is refused (503
    naming --spare-models) and takes nothing (the unloaded model keeps its
    room and loads again); asked right after both other models are
    unloaded, it waits until the frontend has seen both go and serves both
    versions."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "start")
    c = repository_cluster(repo)
    (f,) = c.start("explicit", backends=[("one", "emulated:1")], scheduler_extra=["--spare-models", "2"])
    for name in ("a", "b"):
        write_emulated_model(repo, name)
    write_emulated_model(repo, "two", versions=("1", "2"), extra="version_policy: { all { } }")
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}

    def control(model, verb):
        return curl("-X", "POST", "%s/v2/repository/models/%s/%s" % (f.url, model, verb))

    for name in ("a", "b"):
        assert control(name, "load")[0] == 200
    assert control("a", "unload")[0] == 200
    status, _, out = control("two", "load")
    assert status == 503 and b"all are taken" in out and b"--spare-models" in out, (status, out)
    assert "gives its room" not in c.scheduler.output(), c.scheduler.output()
    assert control("a", "load")[0] == 200
    assert http_infer(f, "a", body)[0] == 200
    assert control("a", "unload")[0] == 200 and control("b", "unload")[0] == 200
    status, _, out = control("two", "load")
    assert status == 200, out
    index = repository_index(f)
    assert ("two", "1", "READY", "") in index and ("two", "2", "READY", "") in index, index
    for path in ("two/versions/1", "two/versions/2"):
        assert http_infer(f, path, body)[0] == 200, path
    assert ("a", "1", "UNAVAILABLE", "unloaded") in index and ("b", "1", "UNAVAILABLE", "unloaded") in index, index


def test_emulated_a_frontend_slow_to_answer_its_pings_keeps_its_requests_feasible(tmp_path, repository_cluster):
    """The scheduler subtracts a frontend's one-way delay (half a high
    percentile of its ping round trips) from each of its requests' time, and
    caps it as it caps its learned delays: a frontend that holds every
    message it receives for 200 ms (as one short of CPU answers late) would
    otherwise leave its requests of a 100 ms SLO no time at all, each
    dropped `infeasible`; capped at 25 ms (with its replies' way out, which
    its Pongs tell), they run. The scheduler's /metrics says so, per frontend."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain", slo=100)
    c = repository_cluster(repo, REPOSITORY_CLUSTER_CONFIG.replace("heartbeat_timeout_ms: 500",
                                                                   "heartbeat_timeout_ms: 3000"))
    c.start(backends=[("one", "emulated:1")], frontends=(), scheduler_extra=["--metrics", "127.0.0.1:0"])
    sched_metrics = re.search(r"metrics: listening on (http://\S+/metrics)", c.scheduler.output()).group(1)
    f = c.start_frontend("slow", extra=c.args, env=dict(os.environ, SYMPHONY_INJECT_DELAY_US="200000"))
    f.wait_ready(timeout=60)
    c.scheduler.wait_for("the frontend's one-way delay capped",
                         lambda: re.search(r"frontend 'slow' \(.*\): its one-way delay .* capped together at 25000 us",
                                           c.scheduler.output()), timeout=30)
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    for _ in range(3):
        status, hdrs, out = http_infer(f, "plain", body)
        assert status == 200 and hdrs.get("symphony-outcome") in ("ok", "late"), (status, hdrs, out)
    status, text = http_get(sched_metrics)
    assert status == 200, text
    text = text.decode()
    series = r'symphony_frontend_delay%s\{frontend="slow",address="[^"]+"%s\} (\S+)'
    assert float(re.search(series % ("_capped", ""), text).group(1)) == 1, text
    assert float(re.search(series % ("_seconds", ',kind="one_way"'), text).group(1)) == pytest.approx(0.025), text


def test_emulated_a_frontends_input_pool_takes_larger_inputs_of_a_model_loaded_since(tmp_path, repository_cluster):
    """A frontend sizes its input pool's slots at start from every model
    folder its repository holds then (4 floats here). A folder added since
    whose requests are larger (64 floats, 16 slots each) loads and is served
    by that frontend, its inputs in adjacent slots; one larger than 64 slots
    (1024 floats) gets a region of the pool of its own, which the backend
    acknowledges before a request uses it. The answers of both, concurrent
    ones included, are those of a frontend started after the folders were
    added (emulated backends answer a hash of the input bytes), and a backend
    that joins later reads the region too (it gets every region at connect)."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain")
    c = repository_cluster(repo)
    (fa,) = c.start("explicit", backends=[("one", "emulated:1")], frontends=("fa",))
    for name, n in (("wide", 64), ("huge", 1024)):
        write_emulated_model(repo, name)
        (repo / name / "config.pbtxt").write_text(GROUPED_PBTXT.replace("dims: [ 4 ]", "dims: [ %d ]" % n) % (3000, ""))
        profile = repo / name / "1" / "model.cpu0.profile.yaml"
        profile.write_text(profile.read_text().replace("float32[4]", "float32[%d]" % n))
        status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/%s/load" % name)
        assert status == 200, (out, c.scheduler.output())

    def request(n, seed):
        return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, n],
                            "data": [float((seed * 7 + k) % 97) for k in range(n)]}]}

    def answers(f, model, n, seeds):
        out = {}

        def one(seed):
            status, _, body = http_infer(f, model, request(n, seed))
            out[seed] = (status, json.loads(body)["outputs"][0]["data"] if status == 200 else body)

        threads = [threading.Thread(target=one, args=(seed,)) for seed in seeds]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        return out

    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    assert http_infer(fa, "plain", body)[0] == 200
    got_a = {model: answers(fa, model, n, range(12)) for model, n in (("wide", 64), ("huge", 1024))}
    assert "input pool: region for model 'huge': " in fa.output(), fa.output()
    assert "symphony_frontend_input_pool_regions 2" in metric_lines(fa)  # the start's and huge's
    (fb,) = c.add_frontends(["fb"])
    got_b = {model: answers(fb, model, n, range(12)) for model, n in (("wide", 64), ("huge", 1024))}
    for model in ("wide", "huge"):
        assert all(st == 200 for st, _ in got_a[model].values()), (model, got_a[model])
        assert got_a[model] == got_b[model], model
        assert len({str(h) for _, h in got_a[model].values()}) == 12  # the inputs differ, so do their hashes
    c.add_backend("two", "emulated:1")
    c.backends["one"].kill()
    c.scheduler.wait_for("one's loss", lambda: "GPUs leave the runtime" in c.scheduler.output(), timeout=30)
    wait_until(lambda: http_infer(fa, "huge", request(1024, 0))[0] == 200, "'two' to serve 'huge'", timeout=30)
    assert answers(fa, "huge", 1024, range(6)) == {k: got_b["huge"][k] for k in range(6)}
    assert http_infer(fa, "plain", body)[0] == 200
    # Unloaded, 'huge' gives fa its region back: 'large' (900 floats), loaded
    # since, takes it, registering nothing more (fb's slots, sized at its
    # start, hold 1024 floats).
    assert curl("-X", "POST", fa.url + "/v2/repository/models/huge/unload")[0] == 200
    write_emulated_model(repo, "large")
    (repo / "large" / "config.pbtxt").write_text(GROUPED_PBTXT.replace("dims: [ 4 ]", "dims: [ 900 ]") % (3000, ""))
    profile = repo / "large" / "1" / "model.cpu0.profile.yaml"
    profile.write_text(profile.read_text().replace("float32[4]", "float32[900]"))
    status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/large/load")
    assert status == 200, (out, c.scheduler.output())
    large = [answers(f, "large", 900, range(6)) for f in (fa, fb)]
    assert all(st == 200 for st, _ in large[0].values()), large[0]
    assert large[0] == large[1]
    assert "input pool: region 1 reused for model 'large': " in fa.output(), fa.output()
    assert "symphony_frontend_input_pool_regions 2" in metric_lines(fa)
    assert http_infer(fa, "huge", request(1024, 0))[0] == 503


def test_emulated_a_frontend_frees_the_region_of_a_model_unloaded(tmp_path, repository_cluster):
    """A region of a frontend's input pool whose model was unloaded is freed
    once idle for cluster.pool_region_idle_ms (0 here): the backends forget
    it and read the rest of the pool as before; the pool's bytes and regions
    come back to the start's; a backend that joins then hears of the number
    as free, and the model loaded again gets a region of that number, which
    both backends read (emulated backends answer a hash of the input)."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain")
    config = REPOSITORY_CLUSTER_CONFIG.replace("heartbeat_timeout_ms: 500",
                                               "heartbeat_timeout_ms: 500, pool_region_idle_ms: 0")
    c = repository_cluster(repo, config)
    (fa,) = c.start("explicit", backends=[("one", "emulated:1")], frontends=("fa",))
    write_emulated_model(repo, "huge")
    (repo / "huge" / "config.pbtxt").write_text(GROUPED_PBTXT.replace("dims: [ 4 ]", "dims: [ 1024 ]") % (3000, ""))
    profile = repo / "huge" / "1" / "model.cpu0.profile.yaml"
    profile.write_text(profile.read_text().replace("float32[4]", "float32[1024]"))
    start_bytes = re.search(r"^symphony_frontend_input_pool_bytes (\S+)$", metric_lines(fa), re.M).group(1)
    huge = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1024],
                        "data": [float(k % 89) for k in range(1024)]}]}
    plain = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    assert curl("-X", "POST", fa.url + "/v2/repository/models/huge/load")[0] == 200
    wait_until(lambda: http_infer(fa, "huge", huge)[0] == 200, "'huge' served", timeout=30)
    first = http_infer(fa, "huge", huge)[2]
    assert "symphony_frontend_input_pool_regions 2" in metric_lines(fa)

    assert curl("-X", "POST", fa.url + "/v2/repository/models/huge/unload")[0] == 200
    # (No request to fa meanwhile: it sees the unload in the table by itself.)
    wait_until(lambda: "input pool: region 1 freed" in fa.output(), "fa to free huge's region", timeout=30)
    lines = metric_lines(fa)
    assert "symphony_frontend_input_pool_regions 1" in lines, lines
    assert "symphony_frontend_input_pool_bytes %s" % start_bytes in lines, lines
    assert http_infer(fa, "plain", plain)[0] == 200  # the start pool is read as before

    c.add_backend("two", "emulated:1")
    wait_until(lambda: "symphony_frontend_backends 2" in metric_lines(fa), "both backends at fa", timeout=30)
    assert curl("-X", "POST", fa.url + "/v2/repository/models/huge/load")[0] == 200
    wait_until(lambda: http_infer(fa, "huge", huge)[0] == 200, "'huge' served again", timeout=30)
    assert fa.output().count("input pool: region for model 'huge'") == 2, fa.output()
    assert "symphony_frontend_input_pool_regions 2" in metric_lines(fa)
    c.backends["one"].kill()
    c.scheduler.wait_for("one's loss", lambda: "GPUs leave the runtime" in c.scheduler.output(), timeout=30)
    wait_until(lambda: http_infer(fa, "huge", huge)[0] == 200, "'two' to serve 'huge'", timeout=30)
    assert http_infer(fa, "huge", huge)[2] == first
    assert http_infer(fa, "plain", plain)[0] == 200


def test_emulated_a_region_no_backend_has_acknowledged_answers_503_until_it_is(tmp_path, repository_cluster):
    """A frontend puts no input in a region of its pool before every backend
    connected to it has acknowledged the region. fa learns of 'huge' (1024
    floats, beyond its start slots) while backend 'two' is stopped (SIGSTOP,
    within the heartbeat timeout): a request of 'huge' waits its budget (3 s) for the
    acknowledgement and is answered 503 saying the pool is growing (nothing
    sent: a backend could not read the input), while another model's
    metadata is answered meanwhile (every request waited behind the first
    before); one whose caller hangs up meanwhile ends cancelled at once; once
    'two' runs again they are answered 200."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain")
    config = REPOSITORY_CLUSTER_CONFIG.replace("heartbeat_timeout_ms: 500", "heartbeat_timeout_ms: 15000")
    c = repository_cluster(repo, config)
    fa, fb = c.start("explicit", backends=[("one", "emulated:1"), ("two", "emulated:1")], frontends=("fa", "fb"))
    write_emulated_model(repo, "huge")
    (repo / "huge" / "config.pbtxt").write_text(GROUPED_PBTXT.replace("dims: [ 4 ]", "dims: [ 1024 ]") % (3000, ""))
    profile = repo / "huge" / "1" / "model.cpu0.profile.yaml"
    profile.write_text(profile.read_text().replace("float32[4]", "float32[1024]"))
    status, _, out = curl("-X", "POST", fb.url + "/v2/repository/models/huge/load")  # fa learns of it later
    assert status == 200, (out, c.scheduler.output())
    wait_until(lambda: "symphony_frontend_backends 2" in metric_lines(fa), "both backends at fa", timeout=30)
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1024], "data": [1.0] * 1024}]}
    two = c.backends["two"]
    two.proc.send_signal(signal.SIGSTOP)
    try:
        got = []

        def huge():
            got.append(http_infer(fa, "huge", body))
            got.append(time.monotonic())

        t = threading.Thread(target=huge)
        t.start()
        time.sleep(0.3)
        # Only huge's requests wait for its region: another model's metadata
        # (which makes fa learn of the new table too) is answered meanwhile,
        # not when the wait ends (as it was while fa waited in learning).
        assert http_get(fa.url + "/v2/models/plain")[0] == 200
        answered = time.monotonic()
        t.join(timeout=30)
        assert got[1] - answered > 0.5, got[1] - answered  # (3 s less the 0.3 s and the GET)
        status, _, out = got[0]
        assert status == 503, (status, out)
        assert b"input pool is growing for model 'huge'" in out, out
        # A caller gone while its request waits for the region: the request
        # ends cancelled then (it was submitted once the wait was over).
        curl_hung_up_once_held(fa.url + "/v2/models/huge/infer", json.dumps(body).encode(),
                               lambda: inflight(fa) == 1, wait_until)
        cancelled = re.compile(r'^symphony_requests_dropped_total\{[^}]*model="huge"[^}]*reason="cancelled"\} 1$', re.M)
        wait_until(lambda: cancelled.search(metric_lines(fa)) and inflight(fa) == 0, "the waiting request cancelled",
                   timeout=10)
    finally:
        two.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: http_infer(fa, "huge", body)[0] == 200, "the region acknowledged", timeout=30)
    assert http_infer(fb, "huge", body)[2] == http_infer(fa, "huge", body)[2]
    assert "GPUs leave the runtime" not in c.scheduler.output(), c.scheduler.output()  # two was never lost


def test_emulated_unload_drains_the_model_and_every_frontend_lists_it_unloaded(tmp_path, repository_cluster):
    """--model-control-mode explicit: an unload asked of one frontend (gRPC
    RepositoryModelUnload) while the other has requests of the model queued
    (batches of 150 ms on one emulated GPU) answers once they have ended,
    each exactly once (200 ran, 504 expired, or 503 / 500 naming why it was
    not served); then both frontends list it UNAVAILABLE "unloaded", its
    readiness is not ready and its requests 503 "not loaded", another model
    still serves; a load then serves it again on both frontends (200), and
    a load without a backend fails, leaving it unloaded with why in the index."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain")
    write_emulated_model(repo, "slow", slo=2000, beta_ms=150)
    c = repository_cluster(repo)
    fa, fb = c.start("explicit", backends=[("one", "emulated:1")], frontends=("fa", "fb"))
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    assert http_infer(fa, "slow", body)[0] == 200  # the first through this pair may be slower
    answers = []
    lock = threading.Lock()

    def one():
        status, hdrs, out = http_infer(fa, "slow", body)
        with lock:
            answers.append((status, hdrs.get("symphony-outcome"), out))

    threads = [threading.Thread(target=one) for _ in range(40)]
    for t in threads:
        t.start()
    # Ten queued make the point (a busy machine sends the 40 too slowly to hold 20 at once).
    wait_until(lambda: inflight(fa) >= 10, "requests of 'slow' in flight at fa", timeout=30)
    pb, pbg = grpc_stubs()
    with grpc.insecure_channel(fb.grpc) as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="slow"), timeout=60)
        # Answered once its queued requests have ended: none is left at the scheduler.
        assert stub.ModelReady(pb.ModelReadyRequest(name="slow"), timeout=10).ready is False
        assert stub.ModelReady(pb.ModelReadyRequest(name="plain"), timeout=10).ready is True
    for t in threads:
        t.join(timeout=60)
    assert len(answers) == 40, answers  # each request answered, once
    kinds = {}
    for status, outcome, out in answers:
        if status == 200:
            kinds["ran"] = kinds.get("ran", 0) + 1
        elif status == 504:
            kinds["expired"] = kinds.get("expired", 0) + 1
        else:
            assert status in (500, 503) and (b"not loaded" in out or b"is not served" in out), (status, out)
            kinds["refused"] = kinds.get("refused", 0) + 1
    assert kinds.get("ran", 0) >= 1, kinds
    for f in (fa, fb):
        wait_until(lambda: ("slow", "1", "UNAVAILABLE", "unloaded") in repository_index(f),
                   "%s to list 'slow' unloaded" % f.name, timeout=10)
        assert ("plain", "1", "READY", "") in repository_index(f)
        status, _, out = curl(f.url + "/v2/models/slow/ready")
        assert status == 400 and "'slow' is not loaded" in json.loads(out)["error"], out
        status, _, out = http_infer(f, "slow", body)
        assert status == 503 and "unloaded" in json.loads(out)["error"], out
        assert http_infer(f, "plain", body)[0] == 200
    assert inflight(fa) == 0
    # Unloading it again does nothing; an unknown name is not loaded.
    status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/slow/unload")
    assert status == 200, out
    status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/nope/unload")
    assert status == 400 and "'nope' is not loaded" in json.loads(out)["error"], out
    # A load serves it again, on every frontend; a load of a served model does nothing.
    status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/slow/load")
    assert status == 200, out
    assert ("slow", "1", "READY", "") in repository_index(fa)
    status, _, out = http_infer(fa, "slow", body)
    assert status == 200, out
    wait_until(lambda: ("slow", "1", "READY", "") in repository_index(fb), "fb to list 'slow' READY",
               timeout=10)
    assert http_infer(fb, "slow", body)[0] == 200
    assert curl("-X", "POST", fb.url + "/v2/repository/models/slow/load")[0] == 200
    # The backend was told to free it, and the load asked it to load it anew.
    assert "model 'slow': told backend 'one'" in c.scheduler.output() and \
        "loaded model 'slow' on backend 'one'" in c.scheduler.output(), c.scheduler.output()
    # A load that cannot serve it (no backend left) leaves it unloaded and says why in the index.
    assert curl("-X", "POST", fa.url + "/v2/repository/models/slow/unload")[0] == 200
    c.backends["one"].stop(signal.SIGTERM, timeout=30)
    c.scheduler.wait_for("the backend's departure", lambda: "GPUs leave the runtime" in c.scheduler.output(),
                         timeout=30)
    status, _, out = curl("-X", "POST", fa.url + "/v2/repository/models/slow/load")
    assert status == 503 and "no backend is registered" in json.loads(out)["error"], out
    (e,) = [x for x in repository_index(fa) if x[0] == "slow"]
    assert e[2] == "UNAVAILABLE" and "a load failed: no backend is registered" in e[3], e
    assert "asked to unload model 'slow'" in c.scheduler.output() and "unloaded model 'slow'" in \
        c.scheduler.output(), c.scheduler.output()
    report = fa.stop()
    slow = report["models"]["slow"]
    assert slow["sent"] == slow["ok"] + slow["late"] + slow["dropped"] + slow["errors"], slow


# Two sub-clusters of one emulated GPU each, placed once at start.
SUBCLUSTER_REPOSITORY_CONFIG = REPOSITORY_CLUSTER_CONFIG.replace("gpus: 1", "gpus: 2") + \
    "    subclusters: {count: 2}\n"


def subcluster_models(c):
    """{sub-cluster id: the models it owns} from the scheduler's report, or None before one is written."""
    r = c.report("scheduler")
    if not r or "subclusters" not in r:
        return None
    return {x["id"]: x["models"] for x in r["subclusters"]["subclusters"]}


def wait_listed_in(c, model, home):
    """Waits for the scheduler's report to list `model` in sub-cluster `home` (of two), and not in the other."""
    owned = {}

    def placed():
        owned.update(subcluster_models(c) or {})
        return model in owned.get(home, [])

    wait_until(placed, "the scheduler's report to list '%s' in sub-cluster %d" % (model, home), timeout=10)
    assert model not in owned[1 - home], owned


def replace_b1_with_b2(c, ready, what):
    """Adds backend b2 (two emulated GPUs), waits for the scheduler's log to match every pattern of
    `ready`, then kills b1 and waits for the scheduler to lose it."""
    c.add_backend("b2", "emulated:2")
    wait_until(lambda: all(re.search(r, c.scheduler.output()) for r in ready), what, timeout=30)
    c.backends["b1"].kill()
    wait_until(lambda: re.search(r"backend 'b1' \(\S+\) lost: ", c.scheduler.output()),
               "the scheduler to lose b1", timeout=30)


def test_emulated_with_sub_clusters_an_unload_drains_its_sub_cluster_and_a_load_serves_it_again(
        tmp_path, repository_cluster):
    """With two sub-clusters (one emulated GPU each, a model placed in each),
    an unload of the model that sub-cluster 1 serves, asked while its
    requests are queued there, answers once none of them is left at the
    scheduler (its queue depth in the scheduler's /metrics is 0 at the
    answer), each request answered once; the index then lists it unloaded
    and the other model serves on; a load serves it again at once (the
    backends keep every model with sub-clusters)."""
    repo = tmp_path / "models"
    for name in ("one", "two"):
        write_emulated_model(repo, name, slo=4000, beta_ms=300)
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG)
    (f,) = c.start("explicit", backends=[("b", "emulated:2")], scheduler_extra=["--metrics", "127.0.0.1:0"])
    sched_metrics = re.search(r"metrics: listening on (http://\S+/metrics)", c.scheduler.output()).group(1)

    def queue_depth(model):
        status, text = http_get(sched_metrics)
        assert status == 200, text
        m = re.search(r'symphony_queue_depth\{model="%s"\} (\S+)' % model, text.decode())
        assert m, text
        return float(m.group(1))

    owned = {}

    def placed():
        owned.update(subcluster_models(c) or {})
        return len(owned) == 2 and all(owned.values())

    wait_until(placed, "the scheduler's report to show both sub-clusters' models", timeout=10)
    assert sorted(owned[0] + owned[1]) == ["one", "two"], owned
    (target,), (other,) = owned[1], owned[0]
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    assert http_infer(f, target, body)[0] == 200 and http_infer(f, other, body)[0] == 200
    answers = []
    lock = threading.Lock()

    def one():
        status, _, out = http_infer(f, target, body)
        with lock:
            answers.append((status, out))

    threads = [threading.Thread(target=one) for _ in range(24)]
    for t in threads:
        t.start()
    wait_until(lambda: queue_depth(target) >= 8, "requests of '%s' queued at the scheduler" % target, timeout=30)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/%s/unload" % target)
    assert status == 200, out
    assert queue_depth(target) == 0, "the unload answered before its sub-cluster ended the model's requests"
    for t in threads:
        t.join(timeout=60)
    assert len(answers) == 24, answers  # each request answered, once
    ran = 0
    for status, out in answers:
        ran += status == 200
        assert status in (200, 504) or (status in (500, 503) and (b"not loaded" in out or b"is not served" in out)), \
            (status, out)
    assert ran >= 1, answers
    wait_until(lambda: (target, "1", "UNAVAILABLE", "unloaded") in repository_index(f),
               "the index to list '%s' unloaded" % target, timeout=10)
    status, _, out = http_infer(f, target, body)
    assert status == 503 and b"unloaded" in out, out
    assert http_infer(f, other, body)[0] == 200
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/%s/load" % target)
    assert status == 200, out
    assert (target, "1", "READY", "") in repository_index(f)
    assert http_infer(f, target, body)[0] == 200
    assert "loaded model '%s' again (the backends kept it" % target in c.scheduler.output(), c.scheduler.output()
    report = f.stop()
    m = report["models"][target]
    assert m["sent"] == m["ok"] + m["late"] + m["dropped"] + m["errors"], m


def test_torch_with_sub_clusters_a_model_added_to_the_repository_loads_where_requests_are_fewest(
        tmp_path, repository_cluster):
    """Two sub-clusters, each the CPU device of one TorchScript backend, the
    start's model `linear` placed in one: a folder added after start loads
    (REST, 200), is placed in the other sub-cluster (it has had no request),
    and answers with torch's outputs, while `linear` serves on where it was."""
    need_test_model("linear.pt")
    repo = tmp_path / "models"
    write_torch_model(repo, "linear", COLD_PBTXT % 3000)
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG)
    (f,) = c.start("explicit", backends=[("cpu1", "cpu"), ("cpu2", "cpu")])
    xs = rows(2, 7)
    body = linear_body(xs)
    for _ in range(3):
        assert http_infer(f, "linear", body)[0] == 200
    subs = {}

    def owned(want):
        subs.clear()
        subs.update(subcluster_models(c) or {})
        return sorted(sum(subs.values(), [])) == want

    wait_until(lambda: owned(["linear"]), "the scheduler's report to place 'linear'", timeout=10)
    (busy,) = [j for j, models in subs.items() if models]
    write_torch_model(repo, "fresh", COLD_PBTXT % 3000)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/fresh/load")
    assert status == 200, (out, c.scheduler.output())
    assert "model 'fresh', loaded while serving, is placed in sub-cluster %d (" % (1 - busy) in \
        c.scheduler.output(), c.scheduler.output()
    for name in ("fresh", "linear"):
        status, _, out = http_infer(f, name, body)
        assert status == 200, (name, out)
        (got,) = json.loads(out)["outputs"]
        assert got["data"] == pytest.approx(flat_expected(xs), rel=1e-6)
    wait_until(lambda: owned(["fresh", "linear"]), "the scheduler's report to place 'fresh'", timeout=10)
    assert subs == {busy: ["linear"], 1 - busy: ["fresh"]}, subs
    assert ("fresh", "1", "READY", "") in repository_index(f)


def test_emulated_with_sub_clusters_a_start_model_with_an_instance_group_goes_where_its_devices_are(
        tmp_path, repository_cluster):
    """With two sub-clusters (a backend of two emulated GPUs, one in each), a
    model of the start whose instance_group selects each backend's GPU 1 is
    placed in that GPU's sub-cluster when the backend registers (the
    partitioner places the other model alone), and answers (a device runs
    only what the scheduler placed on it: a batch elsewhere would end in an
    error). The epochs (every 0.5 s) count its rate where it is, pinned, when
    they balance the other. A second backend's GPU 1 runs it too: with the
    first killed, both models still answer."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "one", slo=4000)
    write_emulated_model(repo, "pinned", slo=4000, extra="instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]")
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG.replace("{count: 2}", "{count: 2, epoch_s: 0.5}"))
    (f,) = c.start("explicit", backends=[("b1", "emulated:2")])
    m = re.search(r"model 'pinned', of the start with an instance_group, is placed in sub-cluster (\d)",
                  c.scheduler.output())
    assert m, c.scheduler.output()
    home = int(m.group(1))
    assert re.search(r"backend 'b1' \(\S+\) registered 2 devices \(.*emulated:1=GPU \d+ of sub-cluster %d" % home,
                     c.scheduler.output()), c.scheduler.output()
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    for _ in range(5):
        for name in ("one", "pinned"):
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)
    wait_listed_in(c, "pinned", home)

    def counted_where_it_is():
        assert http_infer(f, "pinned", body)[0] == 200
        r = c.report("scheduler") or {}
        return any(e.get("pinned") == ["pinned"] and e.get("rates", {}).get("pinned", 0) > 0
                   and e.get("assignment", {}).get("pinned") == home
                   for e in r.get("subclusters", {}).get("epochs", []))

    wait_until(counted_where_it_is, "an epoch to count 'pinned' in its sub-cluster", timeout=20)
    replace_b1_with_b2(c, [r"backend 'b2' \(\S+\) registered"], "the second backend to register")
    for _ in range(5):
        for name in ("one", "pinned"):
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)
    assert "refusing a batch" not in c.backends["b2"].output(), c.backends["b2"].output()
    assert c.scheduler.output().count("is placed in sub-cluster") == 1, c.scheduler.output()
    report = f.stop()
    for name in ("one", "pinned"):
        r = report["models"][name]
        assert r["errors"] == 0 and r["sent"] == r["ok"] + r["late"] + r["dropped"], (name, r)


def test_emulated_with_sub_clusters_an_instance_group_of_every_device_joins_the_epochs(
        tmp_path, repository_cluster):
    """Triton's usual instance_group, [ { kind: KIND_GPU } ], selects every
    GPU: on backends of GPUs alone it restricts nothing, so the epochs move
    such a model as one without a group (they counted it where it was
    placed, pinned, and never moved it). With a backend of two emulated GPUs
    in two sub-clusters re-partitioned every 0.5 s, an epoch lists it in its
    assignment, not pinned, beside the start's other model, and both answer
    throughout; one whose group selects GPU 1 alone stays pinned."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "one", slo=4000)
    write_emulated_model(repo, "every", slo=4000, extra="instance_group [ { kind: KIND_GPU } ]")
    write_emulated_model(repo, "pinned", slo=4000, extra="instance_group [ { kind: KIND_GPU gpus: [ 1 ] } ]")
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG.replace("{count: 2}", "{count: 2, epoch_s: 0.5}"))
    (f,) = c.start("explicit", backends=[("b1", "emulated:2")])
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    seen = {}

    def balanced():
        for name in ("one", "every", "pinned"):
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)
        r = c.report("scheduler") or {}
        for e in r.get("subclusters", {}).get("epochs", []):
            if e.get("rates", {}).get("every", 0) > 0:
                seen.update(e)
                return True
        return False

    wait_until(balanced, "an epoch to measure the rate of 'every'", timeout=20)
    assert "every" in seen["assignment"] and "one" in seen["assignment"], seen
    assert seen["pinned"] == ["pinned"], seen
    report = f.stop()
    for name in ("one", "every", "pinned"):
        r = report["models"][name]
        assert r["errors"] == 0 and r["sent"] == r["ok"] + r["late"] + r["dropped"], (name, r)


def test_emulated_with_sub_clusters_an_instance_group_of_some_devices_is_moved_by_the_epochs(
        tmp_path, repository_cluster):
    """A backend of four emulated GPUs in two sub-clusters (0 and 2 in one, 1
    and 3 in the other), re-partitioned every 0.5 s: a model whose
    instance_group selects GPUs 0 and 1 has a device in each, so the epochs
    move it like the others (they counted it where it was placed, pinned, and
    never moved it). Placed beside 'one' (500 + 600 MiB, over a backend's
    1000), an epoch moves it beside 'two' (100 MiB: 600 | 600, the rates of
    'one' and 'two' equal), its GPU there confirms the load, and every model
    answers before and after, each batch on a device the scheduler placed it
    on."""
    repo = tmp_path / "models"
    for name in ("one", "two"):
        write_emulated_model(repo, name, slo=4000)
    write_emulated_model(repo, "g", slo=4000, extra="instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] } ]")
    table = tmp_path / "memory.csv"
    table.write_text("name,static_mib,dynamic_mib\none,600,0\ntwo,100,0\ng,500,0\n")
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG.replace(
        "{count: 2}", '{count: 2, epoch_s: 0.5, memory_cap_mib: 1000, model_memory: "%s"}' % table))
    (f,) = c.start("explicit", backends=[("b1", "emulated:4")])
    m = re.search(r"model 'g', of the start with an instance_group, is placed in sub-cluster (\d)",
                  c.scheduler.output())
    assert m, c.scheduler.output()
    home = int(m.group(1))
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    status, _, out = http_infer(f, "g", body)
    assert status == 200, out
    moved = {}

    def moved_by_an_epoch():
        for name in ("one", "two"):
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)
        r = c.report("scheduler") or {}
        for e in r.get("subclusters", {}).get("epochs", []):
            for mv in e.get("moves", []):
                if mv["model"] == "g" and mv["loaded_after_ms"] is not None:
                    moved.update(e)
                    return True
        return False

    wait_until(moved_by_an_epoch, "an epoch to move 'g'", timeout=30)
    # Epoch 0 put 'one' (the larger) in sub-cluster 0 and 'two' in 1, and g
    # went to the lowest of two sub-clusters of one model each.
    assert home == 0 and moved["assignment"] == {"one": 0, "two": 1, "g": 1}, (moved, c.scheduler.output())
    assert "g" not in moved["pinned"] and "g" not in moved["permitted"], moved
    assert "has no row" not in c.scheduler.output(), c.scheduler.output()
    for _ in range(5):
        for name in ("one", "two", "g"):
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)
    assert "refusing a batch" not in c.backends["b1"].output(), c.backends["b1"].output()
    report = f.stop()
    for name in ("one", "two", "g"):
        r = report["models"][name]
        assert r["errors"] == 0 and r["sent"] == r["ok"] + r["late"] + r["dropped"], (name, r)


def test_emulated_with_sub_clusters_a_model_loaded_while_serving_joins_the_epochs(tmp_path, repository_cluster):
    """With two sub-clusters re-partitioned every 0.5 s, a model loaded while
    the cluster serves (held by its one backend) is placed in one and joins
    the epochs: they measure its rate beside the start's models (the report's
    epochs list it), and every model answers throughout."""
    repo = tmp_path / "models"
    for name in ("one", "two"):
        write_emulated_model(repo, name, slo=4000)
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG.replace("{count: 2}", "{count: 2, epoch_s: 0.5}"))
    (f,) = c.start("explicit", backends=[("b1", "emulated:2")])
    write_emulated_model(repo, "three", slo=4000)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/three/load")
    assert status == 200, out
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    measured = {}

    def counted():
        for name in ("one", "two", "three"):
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)
        r = c.report("scheduler") or {}
        for e in r.get("subclusters", {}).get("epochs", []):
            if e.get("rates", {}).get("three", 0) > 0:
                measured.update(e)
                return True
        return False

    wait_until(counted, "an epoch to measure the rate of 'three'", timeout=20)
    assert set(measured["rates"]) == {"one", "two", "three"}, measured
    assert "three" in measured["assignment"], measured
    assert "no partitioner" not in c.scheduler.output(), c.scheduler.output()
    report = f.stop()
    m = report["models"]["three"]
    assert m["errors"] == 0 and m["sent"] == m["ok"] + m["late"] + m["dropped"], m


def test_emulated_with_sub_clusters_a_model_loaded_while_serving_takes_its_memory_row(tmp_path, repository_cluster):
    """A model that is not in the repository at start, loaded while serving,
    joins the epochs with its row of subclusters.model_memory (it was counted
    as using no memory), a row added to the file after the scheduler started
    (the table is read again at each load). 'one' and 'three' take 600 MiB
    each and a backend holds 1000: with 'two' taking most of the requests, the
    balance of rates alone puts 'one' and 'three' together; with the rows,
    every epoch keeps them apart."""
    repo = tmp_path / "models"
    for name in ("one", "two"):
        write_emulated_model(repo, name, slo=4000)
    table = tmp_path / "memory.csv"
    table.write_text("name,static_mib,dynamic_mib\none,600,0\ntwo,100,0\n")
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG.replace(
        "{count: 2}", '{count: 2, epoch_s: 0.5, memory_cap_mib: 1000, model_memory: "%s"}' % table))
    (f,) = c.start("explicit", backends=[("b1", "emulated:2")])
    write_emulated_model(repo, "three", slo=4000)
    table.write_text("name,static_mib,dynamic_mib\none,600,0\ntwo,100,0\nthree,600,0\n")
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/three/load")
    assert status == 200, out
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    seen = []

    def epochs_with_three():
        for name in ("two",) * 6 + ("one", "three"):
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)
        r = c.report("scheduler") or {}
        seen[:] = [e for e in r.get("subclusters", {}).get("epochs", [])
                   if e.get("rates", {}).get("three", 0) > 0 and "three" in e.get("assignment", {})]
        return len(seen) >= 3

    wait_until(epochs_with_three, "three epochs to measure the rate of 'three'", timeout=30)
    for e in seen:
        assert e["assignment"]["one"] != e["assignment"]["three"], (e, c.scheduler.output())
    assert "has no row" not in c.scheduler.output(), c.scheduler.output()


def test_emulated_with_sub_clusters_a_new_model_loads_into_one_and_a_backend_that_joins_runs_it(
        tmp_path, repository_cluster):
    """With two sub-clusters (a backend of two emulated GPUs, one in each), a
    folder the cluster did not serve at start loads (REST, 200), is READY, and
    is placed in one sub-cluster (the scheduler's log and report say which),
    whose device runs its batches (a device runs only what the scheduler
    placed on it: a batch elsewhere would end in an error). A second backend
    that registers afterwards is asked to load it and, once the first is
    killed, runs it in the same sub-cluster; the start's models serve on. An
    unload has the backend free it (unlike the start's models, which the
    backends keep), and a load reads it again and serves it in the same
    sub-cluster. Its new files load and switch (into a sub-cluster again), as
    do new files of a model of the start (placed where the version they
    replace was, which drains there).
    A model whose instance_group selects one GPU of each backend goes to
    their sub-cluster, and runs on the second backend too."""
    repo = tmp_path / "models"
    for name in ("one", "two"):
        write_emulated_model(repo, name, slo=4000)
    c = repository_cluster(repo, SUBCLUSTER_REPOSITORY_CONFIG)
    (f,) = c.start("explicit", backends=[("b1", "emulated:2")])
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    for _ in range(3):
        assert http_infer(f, "one", body)[0] == 200 and http_infer(f, "two", body)[0] == 200
    write_emulated_model(repo, "three", slo=4000)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/three/load")
    assert status == 200, out
    assert ("three", "1", "READY", "") in repository_index(f)
    m = re.search(r"model 'three', loaded while serving, is placed in sub-cluster (\d)", c.scheduler.output())
    assert m, c.scheduler.output()
    home = int(m.group(1))
    for _ in range(5):
        status, _, out = http_infer(f, "three", body)
        assert status == 200, out
    # New files: a model loaded while serving switches to them, into a sub-cluster again; one of
    # the start is refused, saying what to do, and serves on.
    (repo / "three" / "config.pbtxt").write_text(GROUPED_PBTXT % (5000, "# changed"))
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/three/load")
    assert status == 200, (status, out)
    assert "switched model 'three' to its new files" in c.scheduler.output(), c.scheduler.output()
    assert c.scheduler.output().count("model 'three', loaded while serving, is placed in sub-cluster") == 2
    assert ("three", "1", "READY", "") in repository_index(f)
    assert http_infer(f, "three", body)[0] == 200
    (repo / "one" / "config.pbtxt").write_text(GROUPED_PBTXT % (5000, "# changed"))
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/one/load")
    assert status == 200, (status, out)
    assert "switched model 'one' to its new files" in c.scheduler.output(), c.scheduler.output()
    assert re.search(r"model 'one', loaded while serving, is placed in sub-cluster \d \(where the versions it "
                     r"replaces are\)", c.scheduler.output()), c.scheduler.output()
    assert ("one", "1", "READY", "") in repository_index(f)
    assert http_infer(f, "one", body)[0] == 200
    wait_until(lambda: "(replaced by a reload) has no request left" in c.scheduler.output(),
               "the replaced version of 'one' to drain", timeout=10)
    wait_listed_in(c, "three", home)
    # An instance_group of each backend's GPU `home` (in sub-cluster `home`, the busier one, with
    # more models): placed there, not where the fewest requests are.
    write_emulated_model(repo, "grouped", slo=4000,
                         extra="instance_group [ { kind: KIND_GPU gpus: [ %d ] } ]" % home)
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/grouped/load")
    assert status == 200, (status, out)
    assert re.search(r"model 'grouped', loaded while serving, is placed in sub-cluster %d " % home,
                     c.scheduler.output()), c.scheduler.output()
    assert http_infer(f, "grouped", body)[0] == 200
    replace_b1_with_b2(c, [r"backend 'b2' \(\S+\) runs model '%s' too" % m for m in ("three", "one")],
                       "the second backend to run 'three' and the new 'one'")
    for name in ("three", "one", "two", "grouped"):
        status, _, out = http_infer(f, name, body)
        assert status == 200, (name, out)
    assert "refusing a batch" not in c.backends["b2"].output(), c.backends["b2"].output()
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/three/unload")
    assert status == 200, out
    status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/three/load")
    assert status == 200, out
    assert c.scheduler.output().count("asked to load model 'three' from") == 2, c.scheduler.output()
    assert re.search(r"model 'three', loaded while serving, is placed in sub-cluster %d" % home,
                     c.scheduler.output().split("asked to load model 'three' from")[-1]), c.scheduler.output()
    assert http_infer(f, "three", body)[0] == 200
    report = f.stop()
    m = report["models"]["three"]
    assert m["sent"] == m["ok"] + m["late"] + m["dropped"] + m["errors"] and m["errors"] == 0, m


def test_emulated_opaque_model_answers_with_the_hash_of_its_input(emulated):
    f = emulated.start_frontend("fe")
    f.wait_ready()
    tally = Tally()
    warm_up(f, tally)
    meta = json.loads(curl(f.url + "/v2/models/fast")[2])
    assert meta["inputs"] == [{"name": "input", "datatype": "BYTES", "shape": [-1, 1]}]
    for payload in ("hello", "x" * 64):
        status, hdrs, out = http_infer(f, "fast", {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1],
                                                               "data": [payload]}]}, tally)
        assert status == 200, out
        (o,) = json.loads(out)["outputs"]
        assert o["datatype"] == "UINT8" and o["shape"] == [16]
        assert bytes(o["data"]) == struct.pack("<Q", fnv1a64(payload.encode())) + bytes(8)
    pb, pb_grpc = grpc_stubs()
    with grpc.insecure_channel(f.grpc) as ch:
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        r = pb.ModelInferRequest(model_name="fast")
        r.inputs.add(name="input", datatype="BYTES", shape=[1, 1])
        r.raw_input_contents.append(struct.pack("<I", 3) + b"abc")
        resp, call = stub.ModelInfer.with_call(r, timeout=20)
        tally.add("fast", KINDS[dict(call.trailing_metadata())["symphony-outcome"]])
        assert list(resp.outputs[0].shape) == [1, 16]
        assert resp.raw_output_contents[0] == struct.pack("<Q", fnv1a64(b"abc")) + bytes(8)
        assert json.loads(curl(f.url + "/v2/models/fast")[2])["outputs"] == [
            {"name": "output", "datatype": "UINT8", "shape": [-1, 16]}]
        # An empty element is no input at all: 400 naming it.
        r = pb.ModelInferRequest(model_name="fast")
        r.inputs.add(name="input", datatype="BYTES", shape=[1])
        r.raw_input_contents.append(struct.pack("<I", 0))
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(r, timeout=20)
        tally.add("fast", "errors")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "empty input" in e.value.details()
    # Larger than --max-input-bytes (default 4096): 400 naming the option.
    status, _, out = http_infer(f, "fast", {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1],
                                                        "data": ["y" * 5000]}]}, tally)
    assert status == 400 and "--max-input-bytes" in json.loads(out)["error"], out
    report = f.stop()
    check_report_equals(report, tally, "fe")
    assert report["models"]["fast"]["errors"] == 2


def stats_rest(f, path="/v2/models/stats"):
    """{name: entry} of the statistics extension over REST (curl)."""
    status, _, body = curl(f.url + path)
    assert status == 200, body
    return {m["name"]: m for m in json.loads(body)["model_stats"]}


def stats_grpc(f, name=""):
    """{name: entry} of ModelStatistics (grpcio), as protobuf messages."""
    pb, pb_grpc = grpc_stubs()
    with grpc.insecure_channel(f.grpc) as ch:
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        return {m.name: m for m in stub.ModelStatistics(pb.ModelStatisticsRequest(name=name), timeout=20).model_stats}


def test_emulated_statistics_are_the_schedulers_and_exact_across_a_frontend_restart(emulated):
    """The statistics extension on `symphony frontend` (curl and grpcio):
    after N answered requests the success count is N, on REST and gRPC,
    equal to the frontend's own report; a restarted frontend reports the
    same numbers (they are the scheduler's, not the frontend's memory), and
    a second frontend's requests add to them. An unknown model or version
    answers as on `serve` (404 / NOT_FOUND, "unknown model")."""
    f = emulated.start_frontend("fe1")
    f.wait_ready()
    status, _, body = curl(f.url + "/v2")
    assert status == 200 and "statistics" in json.loads(body)["extensions"], body
    before = stats_rest(f)
    assert sorted(before) == ["busy", "fast", "slow"], before
    for m in before.values():  # a fresh scheduler: nothing yet
        assert m["version"] == "1" and m["inference_stats"]["success"]["count"] == 0, m
        assert m["inference_stats"]["fail"]["count"] == 0 and m["execution_count"] == 0, m
        assert m["last_inference"] == 0 and m["batch_stats"] == [], m

    tally = Tally()
    warm_up(f, tally)  # may drop a first request or a few (expired): counted as failed
    t0 = time.time()
    n_rest, n_grpc = 10, 5
    body = {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1], "data": ["stats"]}]}
    for _ in range(n_rest):
        status, _, out = http_infer(f, "fast", body, tally)
        assert status == 200, out
    pb, pb_grpc = grpc_stubs()
    with grpc.insecure_channel(f.grpc) as ch:
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        for _ in range(n_grpc):
            r = pb.ModelInferRequest(model_name="fast")
            r.inputs.add(name="input", datatype="BYTES", shape=[1, 1])
            r.raw_input_contents.append(struct.pack("<I", 3) + b"abc")
            _, call = stub.ModelInfer.with_call(r, timeout=20)
            tally.add("fast", KINDS[dict(call.trailing_metadata())["symphony-outcome"]])
    counts = tally.by_model["fast"]
    answered, dropped = counts["ok"] + counts["late"], counts["dropped"]
    assert answered >= n_rest + n_grpc and counts["errors"] == 0, counts

    # The scheduler counts a request when its backend's BatchDone arrives,
    # which may be just after the answer reached the client: wait (bounded).
    wait_until(lambda: stats_rest(f)["fast"]["inference_stats"]["success"]["count"] >= answered,
               "the scheduler to count %d successful requests" % answered, timeout=10)
    every = stats_rest(f)
    fast = every["fast"]
    st = fast["inference_stats"]
    assert st["success"]["count"] == answered and st["fail"]["count"] == dropped, (fast, counts)
    assert fast["inference_count"] == answered
    assert st["queue"]["count"] == answered and st["compute_infer"]["count"] == answered
    assert st["success"]["ns"] > 0 and st["queue"]["ns"] > 0 and st["compute_infer"]["ns"] > 0
    assert st["success"]["ns"] >= st["queue"]["ns"] and st["success"]["ns"] >= st["compute_infer"]["ns"]
    assert st["compute_input"] == {"count": 0, "ns": 0} and st["compute_output"] == {"count": 0, "ns": 0}
    assert sum(b["compute_infer"]["count"] for b in fast["batch_stats"]) == fast["execution_count"] >= 1
    assert sum(b["batch_size"] * b["compute_infer"]["count"] for b in fast["batch_stats"]) == answered
    assert t0 * 1000 - 1000 <= fast["last_inference"] <= time.time() * 1000 + 1000
    assert every["slow"]["inference_stats"]["success"]["count"] == 0
    # One model, one version: the same numbers.
    for path in ("/v2/models/fast/stats", "/v2/models/fast/versions/1/stats"):
        one = stats_rest(f, path)
        assert list(one) == ["fast"] and one["fast"] == fast, (path, one)
    # gRPC: the same numbers.
    g = stats_grpc(f, "fast")
    assert list(g) == ["fast"] and g["fast"].version == "1"
    gs = g["fast"].inference_stats
    assert (gs.success.count, gs.success.ns, gs.fail.count, gs.queue.ns, gs.compute_infer.ns) == (
        answered, st["success"]["ns"], dropped, st["queue"]["ns"], st["compute_infer"]["ns"])
    assert g["fast"].inference_count == answered and g["fast"].execution_count == fast["execution_count"]
    assert sorted(stats_grpc(f)) == ["busy", "fast", "slow"]
    # Unknown model or version: what `serve` answers.
    status, _, out = curl(f.url + "/v2/models/nope/stats")
    assert status == 404 and "unknown model 'nope'" in json.loads(out)["error"], out
    status, _, out = curl(f.url + "/v2/models/fast/versions/3/stats")
    assert status == 404, out
    with grpc.insecure_channel(f.grpc) as ch:
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelStatistics(pb.ModelStatisticsRequest(name="nope"), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND and "unknown model 'nope'" in e.value.details()

    # The frontend's own report says the same.
    report = f.stop()
    check_report_equals(report, tally, "fe1")
    assert report["models"]["fast"]["ok"] + report["models"]["fast"]["late"] == answered

    # A restarted frontend: the same numbers, exactly (nothing was sent meanwhile).
    f2 = emulated.start_frontend("fe2")
    f2.wait_ready()
    again = stats_rest(f2)
    assert again["fast"] == fast, (again["fast"], fast)
    assert stats_grpc(f2, "fast")["fast"].inference_stats.success.count == answered
    # Its own requests add to them: the statistics are every frontend's.
    tally2 = Tally()
    for _ in range(3):
        status, _, out = http_infer(f2, "fast", body, tally2)
        assert status in (200, 504), out  # the first through a new frontend may expire
    c2 = tally2.by_model["fast"]
    want = answered + c2["ok"] + c2["late"]
    wait_until(lambda: stats_rest(f2)["fast"]["inference_stats"]["success"]["count"] >= want,
               "the scheduler to count %d successful requests" % want, timeout=10)
    st2 = stats_rest(f2)["fast"]["inference_stats"]
    assert st2["success"]["count"] == want and st2["fail"]["count"] == dropped + c2["dropped"], (st2, c2)
    report2 = f2.stop()
    check_report_equals(report2, tally2, "fe2")
    assert st2["success"]["count"] == sum(r["models"]["fast"]["ok"] + r["models"]["fast"]["late"]
                                          for r in (report, report2))


# `prio`: two priority levels (the default the lowest), one emulated GPU, at
# most 2 requests of 20 ms per batch: ~100 r/s, ~30 requests within its SLO.
PRIORITY_CONFIG = """
    gpus: 1
    policy: deferred
    workload: {rate: 10}
    delays: {safety_margin_ms: 30}
    models:
      - {name: fast, alpha_ms: 0.05, beta_ms: 1, slo_ms: 100, max_batch: 16}
      - {name: prio, alpha_ms: 0, beta_ms: 20, slo_ms: 300, max_batch: 2, priority_levels: 2,
         default_priority_level: 2}
    cluster:
      token: "%s"
""" % TOKEN


def test_emulated_a_versions_statistics_add_up_across_reloads_unloads_and_frontend_restarts(
        tmp_path, repository_cluster):
    """Statistics are one account per (model, version) since the scheduler
    started, as on serve: a reload (the version's config changed: it runs
    under a new model id) and an unload followed by a load go on counting
    where the version was, and a restarted frontend reports exactly the
    same numbers (REST and gRPC)."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain")
    c = repository_cluster(repo)
    (f,) = c.start("explicit", backends=[("one", "emulated:1")])
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    sent = [0]

    def send(n):
        for _ in range(n):
            status, _, out = http_infer(f, "plain", body)
            assert status == 200, out
        sent[0] += n

    def counted(front):
        """plain's statistics once the scheduler has counted every answer (it may lag a moment)."""
        wait_until(lambda: stats_rest(front)["plain"]["inference_stats"]["success"]["count"] >= sent[0],
                   "the scheduler to count %d requests" % sent[0], timeout=10)
        m = stats_rest(front)["plain"]
        assert m["version"] == "1", m
        assert m["inference_stats"]["success"]["count"] == m["inference_count"] == sent[0], m
        assert m["inference_stats"]["fail"]["count"] == 0, m
        assert sum(b["batch_size"] * b["compute_infer"]["count"] for b in m["batch_stats"]) == sent[0], m
        assert sum(b["compute_infer"]["count"] for b in m["batch_stats"]) == m["execution_count"], m
        return m

    def control(op):
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/plain/" + op)
        assert status == 200, (op, out, c.scheduler.output())

    send(5)
    first = counted(f)
    # A reload: version 1's config changed, so it runs under a new model id.
    (repo / "plain" / "config.pbtxt").write_text(GROUPED_PBTXT % (3000, "# reloaded"))
    control("load")
    assert "switched model 'plain' to its new files" in c.scheduler.output(), c.scheduler.output()
    send(4)
    after_reload = counted(f)
    assert after_reload["inference_stats"]["success"]["ns"] > first["inference_stats"]["success"]["ns"]
    # Unloaded, then loaded again.
    control("unload")
    control("load")
    send(2)
    m = counted(f)
    assert sent[0] == 11
    # A restarted frontend: the same numbers, to the nanosecond.
    f.stop()
    (f,) = c.add_frontends(["fb"])
    assert stats_rest(f)["plain"] == m
    g = stats_grpc(f, "plain")["plain"].inference_stats
    assert (g.success.count, g.success.ns, g.fail.count) == (11, m["inference_stats"]["success"]["ns"], 0)

def test_emulated_a_frontend_serves_models_loaded_since_beyond_its_runs_of_slots(tmp_path, repository_cluster):
    """The frontend's input slots go to model ids in runs of 64, and its pool
    holds one run per model of its start beside --max-inflight. With
    --max-inflight 1 (two runs), four models loaded since the start, each
    under an id of its own, are served in turn, every request 200: a run
    whose id has no request in flight goes to the next model (it was held
    for good: the third id's requests were answered 503, no slot free)."""
    repo = tmp_path / "models"
    write_emulated_model(repo, "plain")
    c = repository_cluster(repo)
    c.start("explicit", backends=[("one", "emulated:1")], frontends=())
    f = c.start_frontend("fa", extra=c.args + ["--max-inflight", "1"])
    f.wait_ready()
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    names = ["plain"]
    for i in range(4):
        names.append("since%d" % i)
        write_emulated_model(repo, names[-1])
        status, _, out = curl("-X", "POST", f.url + "/v2/repository/models/%s/load" % names[-1])
        assert status == 200, (out, c.scheduler.output())
        for name in names:
            status, _, out = http_infer(f, name, body)
            assert status == 200, (name, out)


def test_emulated_priorities_reach_the_scheduler_which_sheds_the_low_one_first():
    """A request's `priority` parameter travels frontend -> scheduler: one beyond
    the model's priority_levels is refused at the frontend with 400 /
    INVALID_ARGUMENT naming the levels; under a burst ~13 times what the model
    serves within its SLO, the high priority (1) is answered ok more often than
    the low one (2), and every request gets exactly one response."""
    c = Cluster(PRIORITY_CONFIG)
    try:
        c.start_scheduler()
        c.start_backend("b1", "emulated:1")
        f = c.start_frontend("fe")
        f.wait_ready()
        tally = Tally()
        warm_up(f, tally)
        body = {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1], "data": ["p"]}]}
        for priority, says in ((3, "priority 3 is beyond model 'prio''s priority_levels 2"),
                               ("high", "parameter 'priority' must be an integer")):
            status, _, out = http_infer(f, "prio", dict(body, parameters={"priority": priority}), tally)
            assert status == 400 and says in json.loads(out)["error"], out
        for priority in (0, 1, 2):
            status, hdrs, out = http_infer(f, "prio", dict(body, parameters={"priority": priority}), tally)
            assert status == 200, out
        pb, pb_grpc = grpc_stubs()

        def request(priority):
            r = pb.ModelInferRequest(model_name="prio")
            r.inputs.add(name="input", datatype="BYTES", shape=[1, 1])
            r.raw_input_contents.append(struct.pack("<I", 1) + b"q")
            if priority is not None:
                r.parameters["priority"].uint64_param = priority
            return r

        n = 200
        with grpc.insecure_channel(f.grpc) as ch:
            stub = pb_grpc.GRPCInferenceServiceStub(ch)
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelInfer(request(5), timeout=20)
            tally.add("prio", "errors")
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
            assert "priority 5 is beyond model 'prio''s priority_levels 2" in e.value.details()
            # The burst: high and low alternating, all in flight at once.
            calls = []
            for _ in range(n):
                calls.append((1, stub.ModelInfer.future(request(1), timeout=30)))
                calls.append((2, stub.ModelInfer.future(request(2), timeout=30)))
            ok = {1: 0, 2: 0}
            ended = {1: 0, 2: 0}
            for p, call in calls:
                try:
                    resp = call.result(timeout=60)
                except grpc.RpcError as err:
                    outcome = dict(err.trailing_metadata() or ()).get("symphony-outcome")
                    tally.add("prio", kind_of(err.code(), outcome))
                else:
                    outcome = resp.parameters["outcome"].string_param
                    tally.add("prio", KINDS[outcome])
                    ok[p] += outcome == "ok"
                ended[p] += 1
        print("ok by priority:", ok)
        assert ended == {1: n, 2: n}
        assert ok[1] > ok[2], "ok by priority: %s" % ok
        assert ok[1] > 0
        report = f.stop()
        check_report_equals(report, tally, "fe")
        # `symphony loadgen` (a frontend of its own) offers ~3x what `prio`
        # serves, priorities 1 and 2 by equal shares: the high one is served
        # at a higher rate, and each priority's requests end once.
        r = subprocess.run([CLI, "loadgen", "--config", c.config, "--scheduler", c.address(), "--rate", "600",
                            "--duration", "3", "--warmup", "0.5", "--priority", "1:1,2:1", "--quiet", "--json", "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        lg = json.loads(r.stdout)["models"]["prio"]["by_priority"]
        print("loadgen's by_priority:", {p: (x["sent"], x["ok"]) for p, x in lg.items()})
        for x in lg.values():
            assert x["sent"] == x["ok"] + x["late"] + x["dropped"] + x["errors"] > 0, lg
        assert lg["1"]["ok"] / lg["1"]["sent"] > lg["2"]["ok"] / lg["2"]["sent"], lg
    finally:
        c.stop_all()
    # The scheduler counts the requests by priority, and ended each it accepted once.
    by = c.report("scheduler")["by_priority"]["prio"]
    print("the scheduler's by_priority:", by)
    for level in ("1", "2"):
        x = by[level]
        assert x["accepted"] == x["ok"] + x["late"] + x["dropped"] + x["errors"], by
    assert by["1"]["ok"] > by["2"]["ok"], by


ADMISSION_CONFIG = """
    gpus: 1
    policy: deferred
    workload: {rate: 10}
    models:
      # l(8) = 18 ms: about 440 requests a second within the 100 ms SLO.
      - {name: m, alpha_ms: 1, beta_ms: 10, slo_ms: 100, max_batch: 8}
    cluster:
      token: "%s"
      models:
        m: {input: "uint8[8]", output: "uint8[16]"}
""" % TOKEN


def test_emulated_frontends_refuse_with_the_schedulers_admission_under_overload():
    """The scheduler sends its frontends its models' admission tests; under
    overload a frontend refuses with them at once (`overload`, 429) what the
    scheduler would refuse a round trip later. Below capacity nothing is
    refused anywhere; at ~5x, `symphony loadgen` (the cluster client) and
    the protocol frontend each refuse requests themselves, every request
    ends once, and the scheduler still serves. The scheduler times each
    refusal it sends itself, once: its histogram's count in /metrics and
    its report's refusal_latency_ms count are its refusals on arrival."""
    c = Cluster(ADMISSION_CONFIG)
    try:
        sched = c.start_scheduler(extra=["--metrics", "127.0.0.1:0"])
        sched.wait_for("its metrics address", lambda: "metrics: listening on" in sched.output(), timeout=10)
        sched_metrics = re.search(r"metrics: listening on (http://\S+/metrics)", sched.output()).group(1)
        c.start_backend("b1", "emulated:1")

        def loadgen(rate):
            r = subprocess.run([CLI, "loadgen", "--config", c.config, "--scheduler", c.address(), "--rate",
                                str(rate), "--duration", "3", "--warmup", "0.5", "--quiet", "--json", "-"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            j = json.loads(r.stdout)
            cl = j["client"]
            assert cl["in_flight_at_end"] == 0, cl
            assert cl["sent"] == cl["ok"] + cl["late"] + cl["dropped"] + cl["errors"], cl
            return j

        below = loadgen(130)  # ~0.3x
        print("0.3x:", below["client"])
        assert below["client"]["admission_refused"] == 0, below["client"]
        assert below["client"].get("dropped_by_reason", {}).get("overload", 0) == 0, below["client"]
        over = loadgen(2200)  # ~5x
        cl = over["client"]
        print("5x:", cl)
        assert cl["admission_refused"] > 0, cl
        assert cl["admission_refused"] <= cl["dropped_by_reason"]["overload"], cl
        assert cl["ok"] > 0, cl

        f = c.start_frontend("fe")
        f.wait_ready()
        out = os.path.join(c.dir, "load.json")
        r = subprocess.run([CLI, "load", "--url", "grpc://" + f.grpc, "--model", "m", "--rate", "2200",
                            "--duration", "3", "--warmup", "0.5", "--drain", "5", "--quiet", "--json", out],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        ld = read_json(out)
        m = ld["models"]["m"]
        print("through the frontend at 5x:", {k: ld[k] for k in ("sent", "ok", "late", "dropped", "errors")},
              m.get("dropped_by_reason"))
        assert ld["errors"] == 0, ld
        assert ld["ok"] > 0 and m["dropped_by_reason"]["overload"] > 0, ld
        report = f.stop()
        assert report["client"]["admission_refused"] > 0, report["client"]
        assert report["client"]["admission_refused"] <= report["client"]["dropped_by_reason"]["overload"]
        # The frontend times each refusal it answers, its own and the
        # scheduler's: from its parsed request to its answer.
        fm = report["models"]["m"]
        refused_here = sum(fm["dropped_by_reason"].get(r, 0)
                           for r in ("overload", "queue_full", "infeasible", "front_inflight"))
        assert fm["front_refusal_latency_ms"]["count"] == refused_here > 0, fm

        def scheduler_refusals():
            """(refused on arrival as counted, refusals timed) from the scheduler's /metrics."""
            status, body = http_get(sched_metrics)
            assert status == 200, body
            t = body.decode()
            counted = sum(float(v) for v in re.findall(
                r'^symphony_requests_dropped_total\{model="m",reason="(?:overload|queue_full|infeasible)"\} (\S+)$',
                t, re.M))
            counted += float(re.search(r'^symphony_scheduler_requests_refused_total\{reason="no_slot"\} (\S+)$',
                                       t, re.M).group(1))
            timed = re.search(r'^symphony_refusal_latency_seconds_count\{model="m"\} (\S+)$', t, re.M)
            return counted, float(timed.group(1)) if timed else None

        def timed_once():
            counted, timed = scheduler_refusals()
            return counted == timed

        # Each refusal is timed once it is sent (the frontend may read it just before).
        wait_until(timed_once, "the scheduler's refusals timed, once each", 10)
        print("the scheduler's refusals (counted, timed):", scheduler_refusals())
    finally:
        c.stop_all()
    # The scheduler ended each request it accepted once, and timed each of
    # its refusals on arrival once.
    s = c.report("scheduler")
    print("the scheduler's requests:", {k: s[k] for k in ("submitted", "ok", "late", "dropped", "errors")
                                        if k in s}, "refusal latency:", s["refusal_latency_ms"])
    drops = s["at_scheduler"]["dropped_by_reason"]
    refused = sum(drops.get(r, 0) for r in ("overload", "queue_full", "infeasible")) + s["refused_requests"]["no_slot"]
    timed = s["refusal_latency_ms"]["m"]
    assert refused > 0, s["at_scheduler"]
    assert timed["count"] == refused, (timed, s["at_scheduler"], s["refused_requests"])
    assert 0 < timed["p50"] <= timed["p99"] <= timed["max"], timed


def slow_request(pb):
    """One sample of zeros for `slow`, as a gRPC request."""
    r = pb.ModelInferRequest(model_name="slow")
    r.inputs.add(name="input", datatype="FP32", shape=[1, 4])
    r.raw_input_contents.append(b"\0" * 16)
    return r


def test_emulated_a_generous_budget_adds_no_waiting(emulated):
    """`slow` (SLO 4 s, deferred) holds a lone request ~3.8 s waiting for
    company. A gRPC deadline of 30 s is the client's upper limit, not a target:
    the scheduler plans against the SLO, so the answer comes after ~4 s, not
    after ~29.8 s, and counts ok."""
    f = emulated.start_frontend("fe")
    f.wait_ready()
    pb, pb_grpc = grpc_stubs()
    r = slow_request(pb)
    with grpc.insecure_channel(f.grpc) as ch:
        t0 = time.monotonic()
        resp = pb_grpc.GRPCInferenceServiceStub(ch).ModelInfer(r, timeout=30)
        took = time.monotonic() - t0
    assert resp.parameters["outcome"].string_param == "ok"
    assert took < 15, "answered after %.1f s: planned against the 30 s budget, not the 4 s SLO" % took
    report = f.stop()
    assert report["models"]["slow"]["ok"] == 1, report["models"]["slow"]


def test_emulated_a_cancelled_queued_request_ends_dropped_and_never_runs(emulated):
    f = emulated.start_frontend("fe")
    f.wait_ready()
    pb, pb_grpc = grpc_stubs()
    r = slow_request(pb)
    with grpc.insecure_channel(f.grpc) as ch:
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        fut = stub.ModelInfer.future(r, timeout=30)
        wait_until(lambda: inflight(f) == 1, "the request inside the frontend", 10)
        assert not fut.done()  # queued: deferred waits for company
        fut.cancel()
    wait_until(lambda: inflight(f) == 0, "the frontend to end the cancelled call", 10)
    # A closed HTTP connection cancels too: curl sends, and is killed once the
    # frontend holds its request.
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}]})
    curl_hung_up_once_held(f.url + "/v2/models/slow/infer", body.encode(), lambda: inflight(f) == 1,
                           lambda pred, what: wait_until(pred, what, 10))
    wait_until(lambda: 'reason="cancelled"} 2' in metric_lines(f), "two cancelled requests in /metrics", 10)
    report = f.stop()
    slow = report["models"]["slow"]
    assert slow["dropped_by_reason"] == {"cancelled": 2} and slow["sent"] == 2, slow
    assert report["client"]["cancels"] == 2
    emulated.scheduler.stop()
    sched = emulated.report("scheduler")
    assert sched["cancels"] == {"received": 2, "handed_to_runtime": 2}, sched["cancels"]
    assert sched["at_scheduler"]["dropped_by_reason"] == {"cancelled": 2}
    assert emulated.backends["b1"].stop() == 0
    assert emulated.report("b1")["batches"] == 0  # neither ran


def test_emulated_a_cancelled_request_of_k_samples_withdraws_every_sample(emulated):
    """[3, 4] to `slow` (deferred: it waits for company) is three requests at
    the scheduler; a closed connection withdraws all three, none runs, and
    the frontend counts one request, dropped (cancelled)."""
    f = emulated.start_frontend("fe")
    f.wait_ready()
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [3, 4], "data": [0] * 12}]})
    curl_hung_up_once_held(f.url + "/v2/models/slow/infer", body.encode(), lambda: inflight(f) == 1,
                           lambda pred, what: wait_until(pred, what, 10))
    wait_until(lambda: inflight(f) == 0, "the frontend to end the cancelled request", 10)
    report = f.stop()
    slow = report["models"]["slow"]
    assert slow["dropped_by_reason"] == {"cancelled": 1} and slow["sent"] == 1, slow
    emulated.scheduler.stop()
    sched = emulated.report("scheduler")
    assert sched["at_scheduler"]["dropped_by_reason"] == {"cancelled": 3}, sched["at_scheduler"]
    assert emulated.backends["b1"].stop() == 0
    assert emulated.report("b1")["batches"] == 0


class Load:
    """Closed-loop clients (http.client keep-alive and grpcio) against frontends,
    one thread each, recording every call's one response by frontend and model."""

    def __init__(self, frontends, model, body, grpc_request, pause=0.01):
        self.stop_flag = threading.Event()
        self.tallies = {f.name: Tally() for f in frontends}
        self.calls = {f.name: 0 for f in frontends}
        self.no_response = []  # calls that ended without a response: must stay empty
        self.errors = []       # (frontend, status, message) of every non-2xx, non-drop response
        self.ok_after = {}     # frontend -> time of its last ok
        self.lock = threading.Lock()
        self.threads = []
        for f in frontends:
            self.threads.append(threading.Thread(target=self.http_loop, args=(f, model, body, pause), daemon=True))
            self.threads.append(threading.Thread(target=self.grpc_loop, args=(f, model, grpc_request, pause),
                                                 daemon=True))
        for t in self.threads:
            t.start()

    def record(self, f, model, kind, status, message):
        self.tallies[f.name].add(model, kind)
        with self.lock:
            if kind in ("ok", "late"):
                self.ok_after[f.name] = time.monotonic()
            elif kind == "errors" or status in (503, grpc.StatusCode.UNAVAILABLE):
                self.errors.append((f.name, status, message))

    def http_loop(self, f, model, body, pause):
        host, port = f.http.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        data = json.dumps(body).encode()
        while not self.stop_flag.is_set():
            with self.lock:
                self.calls[f.name] += 1
            try:
                conn.request("POST", "/v2/models/%s/infer" % model, body=data,
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                out = resp.read()
            except Exception as e:  # no response: a broken promise
                with self.lock:
                    self.no_response.append((f.name, "http", repr(e)))
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                continue
            outcome = resp.getheader("Symphony-Outcome")
            msg = "" if resp.status == 200 else json.loads(out)["error"]
            self.record(f, model, kind_of(resp.status, outcome), resp.status, msg)
            if resp.status != 200:
                time.sleep(pause)
        conn.close()

    def grpc_loop(self, f, model, request, pause):
        with grpc.insecure_channel(f.grpc) as ch:
            stub = self.stub(ch)
            while not self.stop_flag.is_set():
                with self.lock:
                    self.calls[f.name] += 1
                try:
                    _, call = stub.ModelInfer.with_call(request, timeout=30)
                    self.record(f, model, KINDS[dict(call.trailing_metadata())["symphony-outcome"]], 200, "")
                except grpc.RpcError as e:
                    trailers = dict(e.trailing_metadata() or ())
                    if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and "symphony-outcome" not in trailers:
                        with self.lock:  # the client's own deadline, not the server's answer
                            self.no_response.append((f.name, "grpc", e.details()))
                        continue
                    self.record(f, model, kind_of(e.code(), trailers.get("symphony-outcome")), e.code(),
                                e.details())
                    time.sleep(pause)

    @staticmethod
    def stub(ch):
        _, pb_grpc = grpc_stubs()
        return pb_grpc.GRPCInferenceServiceStub(ch)

    def finish(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=60)
            assert not t.is_alive(), "a client thread is stuck"


def fast_load(frontends):
    pb, _ = grpc_stubs()
    req = pb.ModelInferRequest(model_name="fast")
    req.inputs.add(name="input", datatype="BYTES", shape=[1])
    req.raw_input_contents.append(struct.pack("<I", 8) + b"abcdefgh")
    body = {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1], "data": ["abcdefgh"]}]}
    return Load(frontends, "fast", body, req)


def check_every_request_answered_once(load, reports):
    print("calls", load.calls, "tallies", {n: t.by_model for n, t in load.tallies.items()},
          "errors", len(load.errors), sorted(set(m for _, _, m in load.errors))[:6])
    assert load.no_response == [], load.no_response[:5]
    for name, report in reports.items():
        tally = load.tallies[name]
        assert tally.total() == load.calls[name], (name, tally.by_model, load.calls[name])
        check_report_equals(report, tally, name)
        assert report["client"]["in_flight_at_end"] == 0, report["client"]
        assert report["client"]["duplicate_outputs"] == 0, report["client"]


def test_emulated_killed_scheduler_every_request_answered_once_and_frontends_recover(emulated):
    f1 = emulated.start_frontend("fe1")
    f2 = emulated.start_frontend("fe2")
    f1.wait_ready()
    f2.wait_ready()
    load = fast_load([f1, f2])
    try:
        time.sleep(2)
        emulated.scheduler.kill()  # SIGKILL under load
        killed = time.monotonic()
        wait_until(lambda: not f1.ready() and not f2.ready(), "both frontends to say not ready", 5)
        time.sleep(1)
        emulated.start_scheduler("scheduler2")  # same port; the backend and the frontends come back
        emulated.backends["b1"].wait_for("its registration again", lambda: emulated.registered() >= 1, 30)
        f1.wait_ready()
        f2.wait_ready()
        back = time.monotonic()
        time.sleep(2)
    finally:
        load.finish()
    reports = {"fe1": f1.stop(), "fe2": f2.stop()}
    check_every_request_answered_once(load, reports)
    for name, report in reports.items():
        assert report["client"]["scheduler_losses"] == 1 and report["client"]["welcomes"] == 2, report["client"]
        assert load.ok_after.get(name, 0) > back, name + " served nothing after the scheduler came back"
        assert report["models"]["fast"]["ok"] > 0
    # Every error says what failed: the lost scheduler, or not being connected to one.
    assert load.errors, "nothing failed while the scheduler was down?"
    for name, status, msg in load.errors:
        assert ("scheduler" in msg and ("lost" in msg or "not connected" in msg)) or "not ready" in msg, (
            name, status, msg)
    assert any("was lost while the request was pending" in m or "not connected" in m or "not ready" in m
               for _, _, m in load.errors)
    assert killed < back


def test_emulated_killed_backend_every_request_answered_once_errors_name_it(emulated):
    victim = emulated.backends.pop("b1")
    f = emulated.start_frontend("fe")
    f.wait_ready()
    load = fast_load([f])
    probe = {}

    def send_probe():  # a request of `busy` runs from ~350 ms after it came until ~950 ms
        host, port = f.http.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.connect()
        body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4],
                                       "data": [1, 2, 3, 4]}]})
        probe["sent"] = time.monotonic()
        conn.request("POST", "/v2/models/busy/infer", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        probe["answer"] = (resp.status, hdrs, resp.read())
        load.tallies["fe"].add("busy", kind_of(resp.status, hdrs.get("symphony-outcome")))
        conn.close()

    try:
        time.sleep(2)
        t = threading.Thread(target=send_probe, daemon=True)
        t.start()
        wait_until(lambda: "sent" in probe, "the probe to go", 5)
        time.sleep(max(0.0, 0.65 - (time.monotonic() - probe["sent"])))
        victim.kill()  # SIGKILL while the probe's batch runs on it
        t.join(timeout=30)
        assert not t.is_alive(), "the probe got no answer"
        wait_until(lambda: "lost" in emulated.scheduler.output(), "the scheduler to notice the lost backend", 5)
        time.sleep(1)
        emulated.start_backend("again", "emulated:2")
        back = time.monotonic()
        time.sleep(2)
    finally:
        load.finish()
    report = f.stop()
    load.calls["fe"] += 1  # the probe
    check_every_request_answered_once(load, {"fe": report})
    assert load.ok_after.get("fe", 0) > back, "nothing served after the backend came back"
    # The probe was running on the victim: an error naming it.
    status, hdrs, body = probe["answer"]
    err = json.loads(body)["error"]
    assert status == 500 and hdrs["symphony-outcome"] == "error", (status, body)
    assert "model 'busy' failed in the cluster" in err and "'b1'" in err and "lost" in err, err
    # The load's requests in the victim's batches (if any) end the same way;
    # those queued with no GPU left expire (504); with no backend connected
    # the frontend is not ready and refuses new ones at once (503).
    errors = [(status, msg) for _, status, msg in load.errors if status not in (503, grpc.StatusCode.UNAVAILABLE)]
    for status, msg in errors:
        assert "'b1'" in msg and "failed in the cluster" in msg, (status, msg)
    for _, status, msg in load.errors:
        assert (status, msg) in errors or "not ready" in msg, (status, msg)
    fast = report["models"]["fast"]
    assert fast["errors"] == len(errors)
    assert set(fast["dropped_by_reason"]) <= {"expired", "batch_policy", "infeasible", "unavailable", "overload"}, fast
    assert report["models"]["busy"]["errors"] == 1


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_emulated_frontend_waits_for_the_scheduler_not_ready_until_it_comes():
    c = Cluster(EMULATED_CONFIG)
    try:
        c.port = free_port()  # nothing listens there yet
        f = c.start_frontend("fe")
        time.sleep(1)
        status, body = http_get(f.url + "/v2/health/ready")
        assert status == 503, body
        assert http_get(f.url + "/v2/models/fast")[0] == 200  # metadata comes from the config
        status, body = http_get(f.metrics_url.replace("/metrics", "/readyz"))
        assert status == 503 and b"not connected to the scheduler at " + c.address().encode() in body, body
        body = {"inputs": [{"name": "input", "datatype": "BYTES", "shape": [1], "data": ["abc"]}]}
        status, hdrs, out = http_infer(f, "fast", body)
        assert status == 503 and "not ready" in json.loads(out)["error"], out
        c.start_scheduler()
        c.start_backend("b1", "emulated:1")
        f.wait_ready()
        # The first requests of a frontend that just joined may miss their
        # 100 ms while the backend connects to it (504): bounded retries.
        tally = Tally()
        tally.add("fast", "dropped")  # the 503 above
        for _ in range(50):
            status, hdrs, out = http_infer(f, "fast", body, tally)
            if status == 200:
                break
            assert status == 504 and hdrs["symphony-drop-reason"] == "expired", out
        assert status == 200, out
        report = f.stop()
        check_report_equals(report, tally, "fe")
        assert report["models"]["fast"]["dropped_by_reason"].get("unavailable") == 1
    finally:
        c.stop_all()


@pytest.mark.parametrize("args,says", [
    (["--scheduler", "nowhere", "--http", "127.0.0.1:0"], "--scheduler: "),
    (["--scheduler", "127.0.0.1:1"], "give --http HOST:PORT and/or --grpc HOST:PORT"),
    (["--scheduler", "127.0.0.1:1", "--http", "127.0.0.1:99999"], "--http: "),
    (["--scheduler", "127.0.0.1:1", "--grpc", "nonsense"], "--grpc: "),
    (["--scheduler", "127.0.0.1:1", "--http", "127.0.0.1:0", "--metrics", "9464"], "--metrics: "),
    (["--scheduler", "127.0.0.1:1", "--http", "127.0.0.1:0", "--max-inflight", "1000000", "--max-input-bytes",
      "100000"], "GiB of registered memory"),
])
def test_emulated_cli_errors_name_the_option(args, says):
    d = tempfile.mkdtemp(prefix="symphony-cluster-front-")
    cfg = os.path.join(d, "cluster.yaml")
    with open(cfg, "w") as f:
        f.write(textwrap.dedent(EMULATED_CONFIG))
    import subprocess
    p = subprocess.run([CLI, "frontend", "--config", cfg] + args, capture_output=True, timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 2 and "symphony frontend: " in err and says in err, (p.returncode, err)


def test_emulated_cli_config_errors_name_the_file_line_and_key():
    d = tempfile.mkdtemp(prefix="symphony-cluster-front-")
    cfg = os.path.join(d, "cluster.yaml")
    with open(cfg, "w") as f:
        f.write(textwrap.dedent(EMULATED_CONFIG).replace('output: "uint8[16]"}', 'output: "uint9[16]"}', 1))
    import subprocess
    p = subprocess.run([CLI, "frontend", "--config", cfg, "--scheduler", "127.0.0.1:1", "--http", "127.0.0.1:0"],
                       capture_output=True, timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 2 and cfg + ":" in err and "cluster.models.slow.output: unknown dtype 'uint9'" in err, err


# ---- system shared memory through the frontend ---------------------------------

def test_torch_system_shared_memory_through_the_frontend():
    """Inputs read from and outputs written into a client's region by the
    cluster's frontend (--allow-client-shm), REST and gRPC, against torch."""
    need_test_model("linear.pt")
    from multiprocessing import shared_memory
    c = Cluster("""
        gpus: 1
        policy: eager
        workload: {rate: 10}
        models:
          - {name: linear, alpha_ms: 0.05, beta_ms: 1, slo_ms: 3000, max_batch: 4}
        cluster:
          token: "%s"
          heartbeat_ms: 50
          models:
            linear: {input: "float32[4]", output: "float32[3]"}
    """ % TOKEN)
    shm = shared_memory.SharedMemory(name="symphony_fe_shm_%d" % os.getpid(), create=True, size=4096)
    try:
        c.start_scheduler()
        c.start_backend("cpu", "cpu", ["linear:%s:float32[4]" % os.path.join(MODELS, "linear.pt")])
        f = c.start_frontend("fe", extra=["--allow-client-shm"])
        f.wait_ready()
        url = "http://" + f.http
        rows = [[0.5, -1.0, 2.0, 3.5], [1, 2, 3, 4]]
        struct.pack_into("<8f", shm.buf, 100, *rows[0], *rows[1])
        status, _, out = curl(url + "/v2/systemsharedmemory/region/r/register", "-H", "Content-Type: application/json",
                              body=json.dumps({"key": "/" + shm.name, "offset": 0, "byte_size": 4096}).encode())
        assert status == 200, out
        region = lambda offset, size: {"shared_memory_region": "r", "shared_memory_offset": offset,
                                       "shared_memory_byte_size": size}
        body = {"inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4], "parameters": region(100, 32)}],
                "outputs": [{"name": "output", "parameters": region(2048, 24)}]}
        status, _, out = curl(url + "/v2/models/linear/infer", "-H", "Content-Type: application/json",
                              body=json.dumps(body).encode())
        assert status == 200, out
        assert "data" not in json.loads(out)["outputs"][0]
        want = linear_expected(rows[0]) + linear_expected(rows[1])
        assert list(struct.unpack_from("<6f", shm.buf, 2048)) == pytest.approx(want, rel=1e-6)

        pb, pb_grpc = grpc_stubs()
        with grpc.insecure_channel(f.grpc) as ch:
            stub = pb_grpc.GRPCInferenceServiceStub(ch)
            req = pb.ModelInferRequest(model_name="linear")
            t = req.inputs.add(name="input", datatype="FP32", shape=[1, 4])
            t.parameters["shared_memory_region"].string_param = "r"
            t.parameters["shared_memory_offset"].int64_param = 116
            t.parameters["shared_memory_byte_size"].int64_param = 16
            o = req.outputs.add(name="output")
            o.parameters["shared_memory_region"].string_param = "r"
            o.parameters["shared_memory_offset"].int64_param = 3000
            o.parameters["shared_memory_byte_size"].int64_param = 12
            resp = stub.ModelInfer(req, timeout=20)
            assert list(resp.raw_output_contents) == [b""]
            assert list(struct.unpack_from("<3f", shm.buf, 3000)) == pytest.approx(want[3:], rel=1e-6)
            st = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=10)
            assert [(r.name, r.key, r.byte_size) for r in st.regions.values()] == [("r", "/" + shm.name, 4096)]
            stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(), timeout=10)
            with pytest.raises(grpc.RpcError) as e:
                stub.ModelInfer(req, timeout=20)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND and "region 'r'" in e.value.details()
    finally:
        shm.close()
        shm.unlink()
        c.stop_all()
