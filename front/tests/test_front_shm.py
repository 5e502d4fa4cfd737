"""The system shared memory extension of `symphony serve`, driven by clients we
did not write: curl for REST, Python grpcio with stubs generated from
front/proto/inference.proto. The regions are POSIX shared memory objects made
here with Python's multiprocessing.shared_memory, as a client would: inputs
are read from them, outputs written into them, and the answers checked
against torch in this process. Every wait is bounded.
"""
import json
import os
import struct
from multiprocessing import shared_memory

import grpc
import pytest

from oip_harness import Serve, cpu_config, curl, grpc_stubs, linear_expected

SIZE = 8192


@pytest.fixture(scope="module")
def server():
    d = os.path.realpath(os.path.join(os.environ.get("TMPDIR", "/tmp"), "symphony-shm-models-%d" % os.getpid()))
    os.makedirs(d, exist_ok=True)
    s = Serve(cpu_config(d), extra=["--allow-client-shm"])
    yield s
    rc, _ = s.stop()
    assert rc == 0, s.output()


@pytest.fixture()
def shm():
    """A fresh shared memory object of SIZE bytes (its key is "/" + name); every
    region unregistered and the object unlinked afterwards."""
    obj = shared_memory.SharedMemory(name="symphony_shm_test_%d" % os.getpid(), create=True, size=SIZE)
    yield obj
    obj.close()
    obj.unlink()


def post(s, path, body=None):
    status, _, out = curl("-X", "POST", s.url + path, "-H", "Content-Type: application/json",
                          body=json.dumps(body).encode() if body is not None else None)
    return status, json.loads(out) if out else None


def get(s, path):
    status, _, out = curl(s.url + path)
    return status, json.loads(out)


def register(s, name, key, offset, size):
    return post(s, "/v2/systemsharedmemory/region/%s/register" % name,
                {"key": key, "offset": offset, "byte_size": size})


def in_region(name, size, offset=None):
    p = {"shared_memory_region": name, "shared_memory_byte_size": size}
    if offset is not None:
        p["shared_memory_offset"] = offset
    return p


def infer(s, model, body):
    status, hdrs, out = curl(s.url + "/v2/models/%s/infer" % model, "-H", "Content-Type: application/json",
                             body=json.dumps(body).encode())
    return status, json.loads(out)


def floats(obj, offset, n):
    return list(struct.unpack_from("<%df" % n, obj.buf, offset))


def test_rest_register_infer_status_unregister(server, shm):
    key = "/" + shm.name
    status, meta = get(server, "/v2")
    assert status == 200 and "system_shared_memory" in meta["extensions"]
    rows = [[0.5, -1.0, 2.0, 3.5], [1, 2, 3, 4]]
    struct.pack_into("<8f", shm.buf, 100, *rows[0], *rows[1])
    # Two regions of one object, neither at a page boundary.
    assert register(server, "in", key, 100, 64) == (200, {})
    assert register(server, "out", key, 5000, 1000) == (200, {})
    try:
        status, body = infer(server, "linear", {
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [2, 4], "parameters": in_region("in", 32)}],
            "outputs": [{"name": "output", "parameters": in_region("out", 24, offset=8)}]})
        assert status == 200, body
        (out,) = body["outputs"]
        assert out["name"] == "output" and out["shape"] == [2, 3] and "data" not in out, out
        assert out["parameters"] == {"shared_memory_region": "out", "shared_memory_offset": 8,
                                     "shared_memory_byte_size": 24}
        want = linear_expected(rows[0]) + linear_expected(rows[1])
        assert floats(shm, 5008, 6) == pytest.approx(want, rel=1e-6)

        # One output into a region, the other as JSON; the same input again.
        status, body = infer(server, "tuple_out", {
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4], "parameters": in_region("in", 16)}],
            "outputs": [{"name": "output0", "parameters": in_region("out", 16, offset=100)}, {"name": "output1"}]})
        assert status == 200, body
        outs = {o["name"]: o for o in body["outputs"]}
        assert "data" not in outs["output0"] and outs["output1"]["data"] == pytest.approx([sum(rows[0])])
        assert floats(shm, 5100, 4) == pytest.approx([2 * v for v in rows[0]])

        status, regions = get(server, "/v2/systemsharedmemory/status")
        assert status == 200
        assert sorted(regions, key=lambda r: r["name"]) == [
            {"name": "in", "key": key, "offset": 100, "byte_size": 64},
            {"name": "out", "key": key, "offset": 5000, "byte_size": 1000}]
        assert get(server, "/v2/systemsharedmemory/region/out/status") == (
            200, [{"name": "out", "key": key, "offset": 5000, "byte_size": 1000}])
        assert post(server, "/v2/systemsharedmemory/region/in/unregister") == (200, {})
        assert [r["name"] for r in get(server, "/v2/systemsharedmemory/status")[1]] == ["out"]
        status, body = get(server, "/v2/systemsharedmemory/region/in/status")
        assert status == 404 and "region 'in'" in body["error"], body
    finally:
        assert post(server, "/v2/systemsharedmemory/unregister") == (200, {})
    assert get(server, "/v2/systemsharedmemory/status") == (200, [])


