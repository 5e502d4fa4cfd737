"""Helpers of the front's tests: `symphony serve` (and any `symphony`
command) as a real process, curl, and gRPC stubs generated at test time from
the project's inference.proto with Debian's protoc and grpc_python_plugin
(clients we did not write). The cluster's frontend tests
(extensions/rdma/tests/test_cluster_frontend.py) use them too.

Environment (set by CTest): SYMPHONY_CLI (the binary), SYMPHONY_PROTO_DIR
(front/proto), SYMPHONY_TEST_MODELS (the TorchScript test models).
Every wait is bounded; every process started is killed on exit.
"""
import atexit
import importlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

CLI = os.environ.get("SYMPHONY_CLI", "")
PROTO_DIR = os.environ.get("SYMPHONY_PROTO_DIR", "")
MODELS = os.environ.get("SYMPHONY_TEST_MODELS", "")
_CHILDREN = []


def _kill_all():
    for p in _CHILDREN:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


atexit.register(_kill_all)

_stubs = None


def grpc_stubs():
    """(inference_pb2, inference_pb2_grpc), generated once per run from the .proto."""
    global _stubs
    if _stubs:
        return _stubs
    out = tempfile.mkdtemp(prefix="symphony-stubs-")
    # inference.proto imports Triton's ModelConfig from repository/proto.
    config_dir = os.path.join(PROTO_DIR, "..", "..", "repository", "proto")
    subprocess.run(
        ["protoc", "-I", PROTO_DIR, "-I", config_dir, "--python_out=" + out, "--grpc_out=" + out,
         "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", os.path.join(PROTO_DIR, "inference.proto"),
         os.path.join(config_dir, "model_config.proto")],
        check=True, timeout=60)
    sys.path.insert(0, out)
    _stubs = (importlib.import_module("inference_pb2"), importlib.import_module("inference_pb2_grpc"))
    return _stubs


