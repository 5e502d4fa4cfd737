#!/usr/bin/env bash
# The main job: serve models on whatever devices this machine has (every CUDA
# GPU, else the CPU) with deferred batch scheduling, to Open Inference Protocol
# (KServe v2) clients over HTTP and gRPC, under load sent from a separate
# process, loading and unloading a model while it serves, and print the summary.
#
# Installs missing Debian packages, builds the `symphony` tool, exports four
# torchvision models to TorchScript with random weights (once, into
# data/models/) and lays them out as a model repository in Triton's layout
# (data/models/repository/<model>/config.pbtxt and 1/model.pt), then
#   1. starts `symphony serve examples/demo_repository.yaml --model-repository
#      data/models/repository --model-control-mode explicit --load-model ...`
#      with the three models of examples/demo.yaml, on --http 127.0.0.1:8000
#      and --grpc 127.0.0.1:8001: it profiles each model on the first run (the
#      profile is saved beside the model; the fourth model is profiled then
#      too, by a load and an unload) and serves until stopped;
#   2. runs `symphony load --config examples/demo.yaml --url http://127.0.0.1:8000`,
#      a separate process that sends the config's Poisson load (30 s) through
#      the protocol with a live progress line, and prints per-model outcomes
#      and latencies as the clients saw them; 12 s into it, the demo loads
#      the fourth model (mobilenet_v2) through the protocol's repository
#      extension, sends it three requests, and unloads it again, printing the
#      repository index before, between and after, and the three others' bad
#      rate before, during and after the load (serve's own counts, read from
#      its Prometheus endpoint on --metrics 127.0.0.1:8002);
#   3. stops serve with SIGTERM: it drains, and prints what the front answered
#      per model and the busy fraction of each device.
# While it runs, any client can send requests too (README: a curl example).
# Extra arguments go to `symphony serve`, e.g.
#   ./scripts/demo.sh --policy eager --json report.json
# With --compare-triton first, it serves the three models and sends the load
# twice instead, with the demo's policy and then with Triton's dynamic batcher
# (`--policy triton`, or SYMPHONY_DEMO_TRITON's spelling, e.g.
# triton:max_queue_delay_us=2000), and prints both side by side: good r/s, bad %
# and p99 as the clients saw them (docs/triton.md):
#   ./scripts/demo.sh --compare-triton
# SYMPHONY_DEMO_HTTP, SYMPHONY_DEMO_GRPC and SYMPHONY_DEMO_METRICS change the addresses.
compare_triton=0
if [[ "${1:-}" == --compare-triton ]]; then
  compare_triton=1
  shift
fi
source "$(dirname "$0")/common.sh"
step "configuring (preset release)"
cmake --preset release >/dev/null
step "building the symphony tool"
cmake --build --preset release -j "$jobs" --target symphony_cli
step "exporting the demo models (skipped when present)"
/usr/bin/python3 scripts/export_demo_models.py data/models

repo=data/models/repository
fourth=mobilenet_v2  # in the repository, loaded and unloaded while the load runs

