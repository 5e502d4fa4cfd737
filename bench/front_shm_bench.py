#!/usr/bin/env python3
"""What a large input costs through the protocol front, by how it travels
(bench/results/front.md, "Large inputs: JSON, binary, shared memory").

A model with a large input and almost no compute (FP32 [3,224,224], 0.6 MB,
answering its mean: TorchScript, made here with torch) served by `symphony
serve --allow-client-shm` on the CPU device; one client on 127.0.0.1 sends
requests one at a time (concurrency 1, one keep-alive connection) with the
input as JSON, as binary data, and in a system shared memory region, over
REST, and raw or in shared memory over gRPC. For each: the round trip (p50,
p90), serve's CPU time per request (its /proc CPU seconds over the run), and
the bytes the server copied per sample to form batches (its /metrics
counters). With --concurrency N, N clients (threads, each its own connection
and output slot) send at once, so that batches of several form, and the
throughput is reported too. Every answer is checked. Bounded: --requests per
way, each with a timeout; the server is stopped by its process id. With
--in-process, the same model is also served by symphony.Server in this
process (the Python package on PYTHONPATH), its inputs numpy arrays landed in
its host memory pool by infer(); its CPU is this process's, clients included.

    /usr/bin/python3 bench/front_shm_bench.py --symphony build/release/symphony
    /usr/bin/python3 bench/front_shm_bench.py --concurrency 4 --max-batch 4
    PYTHONPATH=build/release/bindings/python /usr/bin/python3 bench/front_shm_bench.py --in-process
"""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import shared_memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = [1, 3, 224, 224]
N = 3 * 224 * 224


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_model(path):
    import torch

    class Mean(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=[1, 2, 3])

    torch.jit.script(Mean()).save(path)


def metric(port, name):
    """The sum of series `name` on serve's /metrics."""
    c = http.client.HTTPConnection(*port.rsplit(":", 1), timeout=30)
    c.request("GET", "/metrics")
    total = 0.0
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    c.close()
    return total


