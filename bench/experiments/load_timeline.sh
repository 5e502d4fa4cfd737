#!/usr/bin/env bash
# What a model load costs the models serving beside it, as ./scripts/demo.sh
# loads one: serves the demo's three models from data/models/repository with
# BIN (`symphony serve`, the demo's flags), sends examples/demo.yaml's load,
# loads mobilenet_v2 12 s in, sends it three requests and unloads it, while
# serve's /metrics are read every 50 ms. Prints one line: the load's time,
# its leased warm-up runs (serve's log), the three others' bad requests
# during the load and in the 7 s before it, and the showcase's answers.
#
#   bench/experiments/load_timeline.sh BIN OUT_DIR   # about 45 s; run ./scripts/demo.sh once first
#
# Uses 127.0.0.1:8000-8002 as the demo does; keeps serve's log, the load's
# report and the timeline in OUT_DIR.
set -euo pipefail
bin=$1
out=$2
cd "$(dirname "$0")/../.."
[[ -d data/models/repository/mobilenet_v2 ]] || { echo "run ./scripts/demo.sh once first (it exports the models)" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out/ports.json" "$out/phases.txt"
source scripts/model_control.sh  # demo_serve_args
"$bin" "${demo_serve_args[@]}" \
  --http 127.0.0.1:8000 --grpc 127.0.0.1:8001 --metrics 127.0.0.1:8002 --port-file "$out/ports.json" --quiet \
  > "$out/serve.out" 2> >(/usr/bin/python3 -u -c '
import sys, time
for line in sys.stdin:
    sys.stdout.write("%.3f %s" % (time.time(), line))
    sys.stdout.flush()' > "$out/serve.log") &
serve_pid=$!
trap 'kill -TERM $serve_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [[ -f "$out/ports.json" ]] && break; sleep 0.5; done
[[ -f "$out/ports.json" ]] || { echo "serve did not start (see $out/serve.log)" >&2; exit 1; }
"$bin" load --config examples/demo.yaml --url http://127.0.0.1:8000 --quiet --json "$out/load.json" > "$out/load.txt" 2>&1 &
load_pid=$!
/usr/bin/python3 - "$out" <<'PY' &
import re, sys, time, urllib.request
out = open(sys.argv[1] + "/timeline.txt", "w")
end = time.time() + 33
while time.time() < end:
    try:
        text = urllib.request.urlopen("http://127.0.0.1:8002/metrics", timeout=2).read().decode()
    except Exception:
        break
    c = {}
    for m in re.finditer(r'symphony_requests_total\{([^}]*)\} (\S+)', text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("model") != "mobilenet_v2":
            c[labels["outcome"]] = c.get(labels["outcome"], 0) + float(m.group(2))
    out.write("%.3f %s\n" % (time.time(), " ".join("%s=%d" % kv for kv in sorted(c.items()))))
    out.flush()
    time.sleep(0.05)
PY
sampler_pid=$!
sleep 12
body=$(/usr/bin/python3 -c 'import json; print(json.dumps({"inputs": [{"name": "input", "datatype": "FP32",
  "shape": [1, 3, 64, 64], "data": [0.5] * (3 * 64 * 64)}]}))')
echo "$(date +%s.%N) load" >> "$out/phases.txt"
curl -sS -X POST http://127.0.0.1:8000/v2/repository/models/mobilenet_v2/load > /dev/null
echo "$(date +%s.%N) loaded" >> "$out/phases.txt"
for _ in 1 2 3; do
  curl -sS -o /dev/null -w "%{http_code} %{time_total}\n" -X POST -H 'Content-Type: application/json' \
    --data-binary "$body" http://127.0.0.1:8000/v2/models/mobilenet_v2/infer >> "$out/phases.txt"
done
curl -sS -X POST http://127.0.0.1:8000/v2/repository/models/mobilenet_v2/unload > /dev/null
wait $load_pid
kill -TERM $serve_pid
wait $serve_pid || true
wait $sampler_pid || true
trap - EXIT
/usr/bin/python3 - "$out" <<'PY'
import re, sys
d = sys.argv[1]
phases = [l.split() for l in open(d + "/phases.txt")]
t0, t1 = float(phases[0][0]), float(phases[1][0])
rows = []
for line in open(d + "/timeline.txt"):
    p = line.split()
    rows.append((float(p[0]), {k: int(v) for k, v in (x.split("=") for x in p[1:])}))
def at(t):  # the last reading at or before t
    return [c for s, c in rows if s <= t][-1]
bad = lambda c: sum(v for k, v in c.items() if k != "ok")
ended = lambda c: sum(c.values())
before, start, end = at(t0 - 7), at(t0), at(t1 + 0.05)
m = re.search(r"(\d+) warm-up and profile runs held their device in gaps of its schedule \(waited (\S+) s in all, "
              r"at most (\S+) ms for one; they ran (\S+) s[^;)]*(?:; (\d+) outlasted their gap, by up to (\S+) ms)?\)",
              open(d + "/serve.log").read())
runs = "%s leased runs (waited %s s, at most %.0f ms for one; ran %s s; %s outlasted their gap%s)" % (
    m.group(1), m.group(2), float(m.group(3)), m.group(4), m.group(5) or "none",
    ", by up to %s ms" % m.group(6) if m.group(5) else "") if m else "no leased run"
print("load %.0f ms, %s; the others bad during it %d of %d, in the 7 s before %d of %d; showcase %s" % (
    (t1 - t0) * 1000, runs, bad(end) - bad(start), ended(end) - ended(start), bad(start) - bad(before),
    ended(start) - ended(before), ", ".join("%s in %.0f ms" % (p[0], 1000 * float(p[1])) for p in phases[2:5])))
PY