bin=./build/release/symphony
http="${SYMPHONY_DEMO_HTTP:-127.0.0.1:8000}"
grpc="${SYMPHONY_DEMO_GRPC:-127.0.0.1:8001}"
metrics="${SYMPHONY_DEMO_METRICS:-127.0.0.1:8002}"
work=$(mktemp -d /tmp/symphony-demo-XXXXXX)
serve_pid=""
cleanup() {
  if [[ -n "$serve_pid" ]] && kill -0 "$serve_pid" 2>/dev/null; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  if [[ -n "$load_pid" ]] && kill -0 "$load_pid" 2>/dev/null; then
    kill -TERM "$load_pid" 2>/dev/null || true
    wait "$load_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
load_pid=""
trap cleanup EXIT

# demo_serve_args, repository, print_index, control, counts, control_window and print_bad_rates (serve's /metrics).
source scripts/model_control.sh  # the working directory is the repository root (common.sh)
metrics_urls=("http://$metrics/metrics")

if ((compare_triton)); then
  triton="${SYMPHONY_DEMO_TRITON:-triton}"
  # Serves the three models with serve's extra arguments $2..., sends the
  # demo's load, stops serve; the load's JSON report goes to $work/load.$1.json.
  serve_and_load() {
    local name=$1
    shift
    rm -f "$work/ports.json"
    step "[$name] serving examples/demo.yaml's three models from $repo ($*)"
    "$bin" "${demo_serve_args[@]}" --http "$http" --grpc "$grpc" --metrics "$metrics" --port-file "$work/ports.json" --quiet "$@" &
    serve_pid=$!
    for _ in $(seq 1 1800); do
      [[ -f "$work/ports.json" ]] && break
      kill -0 "$serve_pid" 2>/dev/null || { echo "error: symphony serve exited before serving" >&2; exit 1; }
      sleep 0.5
    done
    [[ -f "$work/ports.json" ]] || { echo "error: symphony serve did not start within 15 minutes" >&2; exit 1; }
    step "[$name] sending the demo's load (symphony load, a separate process)"
    "$bin" load --config examples/demo.yaml --url "http://$http" --quiet --json "$work/load.$name.json"
    kill -TERM "$serve_pid"
    wait "$serve_pid" || true
    serve_pid=""
  }
  serve_and_load symphony "$@"
  serve_and_load triton "$@" --policy "$triton"
  step "side by side (as the clients saw them; this machine's noise moves both by a few %)"
  /usr/bin/python3 - "$work/load.symphony.json" "$work/load.triton.json" "$triton" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def row(name, r):
    return "%-20s %10.1f %7.2f %8.1f" % (name, r["goodput_rps"], 100 * r["bad_rate"], r["latency_ms"]["p99"])
print("%-20s %32s   %32s" % ("", "Symphony (the demo's policy)", sys.argv[3]))
print("%-20s %10s %7s %8s     %10s %7s %8s" % ("model", "good r/s", "bad %", "p99 ms", "good r/s", "bad %", "p99 ms"))
for m in list(a["models"]) + ["total"]:
    ra, rb = (a, b) if m == "total" else (a["models"][m], b["models"][m])
    print(row(m, ra) + "     " + row("", rb)[21:])
PY
  exit 0
fi

if ! compgen -G "$repo/$fourth/1/*.profile.yaml" >/dev/null; then
  # First run: the fourth model is profiled now, so that its load during the
  # load phase finds its profile cached. Alone on the device: a profile
  # measured beside served models stops at their slack and is not saved.
  step "profiling $fourth alone before serving (first run only)"
  "$bin" serve examples/demo_repository.yaml --model-repository "$repo" --model-control-mode explicit \
    --load-model "$fourth" --http 127.0.0.1:0 --grpc 127.0.0.1:0 --port-file "$work/profile_ports.json" \
    --quiet "$@" &
  serve_pid=$!
  for _ in $(seq 1 1800); do
    [[ -f "$work/profile_ports.json" ]] && break
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -TERM "$serve_pid" 2>/dev/null || true
  wait "$serve_pid" || true
  serve_pid=""
  compgen -G "$repo/$fourth/1/*.profile.yaml" >/dev/null ||
    echo "warning: $fourth's profile was not saved: its load in the load phase profiles it beside the others" >&2
fi

step "serving the model repository $repo (examples/demo.yaml's three models) on http://$http and grpc $grpc"
"$bin" "${demo_serve_args[@]}" --http "$http" --grpc "$grpc" --metrics "$metrics" --port-file "$work/ports.json" --quiet "$@" &
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
"$bin" load --config examples/demo.yaml --url "http://$http" &
load_pid=$!
# 12 s in (after the load's 5 s warm-up), while the load goes on: load the
# fourth model, send it three requests, unload it. The three others serve
# throughout; their figures in the load's report include this.
for i in $(seq 1 120); do
  kill -0 "$load_pid" 2>/dev/null || break
  [[ $i == 50 ]] && counts warm
  sleep 0.1
done
print_index "before loading $fourth"
loaded=0
control_window before loaded load "$fourth" && loaded=1
if ((loaded)); then
  print_index "after loading $fourth"
  /usr/bin/python3 - "http://$http" "$fourth" <<'PY' >&2 || true
import json, sys, time, urllib.error, urllib.request
body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 3, 64, 64],
                               "data": [0.5] * (3 * 64 * 64)}]}).encode()
for i in range(3):
    try:
        url = "%s/v2/models/%s/infer" % (sys.argv[1], sys.argv[2])
        t0 = time.monotonic()
        with urllib.request.urlopen(urllib.request.Request(url, body), timeout=30) as r:
            outcome = r.headers.get("Symphony-Outcome", "?")  # ok, or late: after its target
            out = json.load(r)["outputs"][0]
            print("request %d to %s: output %s %s, %s, in %.1f ms" % (i + 1, sys.argv[2], out["name"], out["shape"],
                                                                      outcome, 1000 * (time.monotonic() - t0)))
    except urllib.error.HTTPError as e:
        print("request %d to %s: HTTP %d %s" % (i + 1, sys.argv[2], e.code, e.read().decode(errors="replace")))
PY
  control unload "$fourth" || true
  print_index "after unloading $fourth"
fi
rc=0
wait "$load_pid" || rc=$?
load_pid=""
[[ "$rc" == 0 ]] || exit "$rc"
counts end
print_bad_rates "the three others (serve's counts)" "$fourth" "before the load,during it,after it" warm before \
  loaded end

step "stopping serve (SIGTERM): what the front answered, and how busy each device was"
kill -TERM "$serve_pid"
rc=0
wait "$serve_pid" || rc=$?
serve_pid=""
exit "$rc"
