"""symphony.Server.start_front(): the same Open Inference Protocol front as
`symphony serve --http/--grpc`, reached with curl (a client we did not write)."""

import json
import struct
import subprocess
from multiprocessing import shared_memory

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


def test_start_front_serves_system_shared_memory_when_allowed(cpu_server, models_dir):
    s = cpu_server("linear", slo_ms=2000.0)
    url = "http://" + s.start_front(http="127.0.0.1:0", allow_client_shm=True)["http"]
    shm = shared_memory.SharedMemory(create=True, size=4096)
    try:
        x = [0.5, -1.0, 2.0, 3.5]
        struct.pack_into("<4f", shm.buf, 0, *x)
        reg = json.dumps({"key": "/" + shm.name, "offset": 0, "byte_size": 4096}).encode()
        assert curl(url + "/v2/systemsharedmemory/region/r/register", reg) == (200, {})
        region = lambda offset, size: {"shared_memory_region": "r", "shared_memory_offset": offset,
                                       "shared_memory_byte_size": size}
        body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4],
                                       "parameters": region(0, 16)}],
                           "outputs": [{"name": "output", "parameters": region(1024, 12)}]}).encode()
        code, r = curl(url + "/v2/models/linear/infer", body)
        assert code == 200 and "data" not in r["outputs"][0], r
        want = torch.jit.load(str(models_dir / "linear.pt"))(torch.tensor([x]))[0].tolist()
        assert list(struct.unpack_from("<3f", shm.buf, 1024)) == pytest.approx(want, rel=1e-6)
    finally:
        s.stop()
        shm.close()
        shm.unlink()