def test_rest_errors_name_the_region(server, shm):
    key = "/" + shm.name
    assert register(server, "r", key, 0, 1024) == (200, {})
    x = {"name": "input", "datatype": "FP32", "shape": [1, 4]}
    try:
        cases = [
            (register(server, "r", key, 0, 16), 400, "region 'r' is already registered"),
            (register(server, "ghost", "/symphony_no_such_object", 0, 16), 400,
             "region 'ghost': cannot open shared memory key '/symphony_no_such_object': No such file or directory"),
            (register(server, "big", key, SIZE - 8, 16), 400, "beyond the end of shared memory key"),
            (post(server, "/v2/systemsharedmemory/region/nokey/register", {"offset": 0, "byte_size": 4}), 400,
             "region 'nokey': the request gives no 'key'"),
            (infer(server, "linear", {"inputs": [dict(x, parameters=in_region("nope", 16))]}), 404,
             "no shared memory region 'nope' is registered"),
            (infer(server, "linear", {"inputs": [dict(x, parameters=in_region("r", 12))]}), 400,
             "[1,4] FP32 is 16 bytes, but shared_memory_byte_size in region 'r' is 12"),
            (infer(server, "linear", {"inputs": [dict(x, parameters=in_region("r", 16, offset=1020))]}), 400,
             "beyond the end of shared memory region 'r' (1024 bytes)"),
            (infer(server, "linear", {"inputs": [dict(x, parameters=in_region("r", 16), data=[1, 2, 3, 4])]}), 400,
             "gives its bytes in shared memory and also as 'data'"),
            (infer(server, "linear", {"inputs": [dict(x, parameters={"shared_memory_region": "r"})]}), 400,
             "needs both 'shared_memory_region' and 'shared_memory_byte_size'"),
            (infer(server, "linear", {"inputs": [dict(x, data=[1, 2, 3, 4])],
                                      "outputs": [{"name": "output", "parameters": in_region("r", 8)}]}), 400,
             "output 'output' of model 'linear': [1,3] FP32 is 12 bytes, but shared_memory_byte_size in region 'r' "
             "is 8"),
            (post(server, "/v2/cudasharedmemory/region/c/register", {"raw_handle": {"b64": ""}, "device_id": 0,
                                                                    "byte_size": 4}), 501,
             "CUDA shared memory is not supported on this server"),
        ]
        for (status, body), want_status, says in cases:
            assert status == want_status and says in body["error"], (says, status, body)
        assert [r["name"] for r in get(server, "/v2/systemsharedmemory/status")[1]] == ["r"]
        assert get(server, "/v2/cudasharedmemory/status") == (200, [])
    finally:
        post(server, "/v2/systemsharedmemory/unregister")


