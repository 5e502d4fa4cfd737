"""`symphony serve --model-repository DIR`: a model repository in Triton's
layout served to clients we did not write (curl, and grpcio with stubs
generated from front/proto/inference.proto): the protocol's repository
extension (index, load, unload), the model control modes (none, explicit,
poll), and every refusal with its reason in the answer and in the index.

Each server runs TorchScript test models on the CPU; every wait is bounded.
"""
import atexit
import json
import os
import re
import shutil
import struct
import tempfile
import threading
import time
import urllib.request

import grpc
import pytest

from oip_harness import MODELS, Serve, curl, grpc_stubs, linear_expected

CONFIG = """
    devices: cpu
    policy: eager
    profiling: {max_batch: 4, repeats: 3}
    delays: {safety_margin_ms: 2}
"""

LINEAR_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
version_policy: { latest { num_versions: 2 } }
dynamic_batching { default_queue_policy { default_timeout_microseconds: 4000000 } }
parameters: { key: "symphony.slo_ms" value: { string_value: "5000" } }
"""

# Folders that must be refused, and what the reason must say.
BAD = {
    "bad_syntax": ("max_batch_size: 4\ninput [ { name: \"x\" \n", "bad_syntax/config.pbtxt:3:1"),
    "unknown_field": ("max_batch_size: 4\nmax_queue_delay_us: 5\n", "unknown_field/config.pbtxt:2:1"),
    "onnx": ("platform: \"onnxruntime_onnx\"\nmax_batch_size: 4\n", "onnxruntime_onnx"),
    "missing_pt": (LINEAR_CONFIG.replace("num_versions: 2", "num_versions: 1"), "model.pt"),
    "corrupt_pt": (LINEAR_CONFIG.replace("num_versions: 2", "num_versions: 1"), "corrupt_pt"),
}


def add_model(repo, name, config=LINEAR_CONFIG, versions=(1,), model="linear"):
    d = os.path.join(repo, name)
    for v in versions:
        os.makedirs(os.path.join(d, str(v)), exist_ok=True)
        shutil.copy(os.path.join(MODELS, model + ".pt"), os.path.join(d, str(v), "model.pt"))
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config)


def make_repo(bad=True):
    repo = tempfile.mkdtemp(prefix="symphony-repo-")
    atexit.register(shutil.rmtree, repo, True)
    add_model(repo, "linear", versions=(1, 2))
    add_model(repo, "linear_b")
    if bad:
        for name, (config, _) in BAD.items():
            os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(config)
        with open(os.path.join(repo, "corrupt_pt", "1", "model.pt"), "wb") as f:
            f.write(b"this is not a TorchScript archive")
    return repo


def post(s, path, body=None):
    status, _, out = curl("-X", "POST", s.url + path, "-H", "Content-Type: application/json",
                          body=None if body is None else json.dumps(body).encode(), timeout=120)
    return status, json.loads(out) if out else None


def index(s, ready=None):
    status, body = post(s, "/v2/repository/index", {} if ready is None else {"ready": ready})
    assert status == 200, body
    return body


def entry(s, name, version=None):
    for e in index(s):
        if e["name"] == name and (version is None or e.get("version") == version):
            return e
    return None


def infer(s, model, version=None):
    path = "/v2/models/%s%s/infer" % (model, "" if version is None else "/versions/" + version)
    return post(s, path, {"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4],
                                      "data": [1.0, 2.0, 3.0, 4.0]}]})


@pytest.fixture(scope="module")
def none_mode():
    s = Serve(CONFIG, extra=["--model-repository", make_repo()])
    yield s
    s.stop()


@pytest.fixture(scope="module")
def explicit():
    s = Serve(CONFIG, extra=["--model-repository", make_repo(), "--model-control-mode", "explicit",
                             "--load-model", "linear"])
    yield s
    s.stop()


# ---- none: everything loads at start, control refused -----------------------

def test_none_mode_serves_every_chosen_version_under_the_configs_names(none_mode):
    for v in ("1", "2"):
        e = entry(none_mode, "linear", v)
        assert e["state"] == "READY" and e["reason"] == "", e
    status, body = infer(none_mode, "linear")
    assert status == 200, body
    assert body["model_version"] == "2"
    out = body["outputs"][0]
    assert out["name"] == "OUTPUT__0"
    assert out["data"] == pytest.approx(linear_expected([1.0, 2.0, 3.0, 4.0]), rel=1e-5)
    assert infer(none_mode, "linear", "2")[0] == 200
    status, body = infer(none_mode, "linear", "1")
    assert status == 200 and body["model_version"] == "1", body
    status, body = infer(none_mode, "linear", "3")
    assert status == 404 and "no version '3'" in body["error"]
    status, _, meta = curl(none_mode.url + "/v2/models/linear")
    assert status == 200 and json.loads(meta)["inputs"][0]["name"] == "INPUT__0"
    assert json.loads(meta)["versions"] == ["1", "2"]
    status, _, meta = curl(none_mode.url + "/v2")
    assert "model_repository" in json.loads(meta)["extensions"]


def test_the_config_endpoint_answers_the_repositorys_config(none_mode):
    status, _, out = curl(none_mode.url + "/v2/models/linear/config")
    assert status == 200, out
    c = json.loads(out)
    assert c["name"] == "linear" and c["max_batch_size"] == 4
    assert c["input"][0]["name"] == "INPUT__0" and c["input"][0]["dims"] == [4]
    assert c["version_policy"]["latest"]["num_versions"] == 2
    assert c["parameters"]["symphony.slo_ms"]["string_value"] == "5000"
    assert c["dynamic_batching"]["default_queue_policy"]["default_timeout_microseconds"] == 4000000


def test_none_mode_lists_each_refused_model_with_its_reason(none_mode):
    for name, (_, says) in BAD.items():
        e = entry(none_mode, name)
        assert e is not None and e["state"] == "UNAVAILABLE", (name, e)
        assert says in e["reason"], (name, e)
    assert "no field named \"max_queue_delay_us\"" in entry(none_mode, "unknown_field")["reason"]
    ready = index(none_mode, ready=True)
    assert {(e["name"], e["version"]) for e in ready} == {("linear", "1"), ("linear", "2"), ("linear_b", "1")}
    assert all(e["state"] == "READY" for e in ready)


def test_none_mode_refuses_load_and_unload(none_mode):
    status, body = post(none_mode, "/v2/repository/models/linear_b/load")
    assert status == 503 and "--model-control-mode none" in body["error"]
    status, body = post(none_mode, "/v2/repository/models/linear/unload")
    assert status == 503 and "--model-control-mode explicit" in body["error"]
    assert infer(none_mode, "linear")[0] == 200
    pb, pbg = grpc_stubs()
    with grpc.insecure_channel(none_mode.grpc) as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="linear_b"), timeout=30)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "none" in e.value.details()


# ---- explicit: load and unload while serving --------------------------------

def ready(s, model):
    """GET /v2/models/{model}/ready: (status, body)."""
    status, _, body = curl(s.url + "/v2/models/%s/ready" % model)
    return status, json.loads(body) if body else None


def not_loaded(s, model):
    """A model the repository holds but that is not loaded: not ready (400,
    as Triton answers; gRPC ready = false), and its metadata and requests
    503 saying so; never "unknown model"."""
    status, body = ready(s, model)
    assert status == 400 and "'%s' is not loaded" % model in body["error"], (status, body)
    status, _, body = curl(s.url + "/v2/models/" + model)
    assert status == 503 and "is not loaded" in json.loads(body)["error"], body
    status, body = infer(s, model)
    assert status == 503 and "'%s' is not loaded" % model in body["error"], body
    pb, pbg = grpc_stubs()
    with grpc.insecure_channel(s.grpc) as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        assert stub.ModelReady(pb.ModelReadyRequest(name=model), timeout=10).ready is False
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelMetadata(pb.ModelMetadataRequest(name=model), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "is not loaded" in e.value.details()
    return True


def test_explicit_mode_loads_only_what_is_asked(explicit):
    assert entry(explicit, "linear", "2")["state"] == "READY"
    e = entry(explicit, "linear_b")
    assert e["state"] == "UNAVAILABLE" and e["reason"] == "not loaded"
    assert not_loaded(explicit, "linear_b")
    assert ready(explicit, "linear")[0] == 200


def test_readiness_of_a_name_the_repository_does_not_hold_is_unknown(explicit):
    status, body = ready(explicit, "nope")
    assert status == 404 and "unknown model 'nope'" in body["error"], body
    pb, pbg = grpc_stubs()
    with grpc.insecure_channel(explicit.grpc) as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelReady(pb.ModelReadyRequest(name="nope"), timeout=10)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND and "unknown model 'nope'" in e.value.details()


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_model_is_refused_with_its_reason_in_the_answer_and_the_index(explicit, name):
    says = BAD[name][1]
    status, body = post(explicit, "/v2/repository/models/%s/load" % name)
    assert status == 400, body
    assert says in body["error"] and name in body["error"]
    e = entry(explicit, name)
    assert e["state"] == "UNAVAILABLE" and says in e["reason"]
    status, body = infer(explicit, name)
    assert status == 503 and says in body["error"], body  # not loaded, and why


def test_load_infer_unload_then_not_ready(explicit):
    assert not_loaded(explicit, "linear_b")  # before the load
    status, body = post(explicit, "/v2/repository/models/linear_b/load")
    assert status == 200, body
    assert entry(explicit, "linear_b", "1")["state"] == "READY"
    status, body = infer(explicit, "linear_b")
    assert status == 200 and body["outputs"][0]["name"] == "OUTPUT__0"
    # Loading it again from the same files does nothing and succeeds.
    assert post(explicit, "/v2/repository/models/linear_b/load")[0] == 200
    status, body = post(explicit, "/v2/repository/models/linear_b/unload", {"parameters": {"unload_dependents": False}})
    assert status == 200, body
    e = entry(explicit, "linear_b")
    assert e["state"] == "UNAVAILABLE" and e["reason"] == "unloaded"
    assert not_loaded(explicit, "linear_b")  # after the unload
    assert infer(explicit, "linear")[0] == 200


def test_unload_of_an_unknown_model_and_load_of_a_missing_folder(explicit):
    status, body = post(explicit, "/v2/repository/models/nope/unload")
    assert status == 400 and "'nope'" in body["error"] and "not loaded" in body["error"]
    status, body = post(explicit, "/v2/repository/models/nope/load")
    assert status == 404 and "no folder" in body["error"]


def test_load_with_a_json_config_in_place_of_config_pbtxt(explicit):
    config = {"platform": "pytorch_libtorch", "max_batch_size": 2,
              "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
              "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [3]}]}
    status, body = post(explicit, "/v2/repository/models/linear_b/load",
                        {"parameters": {"config": json.dumps(config)}})
    assert status == 200, body
    status, _, meta = curl(explicit.url + "/v2/models/linear_b")
    meta = json.loads(meta)
    assert [i["name"] for i in meta["inputs"]] == ["X"] and [o["name"] for o in meta["outputs"]] == ["Y"]
    status, body = post(explicit, "/v2/repository/models/linear_b/load",
                        {"parameters": {"config": json.dumps({"max_batch_size": 2, "bogus": 1})}})
    assert status == 400 and "bogus" in body["error"]
    assert post(explicit, "/v2/repository/models/linear_b/unload")[0] == 200


def load_config(server, name, config):
    return post(server, "/v2/repository/models/" + name + "/load", {"parameters": {"config": json.dumps(config)}})


def test_max_batch_size_0_serves_the_dims_as_the_whole_input(explicit):
    """max_batch_size 0: the dims are the model's whole input (Triton's rule).
    dims [1, 4]: a request of [1, 4] runs alone; dims [4]: the model gets a
    tensor of [4] with no batch dimension and answers [3], as torch does;
    the metadata shows the dims as they are, and another shape is refused."""
    config = {"platform": "pytorch_libtorch", "max_batch_size": 0,
              "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [1, 4]}],
              "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [1, 3]}]}
    status, body = load_config(explicit, "linear_b", config)
    assert status == 200, body
    for x in ([1.0, 2.0, 3.0, 4.0], [-2.0, 0.5, 8.0, 1.0]):
        status, body = post(explicit, "/v2/models/linear_b/infer", {
            "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": x}]})
        assert status == 200, body
        (out,) = body["outputs"]
        assert out["shape"] == [1, 3] and out["data"] == pytest.approx(linear_expected(x), rel=1e-6)
        assert body["parameters"]["batch_size"] == 1
    status, body = post(explicit, "/v2/models/linear_b/infer", {
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [2, 4], "data": [0.0] * 8}]})
    assert status == 400 and "expected shape [1,4]" in body["error"], body

    config["input"][0]["dims"] = [4]
    config["output"][0]["dims"] = [3]
    status, body = load_config(explicit, "linear_b", config)
    assert status == 200, body
    status, _, meta = curl(explicit.url + "/v2/models/linear_b")
    meta = json.loads(meta)
    assert meta["inputs"][0]["shape"] == [4] and meta["outputs"][0]["shape"] == [3], meta
    x = [0.5, -1.0, 2.0, 3.0]
    status, body = post(explicit, "/v2/models/linear_b/infer", {
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [4], "data": x}]})
    assert status == 200, body
    (out,) = body["outputs"]
    assert out["shape"] == [3] and out["data"] == pytest.approx(linear_expected(x), rel=1e-6)
    status, body = post(explicit, "/v2/models/linear_b/infer", {
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 4], "data": x}]})
    assert status == 400 and "expected shape [4]" in body["error"], body
    assert post(explicit, "/v2/repository/models/linear_b/unload")[0] == 200


def test_reshape_hands_the_model_its_shape(explicit):
    """An input's reshape is the shape the model gets ([2, 2] sent, [4] to
    linear.pt, which refuses anything else); an output's reshape is the shape
    the model gives ([3]), answered as its dims ([3, 1]); batching is kept."""
    config = {"platform": "pytorch_libtorch", "max_batch_size": 4, "instance_group": [{"kind": "KIND_CPU"}],
              "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [2, 2], "reshape": {"shape": [4]}}],
              "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [3, 1],
                          "reshape": {"shape": [3]}}]}
    status, body = load_config(explicit, "linear_b", config)
    assert status == 200, body
    xs = [[1.0, 2.0, 3.0, 4.0], [-2.0, 0.5, 8.0, 1.0]]
    status, body = post(explicit, "/v2/models/linear_b/infer", {
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [2, 2, 2], "data": xs[0] + xs[1]}]})
    assert status == 200, body
    (out,) = body["outputs"]
    assert out["shape"] == [2, 3, 1]
    assert out["data"] == pytest.approx(linear_expected(xs[0]) + linear_expected(xs[1]), rel=1e-6)
    config["input"][0]["reshape"] = {"shape": [5]}
    status, body = load_config(explicit, "linear_b", config)
    assert status == 400 and "reshape float32[5] does not hold the 4 elements" in body["error"], body
    assert post(explicit, "/v2/repository/models/linear_b/unload")[0] == 200


VARLEN_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
parameters: { key: "symphony.slo_ms" value: { string_value: "5000" } }
model_warmup [ { name: "typical" batch_size: 1 inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 6 ] } } } ]
"""


