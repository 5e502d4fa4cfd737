#!/usr/bin/python3
"""A small Open Inference Protocol (KServe v2) server for testing `symphony load`.

Serves the model `echo` (FP32 [-1, 4], returns its input as `output0`) over
HTTP/REST (http.server, HTTP/1.1 keep-alive; JSON and binary tensors) and over
gRPC (grpcio, stubs generated from front/proto/inference.proto into --stubs).
It is not Symphony and was not written from Symphony's code: it answers the
way the protocol says, and, for requests picked by a counter (one counter per
protocol, in arrival order), with the outcomes a load generator must tell
apart:

  n == 7           never answered (until the server stops)
  n % 20 == 3      504 / DEADLINE_EXCEEDED   (Symphony: dropped, infeasible)
  n % 20 == 6      429 / RESOURCE_EXHAUSTED  (Symphony: dropped, queue_full)
  n % 20 == 9      500 / INTERNAL "test failure"
  n % 20 == 12     late: with --headers on, 200 + Symphony-Outcome: late;
                   with --headers off, answered after --late-sleep-ms
  n % 20 == 15     HTTP: the connection is closed without an answer; gRPC: ok
  n % 20 == 18     503 / UNAVAILABLE         (Symphony: dropped, shutdown)
  n % 20 == 1      HTTP with --slow-ok-sleep-ms: answered ok (Symphony-Outcome: ok
                   with --headers on) after that sleep, as a server whose clock
                   missed the time before it (slow_ok)
  otherwise        ok

With --headers on every answer carries Symphony-Outcome (and
Symphony-Drop-Reason on drops), as trailing metadata over gRPC; with
--headers off none does. GET /test/tallies returns how many requests of each
class each protocol saw, the largest budget a request carried (REST
"timeout" in microseconds, or the gRPC deadline, else its "timeout"), and how many requests were
malformed ("bad"). The model `broken` has unusable metadata (datatype FP99).
With --idle-timeout, HTTP connections idle that long are closed.

Writes {"http": PORT, "grpc": PORT} to --ready once both listen; stops on
SIGTERM or SIGINT.
"""
import argparse
import json
import os
import signal
import struct
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ECHO_META = {
    "name": "echo",
    "versions": ["1"],
    "platform": "test_python",
    "inputs": [{"name": "input0", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "output0", "datatype": "FP32", "shape": [-1, 4]}],
}
BROKEN_META = {
    "name": "broken",
    "versions": ["1"],
    "platform": "test_python",
    "inputs": [{"name": "x", "datatype": "FP99", "shape": [-1, 4]}],
    "outputs": [],
}
CLASSES = ["ok", "slow_ok", "late", "deadline", "overload", "error", "closed", "unavailable", "hang", "bad"]

STOP = threading.Event()  # releases the hung requests


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.next = 0
        self.counts = {c: 0 for c in CLASSES}
        self.total = 0
        self.max_budget_us = 0
        self.requests_with_budget = 0
        self.priorities = {}  # the `priority` parameter's value (as a string; "none": absent) -> requests

    def take(self):
        with self.lock:
            n = self.next
            self.next += 1
            self.total += 1
            return n

    def add_priority(self, priority):
        with self.lock:
            key = "none" if priority is None else str(priority)
            self.priorities[key] = self.priorities.get(key, 0) + 1

    def add(self, cls, budget_us=None):
        with self.lock:
            self.counts[cls] += 1
            if budget_us is not None:
                self.requests_with_budget += 1
                self.max_budget_us = max(self.max_budget_us, budget_us)

    def snapshot(self):
        with self.lock:
            return {"counts": dict(self.counts), "total": self.total, "max_budget_us": self.max_budget_us,
                    "requests_with_budget": self.requests_with_budget, "priorities": dict(self.priorities)}


TALLY = {"http": Tally(), "grpc": Tally()}


def pick(n, grpc, slow_ok=False):
    if n == 7:
        return "hang"
    r = n % 20
    if r == 1 and slow_ok and not grpc:
        return "slow_ok"
    return {3: "deadline", 6: "overload", 9: "error", 12: "late", 15: "ok" if grpc else "closed",
            18: "unavailable"}.get(r, "ok")


