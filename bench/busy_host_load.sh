#!/usr/bin/env bash
# A model loaded on a busy host (issue 37): `symphony serve` serves squeezenet1_1 from a copy of
# the demo's repository (explicit mode, the demo's server settings with a short profile: batches
# up to 8, 3 rounds); two busy loops at nice 0 (bounded: 120 s) take the two cores; resnet18 is
# loaded with no cached profile. Prints how long the load took and the first points of the profile
# it measured (batch, median, p90, p99 ms) beside serve's log of the load.
#
#   bench/busy_host_load.sh [SYMPHONY_BINARY] [PORT]
#
# Needs data/models (scripts/export_demo_models.py data/models) and curl.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/build/release/symphony}
PORT=${2:-8131}
D=$(mktemp -d /tmp/symphony-busy.XXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$D"' EXIT
for m in squeezenet1_1 resnet18; do
  mkdir -p "$D/repo/$m/1"
  cp "$ROOT/data/models/repository/$m/config.pbtxt" "$D/repo/$m/"
  cp "$ROOT/data/models/repository/$m/1/model.pt" "$D/repo/$m/1/"
done
cp "$ROOT"/data/models/repository/squeezenet1_1/1/*.profile.yaml "$D/repo/squeezenet1_1/1/"
# A slow profile must still load (resnet18's SLO is 150 ms): give it 5 s.
sed -i 's/string_value: "150"/string_value: "5000"/' "$D/repo/resnet18/config.pbtxt"
sed 's/profiling: {latency: p90, max_batch: 32, repeats: 20}/profiling: {latency: p90, max_batch: 8, repeats: 3}/' \
  "$ROOT/examples/demo_repository.yaml" > "$D/serve.yaml"
"$BIN" serve "$D/serve.yaml" --model-repository "$D/repo" --model-control-mode explicit \
  --load-model squeezenet1_1 --http "127.0.0.1:$PORT" --quiet > "$D/out" 2> "$D/err" &
for _ in $(seq 1 600); do curl -sf "localhost:$PORT/v2/health/ready" > /dev/null && break; sleep 0.2; done
timeout 120 sh -c 'while :; do :; done' &
timeout 120 sh -c 'while :; do :; done' &
start=$(date +%s.%N)
curl -s -X POST "localhost:$PORT/v2/repository/models/resnet18/load"; echo
end=$(date +%s.%N)
echo "load took $(echo "$end - $start" | bc) s"
grep -m3 '^  - \[' "$D"/repo/resnet18/1/*.profile.yaml
grep resnet18 "$D/err" | grep -v round || true