def test_a_dimension_of_minus_one_takes_samples_of_any_size():
    """dims [-1] (a sequence of any length): the metadata shows it, requests
    of lengths 1 to 12, alone or k at once, from threads at the same time (so
    batches mix lengths: one forward per length), each answered with its own
    sum and length by varlen.pt; the model was warmed up and profiled at
    model_warmup's [6]; a shape of another rank is refused."""
    repo = tempfile.mkdtemp(prefix="symphony-repo-")
    atexit.register(shutil.rmtree, repo, True)
    add_model(repo, "varlen", VARLEN_CONFIG, model="varlen")
    s = Serve(CONFIG, extra=["--model-repository", repo])
    try:
        status, _, meta = curl(s.url + "/v2/models/varlen")
        assert status == 200 and json.loads(meta)["inputs"][0]["shape"] == [-1, -1], meta
        assert "varlen version 1: a -1 dimension: warmed up and profiled at float32[6]" in s.output()
        errors = []

        def send(n):
            x = [float(n)] * n
            for k in (None, 2):
                shape, data = ([n], x) if k is None else ([k, n], x * k)
                status, body = post(s, "/v2/models/varlen/infer", {
                    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": shape, "data": data}]})
                want = [float(n * n), float(n)]
                if status != 200 or body["outputs"][0]["data"] != (want if k is None else want * k) or \
                        body["outputs"][0]["shape"] != ([2] if k is None else [k, 2]):
                    errors.append((n, k, status, body))

        threads = [threading.Thread(target=send, args=(n,)) for n in range(1, 13)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads) and not errors, errors
        status, body = post(s, "/v2/models/varlen/infer", {
            "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 2, 3], "data": [0.0] * 6}]})
        assert status == 400 and "expected shape [1,-1]" in body["error"], body
        profiles = [f for f in os.listdir(os.path.join(repo, "varlen", "1")) if f.endswith(".profile.yaml")]
        assert profiles, os.listdir(os.path.join(repo, "varlen", "1"))
    finally:
        s.stop()


def test_instance_group_chooses_the_servers_devices(explicit):
    """instance_group says which of the server's devices serve the model (this
    server has one, cpu:0): KIND_CPU loads it there (count is accepted, not
    used: the config endpoint shows the group as served); a GPU group on this CPU-only server refuses the model through the
    load endpoint, naming the field and the server's devices."""
    config = {"platform": "pytorch_libtorch", "max_batch_size": 4,
              "instance_group": [{"kind": "KIND_CPU", "count": 2}],
              "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [4]}],
              "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [3]}]}
    status, body = load_config(explicit, "linear_b", config)
    assert status == 200, body
    out = explicit.output()
    assert re.search(r"loading linear_b version 1 from \S+ on cpu:0\n", out), out[-2000:]
    assert "'linear_b': instance_group[0].count 2 is accepted but not used" in out
    status, body = infer(explicit, "linear_b")
    assert status == 200, body
    status, _, out = curl(explicit.url + "/v2/models/linear_b/config")
    groups = json.loads(out)["instance_group"]
    assert status == 200 and len(groups) == 1, out
    assert (groups[0]["name"], groups[0]["kind"], groups[0]["count"]) == ("linear_b_cpu", "KIND_CPU", 1), groups
    devices = "(the server's devices: cpu:0, set by --devices or the serve config's `devices`)"
    for groups, field in (([{"kind": "KIND_CPU"}, {"kind": "KIND_GPU", "gpus": [3]}],
                           "instance_group[1].gpus: the server has no GPU 3 "),
                          ([{"kind": "KIND_GPU"}], "instance_group[0].kind: the server has no GPU device ")):
        config["instance_group"] = groups
        status, body = load_config(explicit, "linear_b", config)
        assert status == 400 and field + devices in body["error"], body
        assert infer(explicit, "linear_b")[0] == 200, "the model served before serves on"
    assert post(explicit, "/v2/repository/models/linear_b/unload")[0] == 200


def test_grpc_repository_rpcs(explicit):
    pb, pbg = grpc_stubs()
    with grpc.insecure_channel(explicit.grpc) as ch:
        stub = pbg.GRPCInferenceServiceStub(ch)
        idx = stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True), timeout=30)
        assert ("linear", "2", "READY") in [(m.name, m.version, m.state) for m in idx.models]
        assert all(m.state == "READY" for m in idx.models)
        stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="linear_b"), timeout=120)
        assert stub.ModelReady(pb.ModelReadyRequest(name="linear_b"), timeout=10).ready is True
        with pytest.raises(grpc.RpcError) as e:
            req = pb.RepositoryModelLoadRequest(model_name="onnx")
            stub.RepositoryModelLoad(req, timeout=120)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "onnxruntime_onnx" in e.value.details()
        req = pb.RepositoryModelLoadRequest(model_name="linear_b")
        req.parameters["file:1/model.pt"].bytes_param = b"x"
        with pytest.raises(grpc.RpcError) as e:
            stub.RepositoryModelLoad(req, timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "file:1/model.pt" in e.value.details()
        stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="linear_b"), timeout=120)
        assert stub.ModelReady(pb.ModelReadyRequest(name="linear_b"), timeout=10).ready is False
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelMetadata(pb.ModelMetadataRequest(name="linear_b"), timeout=10)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "not loaded" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="nope"), timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "not loaded" in e.value.details()
        meta = stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=10)
        assert "model_repository" in meta.extensions