def start_serve(symphony, d, max_batch):
    model = os.path.join(d, "mean.pt")
    make_model(model)
    config = os.path.join(d, "serve.yaml")
    with open(config, "w") as f:
        f.write(f"""devices: cpu
policy: eager
profiling: {{max_batch: {max_batch}, repeats: 3}}
models:
  - {{name: mean, path: {model}, input: "float32[3,224,224]", slo_ms: 5000, max_batch: {max_batch}}}
""")
    ports = os.path.join(d, "ports.json")
    log = open(os.path.join(d, "serve.log"), "w")
    with socket.socket() as s:  # a free port for /metrics
        s.bind(("127.0.0.1", 0))
        metrics = "127.0.0.1:%d" % s.getsockname()[1]
    p = subprocess.Popen([symphony, "serve", config, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
                          "--metrics", metrics, "--allow-client-shm", "--port-file", ports, "--quiet"], stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 180
    while not os.path.exists(ports):
        if p.poll() is not None or time.monotonic() > deadline:
            p.kill()
            raise RuntimeError("serve did not start:\n" + open(log.name).read())
        time.sleep(0.1)
    with open(ports) as f:
        out = json.load(f)
    out["metrics"] = metrics
    return p, out


def in_process(a, d, raw, want):
    """The in-process row: symphony.Server on the CPU device, numpy inputs."""
    import numpy as np
    import symphony

    sample = np.frombuffer(raw, dtype="<f4").reshape(3, 224, 224)
    model = os.path.join(d, "mean.pt")
    with symphony.Server(devices="cpu", policy="eager", profile_max_batch=a.max_batch, profile_repeats=3) as s:
        s.add_model("mean", model, inputs=["float32[3,224,224]"], slo_ms=5000.0, max_batch=a.max_batch,
                    profile=os.path.join(d, "mean.inprocess.profile.yaml"))
        s.start()
        for _ in range(20):
            got = float(s.infer("mean", sample).result(timeout=30).reshape(-1)[0])
            assert abs(got - want) < 1e-4, ("in process", got, want)
        per_client = max(1, a.requests // a.concurrency)
        times = [[] for _ in range(a.concurrency)]
        errors = []

        def client(i):
            try:
                for _ in range(per_client):
                    t0 = time.perf_counter()
                    got = float(s.infer("mean", sample).result(timeout=30).reshape(-1)[0])
                    times[i].append(time.perf_counter() - t0)
                    assert abs(got - want) < 1e-4, ("in process", got, want)
            except Exception as e:  # reported after the threads end
                errors.append(e)

        st0 = s.stats()["models"]["mean"]["staging"]
        cpu0 = time.process_time()
        w0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        wall = time.perf_counter() - w0
        if errors:
            raise errors[0]
        n = per_client * a.concurrency
        cpu = (time.process_time() - cpu0) / n
        st = s.stats()["models"]["mean"]["staging"]
        samples = st["samples"] - st0["samples"]
        copied = st["bytes_copied"] - st0["bytes_copied"]
        flat = sorted(x for ts in times for x in ts)
        return ("Python, in process", 0, flat[len(flat) // 2] * 1e3, flat[int(len(flat) * 0.9)] * 1e3,
                statistics.mean(flat) * 1e3, cpu * 1e3, n / wall, copied / samples if samples else 0.0)


def grpc_stubs(out):
    proto = os.path.join(ROOT, "front", "proto")
    config = os.path.join(ROOT, "repository", "proto")
    subprocess.run(["protoc", "-I", proto, "-I", config, "--python_out=" + out, "--grpc_out=" + out,
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", os.path.join(proto, "inference.proto"),
                    os.path.join(config, "model_config.proto")], check=True, timeout=60)
    sys.path.insert(0, out)
    import inference_pb2
    import inference_pb2_grpc
    return inference_pb2, inference_pb2_grpc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--symphony", default=os.path.join(ROOT, "build", "release", "symphony"))
    ap.add_argument("--requests", type=int, default=200, help="measured requests per way (after 20 warm-up)")
    ap.add_argument("--concurrency", type=int, default=1, help="clients sending at once (at most 64)")
    ap.add_argument("--max-batch", type=int, default=2, help="the model's max batch")
    ap.add_argument("--in-process", action="store_true", help="also serve it with symphony.Server in this process")
    a = ap.parse_args()
    a.concurrency = max(1, min(a.concurrency, 64))

    values = [((i * 7919) % 1000) / 1000.0 for i in range(N)]
    want = sum(struct.unpack("<%df" % N, struct.pack("<%df" % N, *values))) / N
    raw = struct.pack("<%df" % N, *values)
    d = tempfile.mkdtemp(prefix="symphony-shm-bench-")
    serve, ports = start_serve(a.symphony, d, a.max_batch)
    shm = shared_memory.SharedMemory(name="symphony_bench_%d" % os.getpid(), create=True, size=len(raw) + 4096)
    try:
        shm.buf[:len(raw)] = raw
        host, port = ports["http"].rsplit(":", 1)
        conns = [http.client.HTTPConnection(host, port, timeout=30) for _ in range(a.concurrency)]

        def post(i, path, body, headers=None):
            conns[i].request("POST", path, body=body, headers=headers or {"Content-Type": "application/json"})
            r = conns[i].getresponse()
            return r.status, r.getheaders(), r.read()

        key = "/" + shm.name
        st, _, out = post(0, "/v2/systemsharedmemory/region/bench/register",
                          json.dumps({"key": key, "offset": 0, "byte_size": len(raw) + 4096}).encode())
        assert st == 200, out
        inp = {"name": "input", "datatype": "FP32", "shape": SHAPE}
        json_body = json.dumps({"inputs": [dict(inp, data=values)]}).encode()
        bin_header = json.dumps({"inputs": [dict(inp, parameters={"binary_data_size": len(raw)})],
                                 "outputs": [{"name": "output", "parameters": {"binary_data": True}}]}).encode()
        shm_params = {"shared_memory_region": "bench", "shared_memory_byte_size": len(raw)}

        def out_params(i):  # client i's answer goes to its own 4 bytes after the input
            return {"shared_memory_region": "bench", "shared_memory_offset": len(raw) + 4 * i,
                    "shared_memory_byte_size": 4}

        shm_bodies = [json.dumps({"inputs": [dict(inp, parameters=shm_params)],
                                  "outputs": [{"name": "output", "parameters": out_params(i)}]}).encode()
                      for i in range(a.concurrency)]

        def rest_json(i):
            st, _, out = post(i, "/v2/models/mean/infer", json_body)
            assert st == 200, out[:300]
            return json.loads(out)["outputs"][0]["data"][0]

        def rest_binary(i):
            st, h, out = post(i, "/v2/models/mean/infer", bin_header + raw,
                              {"Content-Type": "application/octet-stream",
                               "Inference-Header-Content-Length": str(len(bin_header))})
            assert st == 200, out[:300]
            n = int(dict((k.lower(), v) for k, v in h)["inference-header-content-length"])
            return struct.unpack("<f", out[n:n + 4])[0]

        def rest_shm(i):
            st, _, out = post(i, "/v2/models/mean/infer", shm_bodies[i])
            assert st == 200, out[:300]
            return struct.unpack_from("<f", shm.buf, len(raw) + 4 * i)[0]

        pb, pb_grpc = grpc_stubs(d)
        import grpc
        ch = grpc.insecure_channel(ports["grpc"], options=[("grpc.max_send_message_length", 64 << 20),
                                                           ("grpc.max_receive_message_length", 64 << 20)])
        stub = pb_grpc.GRPCInferenceServiceStub(ch)
        g_raw = pb.ModelInferRequest(model_name="mean")
        g_raw.inputs.add(name="input", datatype="FP32", shape=SHAPE)
        g_raw.raw_input_contents.append(raw)
        g_shm = []
        for i in range(a.concurrency):
            g = pb.ModelInferRequest(model_name="mean")
            t = g.inputs.add(name="input", datatype="FP32", shape=SHAPE)
            t.parameters["shared_memory_region"].string_param = "bench"
            t.parameters["shared_memory_byte_size"].int64_param = len(raw)
            o = g.outputs.add(name="output")
            for k, v in out_params(i).items():
                if isinstance(v, str):
                    o.parameters[k].string_param = v
                else:
                    o.parameters[k].int64_param = v
            g_shm.append(g)

        def grpc_raw(i):
            return struct.unpack("<f", stub.ModelInfer(g_raw, timeout=30).raw_output_contents[0])[0]

        def grpc_shm(i):
            stub.ModelInfer(g_shm[i], timeout=30)
            return struct.unpack_from("<f", shm.buf, len(raw) + 4 * i)[0]

        ways = [("REST, JSON", rest_json, len(json_body)), ("REST, binary", rest_binary, len(bin_header) + len(raw)),
                ("REST, shared memory", rest_shm, len(shm_bodies[0])), ("gRPC, raw", grpc_raw, g_raw.ByteSize()),
                ("gRPC, shared memory", grpc_shm, g_shm[0].ByteSize())]
        per_client = max(1, a.requests // a.concurrency)
        rows = []
        for name, call, sent in ways:
            for _ in range(20):
                got = call(0)
                assert abs(got - want) < 1e-4, (name, got, want)
            times = [[] for _ in range(a.concurrency)]
            errors = []

            def client(i):
                try:
                    for _ in range(per_client):
                        t0 = time.perf_counter()
                        got = call(i)
                        times[i].append(time.perf_counter() - t0)
                        assert abs(got - want) < 1e-4, (name, got, want)
                except Exception as e:  # reported after the threads end
                    errors.append(e)

            copied0 = metric(ports["metrics"], "symphony_staged_bytes_copied_total")
            samples0 = metric(ports["metrics"], "symphony_staged_samples_total")
            cpu0 = proc_cpu_s(serve.pid)
            w0 = time.perf_counter()
            threads = [threading.Thread(target=client, args=(i,)) for i in range(a.concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=600)
            wall = time.perf_counter() - w0
            if errors:
                raise errors[0]
            n = per_client * a.concurrency
            cpu = (proc_cpu_s(serve.pid) - cpu0) / n
            samples = metric(ports["metrics"], "symphony_staged_samples_total") - samples0
            copied = metric(ports["metrics"], "symphony_staged_bytes_copied_total") - copied0
            flat = sorted(x for ts in times for x in ts)
            rows.append((name, sent, flat[len(flat) // 2] * 1e3, flat[int(len(flat) * 0.9)] * 1e3,
                         statistics.mean(flat) * 1e3, cpu * 1e3, n / wall, copied / samples if samples else 0.0))
            print(f"{name}: p50 {rows[-1][2]:.2f} ms, {rows[-1][6]:.0f} r/s", file=sys.stderr, flush=True)
        ch.close()
        if a.in_process:
            rows.append(in_process(a, d, raw, want))
            print(f"{rows[-1][0]}: p50 {rows[-1][2]:.2f} ms, {rows[-1][6]:.0f} r/s", file=sys.stderr, flush=True)
        print(f"concurrency {a.concurrency}, max batch {a.max_batch}, {per_client * a.concurrency} requests per way")
        print("| way | bytes sent per request | round trip p50 (ms) | p90 (ms) | mean (ms) | serve CPU per request (ms) "
              "| requests/s | bytes copied per sample to batch |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r[0]} | {r[1]:,} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.0f} | {r[7]:,.0f} |")
    finally:
        shm.close()
        shm.unlink()
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