def test_grpc_register_infer_status_unregister_and_errors(server, shm):
    pb, pb_grpc = grpc_stubs()
    key = "/" + shm.name
    with grpc.insecure_channel(server.grpc) as ch:
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        assert "system_shared_memory" in stub.ServerMetadata(pb.ServerMetadataRequest(), timeout=10).extensions
        stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(name="g", key=key, offset=2000,
                                                                             byte_size=4096), timeout=10)
        try:
            x0, x1 = [0.5, 0.25], [1, 2, 3]
            struct.pack_into("<2f", shm.buf, 2000 + 64, *x0)
            # two_inputs: input0 from the region, input1 raw: raw_input_contents
            # holds one entry per input not in shared memory.
            req = pb.ModelInferRequest(model_name="two_inputs", id="s1")
            a = req.inputs.add(name="input0", datatype="FP32", shape=[1, 2])
            a.parameters["shared_memory_region"].string_param = "g"
            a.parameters["shared_memory_offset"].int64_param = 64
            a.parameters["shared_memory_byte_size"].int64_param = 8
            req.inputs.add(name="input1", datatype="INT64", shape=[1, 3])
            req.raw_input_contents.append(struct.pack("<3q", *x1))
            o = req.outputs.add(name="output")
            o.parameters["shared_memory_region"].string_param = "g"
            o.parameters["shared_memory_offset"].int64_param = 512
            o.parameters["shared_memory_byte_size"].int64_param = 4
            resp = stub.ModelInfer(req, timeout=20)
            assert resp.id == "s1" and resp.outputs[0].name == "output"
            ps = resp.outputs[0].parameters
            assert ps["shared_memory_region"].string_param == "g" and ps["shared_memory_byte_size"].int64_param == 4
            assert list(resp.raw_output_contents) == [b""]
            assert floats(shm, 2512, 1) == pytest.approx([6.75])

            # tuple_out: output0 into the region, output1 raw, at index 1.
            struct.pack_into("<4f", shm.buf, 2000, 1, 2, 3, 4)
            req = pb.ModelInferRequest(model_name="tuple_out")
            t = req.inputs.add(name="input", datatype="FP32", shape=[1, 4])
            t.parameters["shared_memory_region"].string_param = "g"
            t.parameters["shared_memory_byte_size"].int64_param = 16
            o = req.outputs.add(name="output0")
            o.parameters["shared_memory_region"].string_param = "g"
            o.parameters["shared_memory_offset"].int64_param = 1024
            o.parameters["shared_memory_byte_size"].int64_param = 16
            req.outputs.add(name="output1")
            resp = stub.ModelInfer(req, timeout=20)
            assert [t.name for t in resp.outputs] == ["output0", "output1"]
            assert resp.raw_output_contents[0] == b""
            assert struct.unpack("<f", resp.raw_output_contents[1]) == pytest.approx((10.0,))
            assert floats(shm, 3024, 4) == pytest.approx([2, 4, 6, 8])

            # On a stream: each request's output into its own place in the region.
            stream = []
            for i in range(3):
                r = pb.ModelInferRequest()
                r.CopyFrom(req)
                r.id = "s%d" % i
                r.outputs[0].parameters["shared_memory_offset"].int64_param = 1536 + 16 * i
                stream.append(r)
            answers = list(stub.ModelStreamInfer(iter(stream), timeout=30))
            assert sorted(a.infer_response.id for a in answers) == ["s0", "s1", "s2"]
            assert all(a.error_message == "" and a.infer_response.raw_output_contents[0] == b"" for a in answers)
            assert floats(shm, 3536, 12) == pytest.approx([2, 4, 6, 8] * 3)

            st = stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=10)
            assert {n: (r.name, r.key, r.offset, r.byte_size) for n, r in st.regions.items()} == {
                "g": ("g", key, 2000, 4096)}

            def fails(call, req, code, says):
                with pytest.raises(grpc.RpcError) as e:
                    call(req, timeout=20)
                assert e.value.code() == code and says in e.value.details(), e.value.details()

            fails(stub.SystemSharedMemoryRegister,
                  pb.SystemSharedMemoryRegisterRequest(name="g", key=key, offset=0, byte_size=8),
                  grpc.StatusCode.INVALID_ARGUMENT, "region 'g' is already registered")
            fails(stub.SystemSharedMemoryRegister,
                  pb.SystemSharedMemoryRegisterRequest(name="h", key=key, offset=SIZE, byte_size=1),
                  grpc.StatusCode.INVALID_ARGUMENT, "region 'h': offset %d + byte_size 1 is beyond the end" % SIZE)
            fails(stub.SystemSharedMemoryStatus, pb.SystemSharedMemoryStatusRequest(name="h"),
                  grpc.StatusCode.NOT_FOUND, "region 'h'")
            bad = pb.ModelInferRequest(model_name="linear")
            b = bad.inputs.add(name="input", datatype="FP32", shape=[1, 4])
            b.parameters["shared_memory_region"].string_param = "h"
            b.parameters["shared_memory_byte_size"].int64_param = 16
            fails(stub.ModelInfer, bad, grpc.StatusCode.NOT_FOUND, "no shared memory region 'h'")
            b.parameters["shared_memory_region"].string_param = "g"
            b.parameters["shared_memory_byte_size"].int64_param = 20
            fails(stub.ModelInfer, bad, grpc.StatusCode.INVALID_ARGUMENT,
                  "is 16 bytes, but shared_memory_byte_size in region 'g' is 20")
            b.parameters["shared_memory_byte_size"].int64_param = 16
            b.contents.fp32_contents.extend([1, 2, 3, 4])
            fails(stub.ModelInfer, bad, grpc.StatusCode.INVALID_ARGUMENT,
                  "gives its bytes in shared memory and also as typed contents")
            bad.inputs[0].ClearField("contents")
            bad.raw_input_contents.append(b"\0" * 16)
            fails(stub.ModelInfer, bad, grpc.StatusCode.INVALID_ARGUMENT,
                  "raw_input_contents has 1 entries for 0 inputs not in shared memory")
            fails(stub.CudaSharedMemoryRegister, pb.CudaSharedMemoryRegisterRequest(name="c", byte_size=4),
                  grpc.StatusCode.UNIMPLEMENTED, "CUDA shared memory is not supported")
            assert not stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest(), timeout=10).regions
        finally:
            stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name="g"), timeout=10)
        assert not stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest(), timeout=10).regions