DROP = {"deadline": (504, "infeasible"), "overload": (429, "queue_full"), "unavailable": (503, "shutdown")}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "oip-test/1"
    disable_nagle_algorithm = True  # the head and the body go out as two writes

    def log_message(self, *args):
        pass

    def send(self, status, body, headers=()):
        data = json.dumps(body).encode() if not isinstance(body, bytes) else body
        self.send_response(status)
        ctype = "application/json"
        for k, v in headers:
            if k == "Content-Type":
                ctype = v
            else:
                self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v2/models/echo":
            self.send(200, ECHO_META)
        elif self.path == "/v2/models/broken":
            self.send(200, BROKEN_META)
        elif self.path == "/test/tallies":
            self.send(200, {k: t.snapshot() for k, t in TALLY.items()})
        else:
            self.send(404, {"error": "unknown model or path " + self.path})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path != "/v2/models/echo/infer":
            self.send(404, {"error": "unknown model"})
            return
        tally = TALLY["http"]
        n = tally.take()
        cls = pick(n, False, self.server.slow_ok_sleep > 0)
        symphony = self.server.headers_on
        try:
            hlen = int(self.headers.get("Inference-Header-Content-Length", len(body)))
            req = json.loads(body[:hlen])
            params = req.get("parameters", {})
            budget = params.get("timeout")
            tally.add_priority(params.get("priority"))
            (inp,) = req["inputs"]
            assert inp["name"] == "input0" and inp["datatype"] == "FP32" and inp["shape"] == [1, 4], inp
            if "data" in inp:
                values = [float(v) for v in inp["data"]]
                assert len(values) == 4 and hlen == len(body)
                raw = struct.pack("<4f", *values)
            else:
                assert inp["parameters"]["binary_data_size"] == 16 and len(body) - hlen == 16
                raw = body[hlen:]
            binary_out = bool(params.get("binary_data_output")) or any(
                o.get("parameters", {}).get("binary_data") for o in req.get("outputs", []))
        except Exception as e:  # malformed: counted apart, answered 400
            tally.add("bad")
            self.send(400, {"error": "bad request: %r" % (e,)})
            return
        tally.add(cls, budget)
        if cls == "hang":
            STOP.wait(120)
            self.close_connection = True
            return
        if cls == "closed":
            self.close_connection = True
            return
        headers = []
        if cls in DROP:
            status, reason = DROP[cls]
            if symphony:
                headers = [("Symphony-Outcome", "dropped"), ("Symphony-Drop-Reason", reason)]
            self.send(status, {"error": "dropped by the test server (%s)" % cls}, headers)
            return
        if cls == "error":
            if symphony:
                headers = [("Symphony-Outcome", "error")]
            self.send(500, {"error": "test failure"}, headers)
            return
        if cls == "late" and not symphony:
            STOP.wait(self.server.late_sleep)
        if cls == "slow_ok":
            STOP.wait(self.server.slow_ok_sleep)
        if symphony:
            headers = [("Symphony-Outcome", "late" if cls == "late" else "ok")]
        out = {"name": "output0", "datatype": "FP32", "shape": [1, 4]}
        resp = {"model_name": "echo", "model_version": "1", "id": req.get("id", ""), "outputs": [out]}
        if binary_out:
            out["parameters"] = {"binary_data_size": len(raw)}
            head = json.dumps(resp).encode()
            headers += [("Inference-Header-Content-Length", str(len(head))),
                        ("Content-Type", "application/octet-stream")]
            self.send(200, head + raw, headers)
        else:
            out["data"] = list(struct.unpack("<4f", raw))
            self.send(200, resp, headers)


