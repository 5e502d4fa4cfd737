"""Points of bench/experiments/backlog_share.py in a given order on one fresh `serve` (see the .txt)."""
import json, os, sys, urllib.request
ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import overload_bench as ob  # noqa: E402
out = sys.argv[1]; build = sys.argv[2]
os.makedirs(out, exist_ok=True)
a = ob.point_options(build)
s = ob.Serve(a, out, "device-bound", "on")
def delays():
    text = urllib.request.urlopen(s.metrics_url, timeout=30).read().decode()
    return [l.split()[-1] for l in text.splitlines() if l.startswith("symphony_delay_seconds")]
try:
    for proto, loop, x in [(p, l, x) for p, l, x in json.loads(sys.argv[3])]:
        url = f"{proto}://{s.ports[proto]}"
        r = ob.load(a, out, url, rate=x * 1600) if loop == "open" else ob.load(a, out, url, concurrency=x)
        print(proto, loop, x, {k: r[k] for k in ("goodput_rps", "p99_ms", "ok", "late", "dropped_by_reason", "client_cpu_s", "client_sent_late")}, delays(), flush=True)
finally:
    s.stop()
