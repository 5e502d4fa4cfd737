"""Helpers of the front's tests: `symphony serve` as a real process, curl, and
gRPC stubs generated at test time from the project's inference.proto with
Debian's protoc and grpc_python_plugin (clients we did not write).

Environment (set by CTest): SYMPHONY_CLI (the binary), SYMPHONY_PROTO_DIR
(front/proto), SYMPHONY_TEST_MODELS (the TorchScript test models).
Every wait is bounded; every process started is killed on exit.
"""
import atexit
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
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
    subprocess.run(
        ["protoc", "-I", PROTO_DIR, "--python_out=" + out, "--grpc_out=" + out,
         "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", os.path.join(PROTO_DIR, "inference.proto")],
        check=True, timeout=60)
    sys.path.insert(0, out)
    _stubs = (importlib.import_module("inference_pb2"), importlib.import_module("inference_pb2_grpc"))
    return _stubs


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
        self.log = os.path.join(self.dir, "serve.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _CHILDREN.append(self.proc)
        deadline = time.monotonic() + 120
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError("serve exited with %d before serving:\n%s" % (self.proc.returncode, self.output()))
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not start within 120 s:\n" + self.output())
            time.sleep(0.05)
        with open(self.port_file) as f:
            ports = json.load(f)
        self.http = ports.get("http")
        self.grpc = ports.get("grpc")
        self.url = "http://" + self.http if self.http else None

    def output(self):
        with open(self.log) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops it with `sig`; returns (exit code, the JSON report)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RuntimeError("serve did not stop within %d s after signal %d:\n%s" % (timeout, sig, self.output()))
        report = None
        if os.path.exists(self.report_file):
            with open(self.report_file) as f:
                report = json.load(f)
        return rc, report


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