def metric(text, model, outcome, version=None):
    """symphony_requests_total of one version of `model`, or of all its versions."""
    total = 0
    for m in re.finditer(r'^symphony_requests_total\{model="%s",version="(\w+)",outcome="%s"\} (\S+)$'
                         % (model, outcome), text, re.M):
        if version is None or m.group(1) == version:
            total += int(float(m.group(2)))
    return total


def test_loading_a_model_leaves_every_request_of_another_ok():
    """A bounded load on `linear` from a thread while `linear_b` loads (warm-up
    and profiling) and unloads: every request of `linear` is answered 200, and
    /metrics counts each of them once, none dropped or failed."""
    s = Serve(CONFIG, extra=["--model-repository", make_repo(bad=False), "--model-control-mode", "explicit",
                             "--load-model", "linear", "--metrics", "127.0.0.1:0"])
    try:
        url = re.search(r"metrics: listening on (http://\S+/metrics)", s.output()).group(1)
        stop = threading.Event()
        statuses = []

        def send():
            while not stop.is_set() and len(statuses) < 2000:
                status, body = infer(s, "linear")
                statuses.append((status, body if status != 200 else None))

        t = threading.Thread(target=send)
        t.start()
        try:
            time.sleep(0.5)
            assert post(s, "/v2/repository/models/linear_b/load")[0] == 200
            assert post(s, "/v2/repository/models/linear_b/unload")[0] == 200
            time.sleep(0.5)
        finally:
            stop.set()
            t.join(timeout=60)
        assert not t.is_alive()
        assert statuses and all(st == 200 for st, _ in statuses), [x for x in statuses if x[0] != 200][:3]
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        assert metric(text, "linear", "ok") + metric(text, "linear", "late") == len(statuses), text
        assert metric(text, "linear", "dropped") == 0 and metric(text, "linear", "error") == 0, text
    finally:
        s.stop()


