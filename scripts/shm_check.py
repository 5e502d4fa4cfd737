#!/usr/bin/python3
"""Checks the shared memory extensions of a running `symphony serve` end to end, as a
Triton client uses them: a model's input read from a region and its output written into
one, against the same request sent plainly. System shared memory (a POSIX object under
/dev/shm) always; CUDA shared memory (a tensor's cudaIpcMemHandle_t, from torch) when
torch sees a GPU. Used by scripts/gpu-check.sh; serve must run with --allow-client-shm.

    scripts/shm_check.py http://127.0.0.1:8000 MODEL [--json FILE] [--require-cuda]

MODEL takes one FP32 input of fixed shape (its metadata says which).

Prints one line per check; exit status 0 when every check that ran passed (and, with
--require-cuda, the CUDA one ran).
"""
import argparse
import base64
import json
import mmap
import os
import struct
import sys
import urllib.error
import urllib.request


CUDA_IPC_HANDLE_BYTES = 64  # sizeof(cudaIpcMemHandle_t)


def call(url, body=None, method=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data, method=method or ("POST" if body is not None else "GET"))
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, {"error": text}


def plain(base, model, name, values):
    status, out = call(f"{base}/v2/models/{model}/infer",
                       {"inputs": [{"name": name, "datatype": "FP32", "shape": [1, len(values)], "data": values}]})
    if status != 200:
        raise RuntimeError(f"plain request: HTTP {status} {out}")
    o = out["outputs"][0]
    return o["name"], o["shape"], o["data"]


def shm_request(base, model, name, n_in, out_name, n_out, in_region, in_offset, out_region, out_offset):
    return call(f"{base}/v2/models/{model}/infer", {
        "inputs": [{"name": name, "datatype": "FP32", "shape": [1, n_in],
                    "parameters": {"shared_memory_region": in_region, "shared_memory_offset": in_offset,
                                   "shared_memory_byte_size": 4 * n_in}}],
        "outputs": [{"name": out_name,
                     "parameters": {"shared_memory_region": out_region, "shared_memory_offset": out_offset,
                                    "shared_memory_byte_size": 4 * n_out}}]})


def close(a, b):
    return len(a) == len(b) and all(abs(x - y) <= 1e-4 * max(1.0, abs(x)) for x, y in zip(a, b))


def system_check(base, model, name, values, expect):
    out_name, _, want = expect
    key = f"/symphony-shm-check-{os.getpid()}"
    size = 4096
    fd = os.open(f"/dev/shm{key}", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        m = mmap.mmap(fd, size)
        m[64:64 + 4 * len(values)] = struct.pack(f"{len(values)}f", *values)
        status, body = call(f"{base}/v2/systemsharedmemory/region/sys_in_out/register",
                            {"key": key, "offset": 0, "byte_size": size})
        if status != 200:
            return False, f"register: HTTP {status} {body}"
        status, body = shm_request(base, model, name, len(values), out_name, len(want), "sys_in_out", 64,
                                   "sys_in_out", 1024)
        got = list(struct.unpack(f"{len(want)}f", m[1024:1024 + 4 * len(want)]))
        call(f"{base}/v2/systemsharedmemory/region/sys_in_out/unregister", {})
        if status != 200:
            return False, f"infer: HTTP {status} {body}"
        return close(got, want), f"output {got[:4]}... against {want[:4]}..."
    finally:
        os.close(fd)
        os.unlink(f"/dev/shm{key}")


def cuda_check(base, model, name, values, expect):
    try:
        import torch
    except ImportError:
        return None, "no torch"
    if not torch.cuda.is_available():
        return None, "torch sees no GPU"
    out_name, _, want = expect
    x = torch.tensor(values, dtype=torch.float32, device="cuda:0")
    y = torch.zeros(len(want), dtype=torch.float32, device="cuda:0")
    torch.cuda.synchronize()
    regions = []
    for region, t in (("cuda_in", x), ("cuda_out", y)):
        # (device, handle, size, offset, ...): the handle names the allocation the
        # storage lies in, at `offset` bytes; the region is that allocation.
        share = t.untyped_storage()._share_cuda_()
        handle, alloc_size, offset = share[1], share[2], share[3]
        # torch 2.x prefixes the cudaIpcMemHandle_t with a version byte and a type byte ('c': a
        # cudaMalloc block; 'e', an expandable segment, is no cudaIpcMemHandle_t at all). A Triton
        # client sends the 64 bytes of cudaIpcGetMemHandle, which is what serve takes.
        if len(handle) == CUDA_IPC_HANDLE_BYTES + 2:
            if handle[1:2] != b"c":
                return False, f"torch shared {region} as type {handle[1:2]!r}, not a cudaMalloc block"
            handle = handle[2:]
        status, body = call(f"{base}/v2/cudasharedmemory/region/{region}/register",
                            {"raw_handle": {"b64": base64.b64encode(handle).decode()}, "device_id": 0,
                             "byte_size": offset + alloc_size})
        if status != 200:
            return False, f"register {region}: HTTP {status} {body}"
        regions.append((region, offset))
    status, body = shm_request(base, model, name, len(values), out_name, len(want), regions[0][0], regions[0][1],
                               regions[1][0], regions[1][1])
    torch.cuda.synchronize()
    got = y.cpu().tolist()
    _, listed = call(f"{base}/v2/cudasharedmemory/status")
    for region, _ in regions:
        call(f"{base}/v2/cudasharedmemory/region/{region}/unregister", {})
    if status != 200:
        return False, f"infer: HTTP {status} {body}"
    return close(got, want), f"output {got[:4]}... against {want[:4]}...; status listed {listed}"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("--json")
    p.add_argument("--require-cuda", action="store_true")
    a = p.parse_args()
    status, meta = call(f"{a.url}/v2/models/{a.model}")
    if status != 200:
        print(f"model {a.model}: HTTP {status} {meta}", file=sys.stderr)
        return 1
    tensor = meta["inputs"][0]
    n = 1
    for d in tensor["shape"][1:]:
        n *= d
    name = tensor["name"]
    values = [0.25 * (i + 1) for i in range(n)]
    expect = plain(a.url, a.model, name, values)
    results = {}
    for kind, check in (("system", system_check), ("cuda", cuda_check)):
        ok, detail = check(a.url, a.model, name, values, expect)
        results[kind] = {"passed": ok, "detail": detail}
        print(f"{kind} shared memory: {'passed' if ok else 'not run' if ok is None else 'FAILED'}: {detail}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    failed = any(r["passed"] is False for r in results.values())
    missing = a.require_cuda and results["cuda"]["passed"] is None
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
