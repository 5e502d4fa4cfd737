"""gRPC's open loop at 10x after a 4096-connection HTTP flood on one fresh `serve` (the device-bound
model of bench/overload_bench.py), with the server's own counts of each point read from its /metrics:
what the front received, and what the server ended ok, beside what the client counted."""
import json, os, re, sys, urllib.request
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import overload_bench as ob  # noqa: E402
out = sys.argv[1]; build = sys.argv[2]
os.makedirs(out, exist_ok=True)
a = ob.point_options(build)
s = ob.Serve(a, out, "device-bound", "on")
def counts():
    text = urllib.request.urlopen(s.metrics_url, timeout=30).read().decode()
    def total(name, match=""):
        return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name + "{") and match in l)
    return {"received": total("symphony_front_received_total"), "ok": total("symphony_requests_total", 'outcome="ok"'),
            "late": total("symphony_requests_total", 'outcome="late"'),
            "resp_s": [l.split()[-1] for l in text.splitlines() if l.startswith('symphony_delay_seconds{kind="resp"')]}
try:
    for proto, loop, x in [(p, l, x) for p, l, x in json.loads(sys.argv[3])]:
        url = f"{proto}://{s.ports[proto]}"
        before = counts()
        r = ob.load(a, out, url, rate=x * 1600) if loop == "open" else ob.load(a, out, url, concurrency=x)
        after = counts()
        server = {k: after[k] - before[k] for k in ("received", "ok", "late")}
        print(proto, loop, x, {k: r[k] for k in ("goodput_rps", "ok", "late", "dropped_by_reason", "client_cpu_s", "client_sent_late")},
              "server", server, "d_resp", after["resp_s"], flush=True)
finally:
    s.stop()