def make_grpc_server(stubs, headers_on, late_sleep):
    sys.path.insert(0, stubs)
    import grpc
    import inference_pb2 as pb
    import inference_pb2_grpc as pbg

    class Service(pbg.GRPCInferenceServiceServicer):
        def ServerLive(self, request, context):
            return pb.ServerLiveResponse(live=True)

        def ServerReady(self, request, context):
            return pb.ServerReadyResponse(ready=True)

        def ModelReady(self, request, context):
            return pb.ModelReadyResponse(ready=request.name == "echo")

        def ModelMetadata(self, request, context):
            meta = {"echo": ECHO_META, "broken": BROKEN_META}.get(request.name)
            if meta is None:
                context.set_code(grpc.StatusCode.NOT_FOUND)
                context.set_details("unknown model " + request.name)
                return pb.ModelMetadataResponse()
            r = pb.ModelMetadataResponse(name=meta["name"], versions=meta["versions"], platform=meta["platform"])
            for t in meta["inputs"]:
                r.inputs.add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
            for t in meta["outputs"]:
                r.outputs.add(name=t["name"], datatype=t["datatype"], shape=t["shape"])
            return r

        def ModelInfer(self, request, context):
            tally = TALLY["grpc"]
            n = tally.take()
            cls = pick(n, True)
            tally.add_priority(request.parameters["priority"].uint64_param if "priority" in request.parameters
                               else None)
            left = context.time_remaining()
            budget = None if left is None or left > 1e6 else int(left * 1e6)
            if budget is None and "timeout" in request.parameters:  # no deadline: the parameter
                budget = request.parameters["timeout"].int64_param
            ok = (request.model_name == "echo" and len(request.inputs) == 1 and request.inputs[0].name == "input0"
                  and request.inputs[0].datatype == "FP32" and list(request.inputs[0].shape) == [1, 4]
                  and len(request.raw_input_contents) == 1 and len(request.raw_input_contents[0]) == 16)
            if not ok:
                tally.add("bad")
                context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
                context.set_details("bad request")
                return pb.ModelInferResponse()
            tally.add(cls, budget)
            if cls == "hang":
                STOP.wait(120)
                context.set_code(grpc.StatusCode.UNAVAILABLE)
                context.set_details("stopping")
                return pb.ModelInferResponse()
            codes = {"deadline": grpc.StatusCode.DEADLINE_EXCEEDED, "overload": grpc.StatusCode.RESOURCE_EXHAUSTED,
                     "unavailable": grpc.StatusCode.UNAVAILABLE}
            if cls in codes:
                if headers_on:
                    context.set_trailing_metadata((("symphony-outcome", "dropped"),
                                                   ("symphony-drop-reason", DROP[cls][1])))
                context.set_code(codes[cls])
                context.set_details("dropped by the test server (%s)" % cls)
                return pb.ModelInferResponse()
            if cls == "error":
                if headers_on:
                    context.set_trailing_metadata((("symphony-outcome", "error"),))
                context.set_code(grpc.StatusCode.INTERNAL)
                context.set_details("test failure")
                return pb.ModelInferResponse()
            if cls == "late" and not headers_on:
                STOP.wait(late_sleep)
            if headers_on:
                context.set_trailing_metadata((("symphony-outcome", "late" if cls == "late" else "ok"),))
            r = pb.ModelInferResponse(model_name="echo", model_version="1", id=request.id)
            r.outputs.add(name="output0", datatype="FP32", shape=[1, 4])
            r.raw_output_contents.append(request.raw_input_contents[0])
            return r

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    pbg.add_GRPCInferenceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    return server, port


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stubs", required=True, help="directory with inference_pb2.py and inference_pb2_grpc.py")
    ap.add_argument("--ready", required=True, help="file to write the ports to")
    ap.add_argument("--headers", choices=["on", "off"], default="on")
    ap.add_argument("--late-sleep-ms", type=float, default=300)
    ap.add_argument("--slow-ok-sleep-ms", type=float, default=0, help="HTTP: answer n %% 20 == 1 ok after this")
    ap.add_argument("--idle-timeout", type=float, default=None,
                    help="HTTP: close a keep-alive connection idle this many seconds (as real servers do)")
    a = ap.parse_args()
    Handler.timeout = a.idle_timeout
    headers_on = a.headers == "on"
    late_sleep = a.late_sleep_ms / 1000

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.headers_on = headers_on
    httpd.late_sleep = late_sleep
    httpd.slow_ok_sleep = a.slow_ok_sleep_ms / 1000
    grpc_server, grpc_port = make_grpc_server(a.stubs, headers_on, late_sleep)
    grpc_server.start()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"http": httpd.server_address[1], "grpc": grpc_port}, f)
    os.replace(tmp, a.ready)
    done.wait(600)  # bounded: a test server outliving its test stops by itself
    STOP.set()
    grpc_server.stop(1)
    httpd.shutdown()


if __name__ == "__main__":
    main()
