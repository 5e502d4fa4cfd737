#!/usr/bin/env bash
# Throughput of the scheduler process over TCP loopback: 8 small models on 64
# emulated GPUs (two backends), 64-byte inputs, two load-generating frontends
# offering each rate for --duration seconds. For each rate prints offered and
# good requests/s, the bad rate, and the scheduler's CPU time per request
# (its user+system CPU between two reports taken under load, divided by the
# requests it received meanwhile).
#
#   bench/cluster/throughput.sh [--rates "50000 100000 150000"] [--duration 10] [--json FILE]
#
# The issue's target: >= 100 k requests/s with <= 1 % bad on a 2-core VM.
cd "$(dirname "$0")/../.."
rates="25000 50000 100000 150000"
duration=10
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rates) rates="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --json) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
source bench/cluster/common.sh
config=bench/cluster/throughput.yaml

printf '%10s %10s %10s %9s %14s\n' "target" "offered" "good" "bad %" "sched us/req" >&2
results="[]"
for rate in $rates; do
  start_scheduler "$config" 127.0.0.1:0
  addr="127.0.0.1:$SCHED_PORT"
  start_backend "$config" "$addr" emulated:32 b1
  start_backend "$config" "$addr" emulated:32 b2
  wait_registered 2
  half=$(/usr/bin/python3 -c "print($rate / 2)")
  lg=()
  for f in 1 2; do
    "$BIN" loadgen --scheduler "$addr" --config "$config" --duration "$duration" --warmup 2 --rate "$half" \
      --seed "$f" --name "fe$f" --max-pending 131072 --json "$WORK/fe$f.json" --quiet >"$WORK/fe$f.log" 2>&1 &
    lg+=($!)
  done
  sleep 3  # past the warm-up
  cp "$WORK/scheduler.json" "$WORK/before.json"
  sleep $(/usr/bin/python3 -c "print(max(1, $duration - 4))")
  cp "$WORK/scheduler.json" "$WORK/after.json"
  for p in "${lg[@]}"; do wait "$p"; done
  stop_all
  row=$(/usr/bin/python3 - "$WORK" "$rate" <<'PY'
import json, sys
w, rate = sys.argv[1], float(sys.argv[2])
fe = [json.load(open(f"{w}/fe{i}.json")) for i in (1, 2)]
b, a = json.load(open(f"{w}/before.json")), json.load(open(f"{w}/after.json"))
sent = sum(f["sent"] for f in fe); ok = sum(f["ok"] for f in fe); window = fe[0]["duration_s"]
dreq = a["submitted"] - b["submitted"]
r = {"target_rps": rate, "offered_rps": sent / window, "goodput_rps": ok / window,
     "bad_rate": (sent - ok) / sent if sent else 0.0,
     "late": sum(f["late"] for f in fe), "dropped": sum(f["dropped"] for f in fe), "errors": sum(f["errors"] for f in fe),
     "scheduler_cpu_us_per_request": (a["cpu_seconds"] - b["cpu_seconds"]) * 1e6 / dreq if dreq else None,
     "median_batch": max(f["median_batch"] for f in fe)}
print(json.dumps(r))
PY
)
  /usr/bin/python3 -c "
import json,sys; r=json.loads(sys.argv[1])
print('%10.0f %10.0f %10.0f %9.3f %14s' % (r['target_rps'], r['offered_rps'], r['goodput_rps'], 100*r['bad_rate'], '%.2f' % r['scheduler_cpu_us_per_request'] if r['scheduler_cpu_us_per_request'] else '-'))" "$row" >&2
  results=$(/usr/bin/python3 -c "import json,sys; l=json.loads(sys.argv[1]); l.append(json.loads(sys.argv[2])); print(json.dumps(l))" "$results" "$row")
done
if [[ -n "$out" ]]; then echo "$results" | /usr/bin/python3 -m json.tool >"$out"; echo "wrote $out" >&2; fi
