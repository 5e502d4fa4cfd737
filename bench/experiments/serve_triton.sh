#!/usr/bin/env bash
# Symphony against Triton's dynamic batcher on `serve` (policy: triton), on the
# demo's three CPU models: for each policy and each load scale, starts
# `symphony serve` on the demo's repository (data/models/repository, written by
# scripts/export_demo_models.py), sends examples/demo.yaml's Poisson load
# scaled by the factor through the protocol from `symphony load`, stops serve,
# and prints one markdown row per run (good r/s, bad %, p50/p99 as the clients
# saw them; the device's busy share as serve reported it).
#
#   POLICIES="deferred:arrival_window=4,miss_gain=8 triton triton:max_queue_delay_us=5000" \
#   SCALES="1 2" bench/experiments/serve_triton.sh > rows.md
#
# Every run is bounded (serve starts within 5 minutes, the load is the config's
# 30 s); traffic stays on loopback. Run it alone: the CPU is the device.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${SYMPHONY_BIN:-build/release/symphony}
repo=data/models/repository
policies=${POLICIES:-"deferred:arrival_window=4,miss_gain=8 triton"}
scales=${SCALES:-"1 2"}
port=${PORT:-18200}
work=$(mktemp -d /tmp/symphony-serve-triton-XXXXXX)
serve_pid=""
cleanup() {
  if [[ -n "$serve_pid" ]] && kill -0 "$serve_pid" 2>/dev/null; then kill -TERM "$serve_pid"; wait "$serve_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "| policy | load | good r/s | bad % | p50 ms | p99 ms | CPU busy |"
echo "|---|---|---|---|---|---|---|"
for scale in $scales; do
  for policy in $policies; do
    rm -f "$work/ports.json"
    "$bin" serve examples/demo_repository.yaml --model-repository "$repo" --model-control-mode explicit \
      --load-model squeezenet1_1 --load-model shufflenet_v2_x0_5 --load-model resnet18 \
      --http "127.0.0.1:$port" --port-file "$work/ports.json" --quiet --policy "$policy" >"$work/serve.log" 2>&1 &
    serve_pid=$!
    for _ in $(seq 1 600); do
      [[ -f "$work/ports.json" ]] && break
      kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
      sleep 0.5
    done
    [[ -f "$work/ports.json" ]] || { echo "serve did not start" >&2; exit 1; }
    rate=$(/usr/bin/python3 -c "print(340 * $scale)")  # demo.yaml's rates sum to 340 r/s
    "$bin" load --config examples/demo.yaml --url "http://127.0.0.1:$port" --rate "$rate" --quiet \
      --json "$work/load.json" >/dev/null
    kill -TERM "$serve_pid"
    wait "$serve_pid" || true
    serve_pid=""
    busy=$(awk '$1 == "cpu:0" { print $2 }' "$work/serve.log" | tail -1)
    /usr/bin/python3 - "$work/load.json" "$policy" "$scale" "$busy" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
lat = r["latency_ms"]
print("| `%s` | %sx (%.0f r/s) | %.1f | %.2f | %.1f | %.1f | %s |" % (
    sys.argv[2], sys.argv[3], r["offered_rps"], r["goodput_rps"], 100 * r["bad_rate"], lat["p50"], lat["p99"],
    sys.argv[4]))
PY
  done
done
