#!/usr/bin/env bash
# Two builds of `symphony` against each other where the HTTP front is the
# bottleneck: the CPU-bound model of bench/overload_bench.py (a few µs a
# batch, max batch 32, SLO 40 ms) on one emulated device, `serve` on CPU 0
# and `symphony load` (closed loop, each request's budget the 40 ms SLO,
# judged by the client) on CPU 1, at 64, 2048 and 4096 connections, 4 s a
# point, the two builds interleaved, ROUNDS rounds. One JSON line per point.
#
#   bench/experiments/cpu_bound_http_ab.sh DIR_A DIR_B [ROUNDS] > out.jsonl   # ~1 min a round
#
# DIR_A, DIR_B: folders holding each build's `symphony` (results:
# bench/results/front.md).
set -euo pipefail
a=$(realpath "$1")
b=$(realpath "$2")
rounds=${3:-3}
work=$(mktemp -d /tmp/cpu-bound-ab-XXXXXX)
trap 'kill "${sp:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
cat > "$work/serve.yaml" <<'YAML'
devices: emulated:1
admission: true
models:
  - {name: m, input: "float32[4]", slo_ms: 40, max_batch: 32, alpha_ms: 0.001, beta_ms: 0.01}
YAML
for round in $(seq "$rounds"); do
  for c in 64 2048 4096; do
    for dir in "$a" "$b"; do
      rm -f "$work/ports.json"
      taskset -c 0 "$dir/symphony" serve "$work/serve.yaml" --http 127.0.0.1:0 --port-file "$work/ports.json" \
        --quiet >"$work/serve.log" 2>&1 &
      sp=$!
      for _ in $(seq 100); do [[ -s "$work/ports.json" ]] && break; sleep 0.1; done
      http=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http"])' "$work/ports.json")
      taskset -c 1 "$dir/symphony" load --url "http://$http" --model m --duration 4 --warmup 1 --drain 2 \
        --budget 40 --concurrency "$c" --connections "$c" --json "$work/load.json" --quiet >/dev/null 2>&1
      kill "$sp"
      wait "$sp" 2>/dev/null || true
      /usr/bin/python3 - "$work/load.json" "$round" "$c" "$dir" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
m = j["models"]["m"]
print(json.dumps({"round": int(sys.argv[2]), "connections": int(sys.argv[3]), "build": sys.argv[4],
                  "goodput_rps": round(j["goodput_rps"]), "p99_ms": m["latency_ms"]["p99"], "sent": j["sent"],
                  "ok": j["ok"], "late": j["late"], "dropped": j["dropped"],
                  "client_cpu_s": j.get("client", {}).get("cpu_s")}))
PY
    done
  done
done
