#!/usr/bin/env bash
# The main job: serve models on whatever devices this machine has (every CUDA
# GPU, else the CPU) with deferred batch scheduling, to Open Inference Protocol
# (KServe v2) clients over HTTP and gRPC, under load sent from a separate
# process, and print the summary.
#
# Installs missing Debian packages, builds the `symphony` tool, exports three
# torchvision models to TorchScript with random weights (once, into
# data/models/), then
#   1. starts `symphony serve examples/demo.yaml --no-load --http 127.0.0.1:8000
#      --grpc 127.0.0.1:8001`: it profiles each model on the first run (the
#      profile is saved beside the model) and serves until stopped;
#   2. runs `symphony load --config examples/demo.yaml --url http://127.0.0.1:8000`,
#      a separate process that sends the config's Poisson load (30 s) through
#      the protocol with a live progress line, and prints per-model outcomes
#      and latencies as the clients saw them;
#   3. stops serve with SIGTERM: it drains, and prints what the front answered
#      per model and the busy fraction of each device.
# While it runs, any client can send requests too (README: a curl example).
# Extra arguments go to `symphony serve`, e.g.
#   ./scripts/demo.sh --policy eager --json report.json
# SYMPHONY_DEMO_HTTP and SYMPHONY_DEMO_GRPC change the addresses.
source "$(dirname "$0")/common.sh"
step "configuring (preset release)"
cmake --preset release >/dev/null
step "building the symphony tool"
cmake --build --preset release -j "$jobs" --target symphony_cli
step "exporting the demo models (skipped when present)"
/usr/bin/python3 scripts/export_demo_models.py data/models

bin=./build/release/symphony
http="${SYMPHONY_DEMO_HTTP:-127.0.0.1:8000}"
grpc="${SYMPHONY_DEMO_GRPC:-127.0.0.1:8001}"
work=$(mktemp -d /tmp/symphony-demo-XXXXXX)
serve_pid=""
cleanup() {
  if [[ -n "$serve_pid" ]] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

step "serving examples/demo.yaml on http://$http and grpc $grpc"
"$bin" serve examples/demo.yaml --no-load --http "$http" --grpc "$grpc" --port-file "$work/ports.json" --quiet "$@" &
serve_pid=$!
# Profiling the models on the first run takes a minute or two on a small CPU.
for _ in $(seq 1 1800); do
  [[ -f "$work/ports.json" ]] && break
  if ! kill -0 "$serve_pid" 2>/dev/null; then
    wait "$serve_pid" || true
    echo "error: symphony serve exited before serving (see above)" >&2
    exit 1
  fi
  sleep 0.5
done
if [[ ! -f "$work/ports.json" ]]; then
  echo "error: symphony serve did not start serving within 15 minutes" >&2
  exit 1
fi
echo "serving; from another terminal try: curl -s http://$http/v2/models/resnet18" >&2

step "sending the demo's load through the protocol from a separate process (symphony load)"
"$bin" load --config examples/demo.yaml --url "http://$http"

step "stopping serve (SIGTERM): what the front answered, and how busy each device was"
kill -TERM "$serve_pid"
rc=0
wait "$serve_pid" || rc=$?
serve_pid=""
exit "$rc"
