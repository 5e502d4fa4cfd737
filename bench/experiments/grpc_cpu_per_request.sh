#!/usr/bin/env bash
# CPU seconds that `symphony serve` and the `symphony load` client spend per
# request over gRPC, on one emulated device (l(b) = 0.5 ms·b + 2 ms, max
# batch 16, SLO 40 ms: about 1600 r/s): an open loop at 1400 r/s and a
# closed-loop flood of 4096 connections, 6 s each. Prints one line per mode.
#
#   bench/experiments/grpc_cpu_per_request.sh BIN LABEL   # about 30 s
#
# Run two builds interleaved to compare them (bench/results/front.md).
set -euo pipefail
bin=$(realpath "$1")
label=$2
work=$(mktemp -d /tmp/grpc-cpu-XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/serve.yaml" <<'YAML'
devices: emulated:1
admission: true
models:
  - {name: m, input: "float32[4]", slo_ms: 40, max_batch: 16, alpha_ms: 0.5, beta_ms: 2}
YAML
for mode in open flood; do
  rm -f "$work/ports.json"
  "$bin" serve "$work/serve.yaml" --http 127.0.0.1:0 --grpc 127.0.0.1:0 --metrics 127.0.0.1:0 \
    --port-file "$work/ports.json" --quiet > "$work/serve.log" 2>&1 &
  serve=$!
  for _ in $(seq 1 100); do [[ -f "$work/ports.json" ]] && break; sleep 0.1; done
  [[ -f "$work/ports.json" ]] || { echo "serve did not start: $(cat "$work/serve.log")" >&2; kill "$serve"; exit 1; }
  sleep 0.3
  grpc=$(/usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['grpc'])" "$work/ports.json")
  before=$(awk '{print $14 + $15}' "/proc/$serve/stat")  # utime + stime, in clock ticks
  if [[ $mode == open ]]; then args=(--rate 1400); else args=(--concurrency 4096 --connections 4096); fi
  /usr/bin/time -f "%U %S" -o "$work/client.time" "$bin" load --url "grpc://$grpc" --model m --duration 6 \
    --warmup 0 --json "$work/load.json" --quiet --drain 5 "${args[@]}" > "$work/load.out" 2>&1
  after=$(awk '{print $14 + $15}' "/proc/$serve/stat")
  kill "$serve"
  wait "$serve" 2>/dev/null || true
  /usr/bin/python3 - "$label" "$mode" "$before" "$after" "$(getconf CLK_TCK)" "$work" <<'PY'
import json, sys
label, mode, before, after, tck, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
d = json.load(open(work + "/load.json"))
cu, cs = map(float, open(work + "/client.time").read().split()[-2:])
n = d["sent"]
s = (after - before) / tck
print(f"{label} {mode}: sent {n}, goodput {d['goodput_rps']:.0f} r/s; serve {s:.2f} s CPU = {s / n * 1e6:.0f} us/request; "
      f"client {cu + cs:.2f} s = {(cu + cs) / n * 1e6:.0f} us/request")
PY
done