def test_without_allow_client_shm_the_extension_is_off(shm):
    s = Serve("""
        devices: emulated:1
        models:
          - {name: m, input: "float32[4]", slo_ms: 1000, max_batch: 4, alpha_ms: 0.1, beta_ms: 1}
    """)
    try:
        assert "system_shared_memory" not in get(s, "/v2")[1]["extensions"]
        status, body = register(s, "r", "/" + shm.name, 0, 16)
        assert status == 501 and "--allow-client-shm" in body["error"], body
        status, body = get(s, "/v2/systemsharedmemory/status")
        assert status == 501 and "--allow-client-shm" in body["error"], body
        status, body = infer(s, "m", {"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 4],
                                                  "parameters": in_region("r", 16)}]})
        assert status == 400 and "names shared memory region 'r', but this server takes no shared memory" in \
            body["error"], body
        pb, pb_grpc = grpc_stubs()
        with grpc.insecure_channel(s.grpc) as ch:
            with pytest.raises(grpc.RpcError) as e:
                pb_grpc.GRPCInferenceServiceStub(ch).SystemSharedMemoryRegister(
                    pb.SystemSharedMemoryRegisterRequest(name="r", key="/" + shm.name, byte_size=16), timeout=10)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED and "--allow-client-shm" in e.value.details()
    finally:
        rc, _ = s.stop()
    assert rc == 0, s.output()
