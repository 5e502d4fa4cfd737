"""symphony.Server.start_front(): the same Open Inference Protocol front as
`symphony serve --http/--grpc`, reached with curl (a client we did not write)."""

import json
import subprocess

import pytest
import torch

import symphony


def curl(url, body=None):
    cmd = ["curl", "-sS", "--max-time", "30", "-o", "-", "-w", "\n%{http_code}", url]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    p = subprocess.run(cmd, input=body, capture_output=True, timeout=40, check=True)
    text, _, code = p.stdout.rpartition(b"\n")
    return int(code), json.loads(text) if text else None


def test_start_front_serves_the_models_over_http(cpu_server, models_dir):
    s = cpu_server("linear", slo_ms=2000.0)
    where = s.start_front(http="127.0.0.1:0")
    assert set(where) == {"http"} and where["http"].startswith("127.0.0.1:")
    url = "http://" + where["http"]
    code, meta = curl(url + "/v2/models/linear")
    assert code == 200 and meta["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}]
    x = [0.5, -1.0, 2.0, 3.5]
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "data": x}]}).encode()
    code, r = curl(url + "/v2/models/linear/infer", body)
    assert code == 200, r
    want = torch.jit.load(str(models_dir / "linear.pt"))(torch.tensor([x]))[0].tolist()
    assert r["outputs"][0]["data"] == pytest.approx(want, rel=1e-6)
    # In-process and protocol requests share the server.
    assert s.infer("linear", torch.tensor(x)).result(timeout=30).tolist() == pytest.approx(want, rel=1e-6)
    with pytest.raises(symphony.ConfigError, match="already running"):
        s.start_front(http="127.0.0.1:0")
    s.stop()
    with pytest.raises(subprocess.CalledProcessError):  # the front stopped with the server
        curl(url + "/v2/health/live")


def test_start_front_refuses_bad_addresses(cpu_server):
    s = cpu_server("linear")
    with pytest.raises(symphony.ConfigError, match="needs http"):
        s.start_front()
    with pytest.raises(symphony.ConfigError, match="--http"):
        s.start_front(http="not-an-address")
