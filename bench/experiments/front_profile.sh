#!/usr/bin/env bash
# Where the CPU goes when the protocol front is loaded (bench/results/front.md): starts `symphony
# serve` (one emulated device, policy eager, a near-zero-cost model) or bench's front_echo, sends
# open-loop load with `symphony load` at RATE over PROTO, records every CPU with `perf record -e
# cpu-clock` (software sampling: this VM has no hardware counters) for a few seconds in the middle,
# and prints each busy thread of the server and the client bucketed by kind of code
# (bench/experiments/perf_buckets.py). 127.0.0.1 only; about 15 s.
#
#   bench/experiments/front_profile.sh serve|echo http|grpc RATE [BUILD_DIR (build/release)]
set -euo pipefail
cd "$(dirname "$0")/../.."
kind=${1:?serve or echo} proto=${2:?http or grpc} rate=${3:?requests/s} build=${4:-build/release}
command -v perf >/dev/null || { echo "error: perf is not installed" >&2; exit 2; }
tmp=$(mktemp -d)
spid="" lpid=""
trap '[[ -n $lpid ]] && kill "$lpid" 2>/dev/null; [[ -n $spid ]] && kill -INT "$spid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
cat > "$tmp/tiny.yaml" <<YAML
devices: emulated:1
policy: eager
models:
  - name: tiny
    input: float32[4]
    slo_ms: 10
    max_batch: 32
    alpha_ms: 0.001
    beta_ms: 0.01
YAML
if [[ $kind == serve ]]; then
  "$build/symphony" serve "$tmp/tiny.yaml" --http 127.0.0.1:0 --grpc 127.0.0.1:0 --port-file "$tmp/ports.json" --quiet \
    >"$tmp/server.log" 2>&1 &
else
  "$build/bench/front_echo" --http 127.0.0.1:0 --grpc 127.0.0.1:0 --port-file "$tmp/ports.json" >"$tmp/server.log" 2>&1 &
fi
spid=$!
for _ in $(seq 100); do [[ -s $tmp/ports.json ]] && break; sleep 0.1; done
addr=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$tmp/ports.json" "$proto")
"$build/symphony" load --url "$proto://$addr" --model tiny --rate "$rate" --budget 10 --duration 10 --warmup 2 --drain 5 \
  --quiet >"$tmp/load.out" 2>&1 &
lpid=$! cpid=$!
sleep 4
perf record -a -e cpu-clock -F 2999 -o "$tmp/perf.data" -- sleep 4 >/dev/null 2>&1
wait "$lpid"; lpid=""
sed -n '2,3p;5,6p' "$tmp/load.out"
echo "server $kind (pid $spid), client symphony load (pid $cpid); CPU % of one CPU over the 4 s recorded:"
python3 bench/experiments/perf_buckets.py "$tmp/perf.data" "$spid" "$cpid"
