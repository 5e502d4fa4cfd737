#!/bin/bash
# One gRPC closed-loop point (N connections, default 4096) against `serve`
# with serve.yaml (backlog_share.py's device-bound model), `serve` on CPU 0
# and `symphony load --grpc-budget timeout` on CPU 1, the front's stage times
# traced (SYMPHONY_FRONT_TRACE) and the tried read-lag probe's gauge read
# from /metrics every 0.5 s. B: a folder holding the build's `symphony` (the
# tried change, tried-change.diff). Run in a copy of this folder:
#   ./closed-4096.sh B 4096 > closed-4096-lag.txt
B=${1:-/tmp/v-on}; N=${2:-4096}
rm -f ports.json
SYMPHONY_FRONT_TRACE=/tmp/rp/man/trace.json taskset -c 0 $B/symphony serve serve.yaml --http 127.0.0.1:0 --grpc 127.0.0.1:0 --metrics 127.0.0.1:0 --port-file ports.json --quiet > serve.log 2>&1 &
sp=$!
for i in $(seq 100); do [ -s ports.json ] && break; sleep 0.1; done
grpc=$(python3 -c 'import json;print(json.load(open("ports.json"))["grpc"])')
url=$(sed -n 's|^metrics: listening on \(http://[^ ]*\)$|\1|p' serve.log)
taskset -c 1 $B/symphony load --url grpc://$grpc --model m --duration 5 --warmup 1 --json load.json --quiet --drain 5 --budget 40 --grpc-budget timeout --concurrency $N --connections $N > load.log 2>&1 &
lp=$!
for i in $(seq 24); do sleep 0.5; curl -s $url | grep -E "^symphony_front_grpc_read_(lag|probes)" | tr '\n' ' '; echo; done
wait $lp
kill $sp; wait $sp
python3 -c 'import json;j=json.load(open("load.json"));print("goodput",j["goodput_rps"],"late",j["late"],"dropped",j["dropped"], j["models"]["m"].get("dropped_by_reason"))'