WIDE_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1048576 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1048576 ] } ]
parameters: { key: "symphony.slo_ms" value: { string_value: "5000" } }
"""


def test_the_host_memory_pool_grows_for_a_model_loaded_and_shrinks_after_its_unload():
    """The default host memory pool holds 8 batches of every model's inputs:
    64 MiB (its floor) with `linear`, over 128 MiB once `wide` (4 MiB
    inputs, max batch 4) is loaded, and 64 MiB again once it is unloaded
    (/metrics' pool size; before, it stayed at its largest)."""
    repo = make_repo(bad=False)
    add_model(repo, "wide", WIDE_CONFIG, model="identity")
    s = Serve(CONFIG, extra=["--model-repository", repo, "--model-control-mode", "explicit",
                             "--load-model", "linear", "--metrics", "127.0.0.1:0"])
    try:
        url = re.search(r"metrics: listening on (http://\S+/metrics)", s.output()).group(1)

        def pool_bytes():
            text = urllib.request.urlopen(url, timeout=10).read().decode()
            m = re.search(r"^symphony_pinned_memory_pool_total_bytes\{[^}]*\} (\S+)$", text, re.M)
            assert m, text
            return int(float(m.group(1)))

        assert pool_bytes() == 64 << 20
        assert post(s, "/v2/repository/models/wide/load")[0] == 200
        assert pool_bytes() > 128 << 20
        assert infer(s, "linear")[0] == 200
        assert post(s, "/v2/repository/models/wide/unload")[0] == 200
        assert pool_bytes() == 64 << 20
        assert infer(s, "linear")[0] == 200
    finally:
        s.stop()


def test_report_counts_per_model_agree_with_the_clients():
    """The server's JSON report counts, per model, every request it ended,
    an unloaded model's included."""
    s = Serve(CONFIG, extra=["--model-repository", make_repo(bad=False), "--model-control-mode", "explicit",
                             "--load-model", "linear"])
    try:
        sent = {"linear": 0, "linear_b": 0}
        for _ in range(5):
            assert infer(s, "linear")[0] == 200
            sent["linear"] += 1
        assert post(s, "/v2/repository/models/linear_b/load")[0] == 200
        for _ in range(3):
            assert infer(s, "linear_b")[0] == 200
            sent["linear_b"] += 1
    finally:
        rc, report = s.stop()
    assert rc == 0
    for name, n in sent.items():
        front = report["models"][name]
        assert front["sent"] == n and front["ok"] + front["late"] == n, front
    # The server's report names each version of a model that has several.
    served = report["server"]["models"]
    assert served["linear version 2"]["sent"] == sent["linear"], served
    assert served["linear version 2"]["model"] == "linear" and served["linear version 2"]["version"] == "2"
    assert served["linear version 1"]["sent"] == 0, served


def test_unload_ends_every_queued_request_once_and_counts_them():
    """Requests queued on a slow model (about 200 ms a batch) when it is
    unloaded each end once, served (200); the unload answers after them;
    the server's report counts every one."""
    repo = make_repo(bad=False)
    add_model(repo, "busy", config=LINEAR_CONFIG.replace("dims: [ 3 ]", "dims: [ 4 ]"), model="busy")
    s = Serve(CONFIG, extra=["--model-repository", repo, "--model-control-mode", "explicit",
                             "--load-model", "busy"])
    try:
        answers = []
        lock = threading.Lock()

        def one():
            r = infer(s, "busy")
            with lock:
                answers.append(r)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        time.sleep(0.3)  # queued (the first batch runs ~200 ms)
        status, body = post(s, "/v2/repository/models/busy/unload")
        assert status == 200, body
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert len(answers) == 6 and all(st == 200 for st, _ in answers), answers
        assert infer(s, "busy")[0] == 503  # not loaded
    finally:
        rc, report = s.stop()
    assert rc == 0
    front = report["models"]["busy"]
    assert front["sent"] == 6 and front["ok"] + front["late"] == 6, front  # the 503 after: not served


# ---- poll: the repository is rescanned --------------------------------------

def test_poll_mode_picks_up_a_new_folder_and_drops_a_removed_one():
    repo = make_repo(bad=False)
    shutil.rmtree(os.path.join(repo, "linear_b"))
    s = Serve(CONFIG, extra=["--model-repository", repo, "--model-control-mode", "poll",
                             "--repository-poll-secs", "0.5"])
    try:
        assert entry(s, "linear", "2")["state"] == "READY"
        assert post(s, "/v2/repository/models/linear/unload")[0] == 503  # Triton: no control while polling
        add_model(repo, "linear_b")
        deadline = time.monotonic() + 90
        while (entry(s, "linear_b", "1") or {}).get("state") != "READY":
            assert time.monotonic() < deadline, index(s)
            time.sleep(0.2)
        assert infer(s, "linear_b")[0] == 200
        # A bad folder is listed with its reason, and tried once while its files stay as they are.
        os.makedirs(os.path.join(repo, "bad", "1"))
        with open(os.path.join(repo, "bad", "config.pbtxt"), "w") as f:
            f.write("max_batch_size: 4\nbogus: 1\n")
        deadline = time.monotonic() + 60
        while "no field named \"bogus\"" not in (entry(s, "bad") or {}).get("reason", ""):
            assert time.monotonic() < deadline, index(s)
            time.sleep(0.2)
        time.sleep(1.6)  # three more polls
        assert s.output().count("load of model 'bad' failed") == 1, s.output()
        shutil.rmtree(os.path.join(repo, "linear_b"))
        deadline = time.monotonic() + 60
        while entry(s, "linear_b") is not None:
            assert time.monotonic() < deadline, index(s)
            time.sleep(0.2)
        assert infer(s, "linear_b")[0] == 404
        assert infer(s, "linear")[0] == 200
    finally:
        s.stop()


# ---- versions: each chosen version serves; a reload leaves no gap ----------

ADDER_CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
version_policy: { latest { num_versions: 2 } }
parameters: { key: "symphony.slo_ms" value: { string_value: "5000" } }
"""
X = [1.0, 2.0, 3.0, 4.0]


def add_adder(repo, version, k, config=ADDER_CONFIG):
    """Version `version` of model "adder": y = x + k, a TorchScript model made here."""
    import torch

    class AddK(torch.nn.Module):
        def __init__(self, k: float):
            super().__init__()
            self.k = k

        def forward(self, x):
            return x + self.k

    d = os.path.join(repo, "adder", str(version))
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "model.pt.tmp")
    torch.jit.save(torch.jit.script(AddK(float(k))), tmp)
    os.replace(tmp, os.path.join(d, "model.pt"))  # a poll never reads half a file
    with open(os.path.join(repo, "adder", "config.pbtxt"), "w") as f:
        f.write(config)


def adder_infer(s, version=None):
    """(status, the k the answer shows, model_version) of one request."""
    path = "/v2/models/adder%s/infer" % ("" if version is None else "/versions/" + version)
    status, body = post(s, path, {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 4], "data": X}]})
    if status != 200:
        return status, body, None
    return status, round(body["outputs"][0]["data"][0] - X[0], 3), body["model_version"]


class Client:
    """A bounded loop of requests without a version in a thread, until stop():
    what each answered (status, k, version)."""

    def __init__(self, s, limit=3000):
        self.answers = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, args=(s, limit))
        self.thread.start()

    def run(self, s, limit):
        while not self.done.is_set() and len(self.answers) < limit:
            self.answers.append(adder_infer(s))

    def stop(self):
        self.done.set()
        self.thread.join(timeout=120)
        assert not self.thread.is_alive()
        return self.answers


def versions_index(s):
    return {e["version"]: (e["state"], e["reason"]) for e in index(s) if e["name"] == "adder"}


def stats(s, version):
    status, _, body = curl(s.url + "/v2/models/adder/versions/%s/stats" % version)
    assert status == 200, body
    (st,) = json.loads(body)["model_stats"]
    assert st["name"] == "adder" and st["version"] == version
    return st


def reload_under_requests(s, old, new):
    """An explicit load of "adder" while a client loop sends requests without
    a version: every one answered 200, by the old set (k, version) or the
    new one, both seen (the loop spanned the switch), the new one last."""
    client = Client(s)
    try:
        time.sleep(0.3)
        status, body = post(s, "/v2/repository/models/adder/load")
        assert status == 200, body
        time.sleep(0.3)
    finally:
        answers = client.stop()
    assert answers and all(a[0] == 200 for a in answers), [a for a in answers if a[0] != 200][:3]
    assert {(k, v) for _, k, v in answers} == {old, new}, set(answers)
    assert answers[-1][1:] == new


def test_versions_answer_apart_with_their_own_statistics_and_reload_without_a_gap():
    repo = tempfile.mkdtemp(prefix="symphony-repo-")
    atexit.register(shutil.rmtree, repo, True)
    add_adder(repo, 1, 1)
    add_adder(repo, 2, 2)
    s = Serve(CONFIG, extra=["--model-repository", repo, "--model-control-mode", "explicit",
                             "--load-model", "adder", "--metrics", "127.0.0.1:0"])
    try:
        metrics_url = re.search(r"metrics: listening on (http://\S+/metrics)", s.output()).group(1)
        # Each version runs its own model; none named: the highest.
        assert adder_infer(s, "1") == (200, 1.0, "1")
        assert adder_infer(s, "2") == (200, 2.0, "2")
        for _ in range(2):
            assert adder_infer(s) == (200, 2.0, "2")
        status, _, meta = curl(s.url + "/v2/models/adder")
        assert json.loads(meta)["versions"] == ["1", "2"]
        assert versions_index(s) == {"1": ("READY", ""), "2": ("READY", "")}
        # Statistics and metrics per version: 1 request of version 1, 3 of 2.
        assert stats(s, "1")["inference_stats"]["success"]["count"] == 1
        assert stats(s, "2")["inference_stats"]["success"]["count"] == 3
        pb, pbg = grpc_stubs()
        with grpc.insecure_channel(s.grpc) as ch:
            stub = pbg.GRPCInferenceServiceStub(ch)
            r = stub.ModelStatistics(pb.ModelStatisticsRequest(name="adder", version="1"), timeout=10)
            assert [(m.version, m.inference_stats.success.count) for m in r.model_stats] == [("1", 1)]
            r = stub.ModelStatistics(pb.ModelStatisticsRequest(name="adder"), timeout=10)
            assert sorted((m.version, m.inference_stats.success.count) for m in r.model_stats) == [("1", 1), ("2", 3)]
            req = pb.ModelInferRequest(model_name="adder", model_version="1")
            t = req.inputs.add(name="X", datatype="FP32", shape=[1, 4])
            t.contents.fp32_contents.extend(X)
            out = stub.ModelInfer(req, timeout=30)
            y = struct.unpack("<4f", out.raw_output_contents[0])  # gRPC answers raw bytes
            assert out.model_version == "1" and y[0] == X[0] + 1, out
        text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        assert metric(text, "adder", "ok", "1") + metric(text, "adder", "late", "1") == 2, text
        assert metric(text, "adder", "ok", "2") + metric(text, "adder", "late", "2") == 3, text

        # A new version under continuous requests: 3 loads, 2 stays as it is, 1 goes.
        add_adder(repo, 3, 3)
        reload_under_requests(s, old=(2.0, "2"), new=(3.0, "3"))
        assert versions_index(s) == {"2": ("READY", ""), "3": ("READY", "")}
        assert adder_infer(s, "1")[0] == 404
        # Version 2 was kept, not loaded again: its numbers go on.
        assert stats(s, "2")["inference_stats"]["success"]["count"] >= 3

        # Version 3's file changes: it loads again while the old one serves.
        add_adder(repo, 3, 4)
        reload_under_requests(s, old=(3.0, "3"), new=(4.0, "3"))

        # A new version that cannot load: the old ones serve on, its reason in the index.
        os.makedirs(os.path.join(repo, "adder", "4"))
        with open(os.path.join(repo, "adder", "4", "model.pt"), "wb") as f:
            f.write(b"this is not a TorchScript archive")
        status, body = post(s, "/v2/repository/models/adder/load")
        assert status == 400 and "version 4" in body["error"], body
        idx = versions_index(s)
        assert idx["4"][0] == "UNAVAILABLE" and "version 4" in idx["4"][1], idx
        assert idx["2"] == ("READY", "") and idx["3"] == ("READY", ""), idx
        assert adder_infer(s) == (200, 4.0, "3")
        assert adder_infer(s, "2") == (200, 2.0, "2")
    finally:
        rc, report = s.stop()
    assert rc == 0, s.output()
    served = report["server"]["models"]
    assert {(m["model"], m["version"]) for m in served.values()} >= {("adder", "2"), ("adder", "3")}, served


def test_poll_reloads_a_changed_model_under_continuous_requests():
    repo = tempfile.mkdtemp(prefix="symphony-repo-")
    atexit.register(shutil.rmtree, repo, True)
    add_adder(repo, 1, 1, config=ADDER_CONFIG.replace("num_versions: 2", "num_versions: 1"))
    s = Serve(CONFIG, extra=["--model-repository", repo, "--model-control-mode", "poll",
                             "--repository-poll-secs", "0.3"])
    try:
        assert adder_infer(s) == (200, 1.0, "1")
        client = Client(s)
        try:
            add_adder(repo, 2, 2, config=ADDER_CONFIG.replace("num_versions: 2", "num_versions: 1"))
            deadline = time.monotonic() + 90
            while not client.answers or client.answers[-1][1:] != (2.0, "2"):
                assert time.monotonic() < deadline and client.thread.is_alive(), index(s)
                time.sleep(0.1)
        finally:
            answers = client.stop()
        assert all(a[0] == 200 for a in answers), [a for a in answers if a[0] != 200][:3]
        # Both sets answered: the loop spanned the switch.
        assert {(k, v) for _, k, v in answers} == {(1.0, "1"), (2.0, "2")}, set(answers)
        deadline = time.monotonic() + 60
        while versions_index(s) != {"2": ("READY", "")}:
            assert time.monotonic() < deadline, index(s)
            time.sleep(0.1)
        assert adder_infer(s, "1")[0] == 404
    finally:
        s.stop()