class Process:
    """A `symphony` command as a real process in its own session, its output
    in `log`; started at once, killed at exit if still running."""

    def __init__(self, args, log, env=None):
        self.args = list(args)
        self.log = log
        with open(log, "w") as f:
            self.proc = subprocess.Popen(self.args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=env)
        _CHILDREN.append(self.proc)

    def output(self):
        with open(self.log) as f:
            return f.read()

    def running(self):
        return self.proc.poll() is None

    def wait_for(self, what, pred, timeout=120):
        """Waits until pred() holds; raises (with the log) if the process exits first or time runs out."""
        deadline = time.monotonic() + timeout
        while not pred():
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d before %s:\n%s" % (self.args[1], self.proc.returncode, what,
                                                                         self.output()))
            if time.monotonic() > deadline:
                raise RuntimeError("%s: no %s within %d s:\n%s" % (self.args[1], what, timeout, self.output()))
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops it with `sig`; returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RuntimeError("%s did not stop within %d s after signal %d:\n%s" % (self.args[1], timeout, sig,
                                                                                     self.output()))

    def kill(self):
        """SIGKILL, at once."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def wait_stopped(pid, timeout=5.0):
    """Returns once every thread of `pid` is stopped (SIGSTOP returns before
    they all are: one still running can read a request a few ms late)."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                pass  # a thread that ended meanwhile
        if states and all(st in "Tt" for st in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop within {timeout} s")


def read_json(path):
    """The JSON in `path`, or None when there is none."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def read_ports(path):
    """(http, grpc) from a --port-file."""
    ports = read_json(path)
    return ports.get("http"), ports.get("grpc")


class Serve:
    """`symphony serve CONFIG --http 127.0.0.1:0 --grpc 127.0.0.1:0` until stop()."""

    def __init__(self, config_text, extra=(), http=True, grpc=True):
        self.dir = tempfile.mkdtemp(prefix="symphony-front-")
        self.config = os.path.join(self.dir, "serve.yaml")
        with open(self.config, "w") as f:
            f.write(textwrap.dedent(config_text))
        self.port_file = os.path.join(self.dir, "ports.json")
        self.report_file = os.path.join(self.dir, "report.json")
        args = [CLI, "serve", self.config, "--port-file", self.port_file, "--json", self.report_file, "--quiet"]
        if http:
            args += ["--http", "127.0.0.1:0"]
        if grpc:
            args += ["--grpc", "127.0.0.1:0"]
        args += list(extra)
        self.process = Process(args, os.path.join(self.dir, "serve.log"))
        self.proc = self.process.proc
        self.process.wait_for("serving", lambda: os.path.exists(self.port_file))
        self.http, self.grpc = read_ports(self.port_file)
        self.url = "http://" + self.http if self.http else None

    def output(self):
        return self.process.output()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops it with `sig`; returns (exit code, the JSON report)."""
        rc = self.process.stop(sig, timeout)
        return rc, read_json(self.report_file)


class Tally:
    """What the clients saw, per model (ok, late, dropped, errors): the
    accounting the server's report and /metrics must agree with. Thread-safe."""

    def __init__(self):
        self.by_model = {}
        self.lock = threading.Lock()

    def add(self, model, kind):
        with self.lock:
            self.by_model.setdefault(model, {"ok": 0, "late": 0, "dropped": 0, "errors": 0})[kind] += 1

    def total(self):
        with self.lock:
            return sum(sum(c.values()) for c in self.by_model.values())


def curl(*args, body=None, timeout=30):
    """Runs curl; returns (status, headers dict lower-cased, body bytes)."""
    hdr = tempfile.NamedTemporaryFile(delete=False)
    hdr.close()
    cmd = ["curl", "-sS", "--max-time", str(timeout), "-D", hdr.name, "-o", "-"] + list(args)
    if body is not None:
        cmd += ["--data-binary", "@-"]
    p = subprocess.run(cmd, input=body, capture_output=True, timeout=timeout + 5)
    if p.returncode != 0:
        raise RuntimeError("curl %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr.decode()))
    with open(hdr.name, "rb") as f:
        lines = f.read().decode("latin-1").split("\r\n")
    os.unlink(hdr.name)
    # With a 100-continue or several responses, the last status line counts.
    status, headers = 0, {}
    for line in lines:
        if line.startswith("HTTP/"):
            status, headers = int(line.split()[1]), {}
        elif ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers, p.stdout


# ---- the TorchScript test models (tests/data/make_test_models.py) -----------

def cpu_config(d):
    """A serve config of the test models on the CPU device, copied into folder `d`."""
    import shutil
    for m in ("linear", "two_inputs", "raises", "tuple_out"):
        shutil.copy(os.path.join(MODELS, m + ".pt"), os.path.join(d, m + ".pt"))
    return """
        devices: cpu
        # eager: these tests check answers, not batching; a deferred request
        # alone would wait most of its 5 s SLO for company.
        policy: eager
        profiling: {max_batch: 4, repeats: 3}
        delays: {safety_margin_ms: 2}
        models:
          - {name: linear, path: %(d)s/linear.pt, input: "float32[4]", slo_ms: 5000, max_batch: 4}
          - {name: two_inputs, path: %(d)s/two_inputs.pt, inputs: ["float32[2]", "int64[3]"], slo_ms: 5000, max_batch: 4}
          - {name: raises, path: %(d)s/raises.pt, input: "float32[4]", slo_ms: 5000, max_batch: 4}
          - {name: tuple_out, path: %(d)s/tuple_out.pt, input: "float32[4]", slo_ms: 5000, max_batch: 4}
    """ % {"d": d}


# Requests to `linear` (float32[4]) the front refuses with 400, and what the
# error must say.
BAD_LINEAR_INPUTS = [
    ([{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}], "has no input 'x' (inputs: 'input')"),
    ([{"name": "input", "datatype": "FP64", "shape": [1, 4], "data": [1, 2, 3, 4]}], "expected datatype FP32, got FP64"),
    ([{"name": "input", "datatype": "FP32", "shape": [1, 5], "data": [1, 2, 3, 4, 5]}], "expected shape [1,4], got [1,5]"),
    # linear's max batch is 4 (serve's and the cluster frontend's configs).
    ([{"name": "input", "datatype": "FP32", "shape": [5, 4], "data": [0] * 20}], "holds 5 samples"),
    ([{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": [1, 2]}], "holds 4 elements, 'data' has 2"),
    ([{"name": "input", "datatype": "FP32", "shape": [1, -4], "data": []}], "negative dimension"),
]


def front_inflight(metrics_text):
    """symphony_front_inflight in a /metrics page (serve's or a frontend's)."""
    return int(float(re.search(r"^symphony_front_inflight (\S+)$", metrics_text, re.M).group(1)))


def curl_hung_up_once_held(url, body, held, wait_for):
    """POSTs body with curl and kills curl, closing its connection, once held()
    says the front holds the request; wait_for(pred, what) waits (bounded)."""
    client = subprocess.Popen(["curl", "-sS", "--max-time", "60", "-o", "/dev/null", "--data-binary", "@-", url],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client.stdin.write(body)
        client.stdin.close()
        wait_for(held, "the request inside the front")
    finally:
        client.kill()
        client.wait(timeout=10)


def linear_expected(x):
    """linear.pt's answer for one sample, computed by torch in this process."""
    import torch
    m = torch.jit.load(os.path.join(MODELS, "linear.pt"))
    return m(torch.tensor([x], dtype=torch.float32))[0].tolist()


def grpc_infer_test_models(stub, pb, tally, approx, timeout=20, only_ok=True):
    """ModelInfer on linear (raw contents, outputs checked against torch),
    two_inputs (typed contents), a wrong size (INVALID_ARGUMENT) and raises
    (INTERNAL); each response counted in `tally`. `only_ok`: the answers must
    be on time (else late counts too)."""
    import grpc
    x = [0.5, -1.0, 2.0, 3.5]
    raw = pb.ModelInferRequest(model_name="linear", id="g1")
    raw.inputs.add(name="input", datatype="FP32", shape=[1, 4])
    raw.raw_input_contents.append(struct.pack("<4f", *x))
    resp, call = stub.ModelInfer.with_call(raw, timeout=timeout)
    outcome = dict(call.trailing_metadata())["symphony-outcome"]
    assert outcome == "ok" or (not only_ok and outcome == "late"), outcome
    tally.add("linear", outcome)
    assert resp.id == "g1" and resp.model_name == "linear"
    assert resp.outputs[0].name == "output" and list(resp.outputs[0].shape) == [1, 3]
    assert list(struct.unpack("<3f", resp.raw_output_contents[0])) == approx(linear_expected(x), rel=1e-6)

    typed = pb.ModelInferRequest(model_name="two_inputs")
    a = typed.inputs.add(name="input0", datatype="FP32", shape=[1, 2])
    a.contents.fp32_contents.extend([0.5, 0.25])
    b = typed.inputs.add(name="input1", datatype="INT64", shape=[1, 3])
    b.contents.int64_contents.extend([1, 2, 3])
    resp, call = stub.ModelInfer.with_call(typed, timeout=timeout)
    outcome = dict(call.trailing_metadata())["symphony-outcome"]
    assert outcome == "ok" or (not only_ok and outcome == "late"), outcome
    tally.add("two_inputs", outcome)
    assert struct.unpack("<f", resp.raw_output_contents[0])[0] == approx(6.75)

    bad = pb.ModelInferRequest(model_name="linear")
    bad.inputs.add(name="input", datatype="FP32", shape=[1, 4])
    bad.raw_input_contents.append(b"\0" * 15)
    try:
        stub.ModelInfer(bad, timeout=timeout)
        raise AssertionError("a 15-byte FP32[1,4] was accepted")
    except grpc.RpcError as e:
        tally.add("linear", "errors")
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "is 16 bytes, got 15" in e.details(), e.details()

    boom = pb.ModelInferRequest(model_name="raises")
    boom.inputs.add(name="input", datatype="FP32", shape=[4])
    boom.raw_input_contents.append(struct.pack("<4f", -1000, 0, 0, 0))
    try:
        stub.ModelInfer(boom, timeout=timeout)
        raise AssertionError("raises did not raise")
    except grpc.RpcError as e:
        tally.add("raises", "errors")
        assert e.code() == grpc.StatusCode.INTERNAL and "below -100" in e.details(), e.details()
