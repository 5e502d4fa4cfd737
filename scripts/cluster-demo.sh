#!/usr/bin/env bash
# The cluster on one machine: a scheduler, two backends with 4 emulated GPUs
# each (8 in all) and two protocol frontends (`symphony frontend`), as
# separate processes talking UCX over TCP on loopback, serving the paper's
# stagger workload (ResNet50 profile, SLO 25 ms; examples/cluster/cluster.yaml)
# to two Open Inference Protocol load generators (`symphony load` over HTTP).
#
#   1. starts the scheduler and the backends, and offers a calibration load
#      for 5 s (`symphony loadgen`, the cluster client) so that the scheduler
#      learns d_ctrl, d_data and d_resp;
#   2. asks the simulator for the goodput of the same config with those
#      delays (symphony simulate --goodput);
#   3. starts the two frontends and offers 0.95 x that goodput through them
#      for 4 s (the warm-up), reading from the scheduler's /metrics the delays
#      it plans with under that load: its learned ones and each frontend's
#      one-way delay and replies' way out, which it takes off their requests'
#      targets; the simulator is asked again with their means (the
#      frontends' added to d_resp), so that both plan the same system;
#   4. offers 0.95 x that goodput for 20 s with `symphony load --url
#      http://...`, half to each frontend, and prints the outcome report the
#      load generators saw; the simulator runs the same offered rate for
#      comparison;
#   5. meanwhile, 7 s into the load, adds a model folder (VGG16) to the
#      cluster's model repository, loads it through the protocol's repository
#      extension and unloads another model (Inception) while that load runs,
#      sends the new model three requests, and prints the repository index
#      before and after, and ResNet50's bad rate before, during and after the
#      load (the frontends' counts, from their Prometheus endpoints), as
#      ./scripts/demo.sh does on one machine. A load here takes milliseconds
#      (its profile is saved, its devices emulated), so "during" is the 2 s
#      from its start: a phase of a few dozen requests could not show a
#      change of 0.2 points.
#
# The cluster's roles serve a model repository laid out here from the
# config (ResNet50, with its profile as `symphony profile` writes it) with
# --model-control-mode explicit; the load generators and the simulator read
# the config itself.
#
#   ./scripts/cluster-demo.sh [--json FILE] [--duration S] [--fraction F]
#
# The JSON holds sent, ok, late, dropped, errors, bad_rate, offered_rps,
# sim_goodput_rps, median_batch and sim_median_batch (and more: the
# planned_delays_us the simulator was given, and
# model_control: the load's and unload's times, the showcase's answers (and
# each answer's outcome: ok within target, late after it) and
# the bad rate by phase): as the
# protocol clients counted them, each budget the model's SLO from the moment
# the frontend got the request (the HTTP hop is outside it). Set
# SYMPHONY_BUILD_DIR to use an existing build (default: build/release, built
# here), and SYMPHONY_DEMO_KEEP=1 to keep the logs.
set -euo pipefail
cd "$(dirname "$0")/.."

json_out=""
duration=20
fraction=0.95
warmup=4  # s through the frontends before the simulator is asked again
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) json_out="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --fraction) fraction="$2"; shift 2 ;;
    -h|--help) sed -n '2,50p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

step() { printf '\n==> %s\n' "$*" >&2; }
build="${SYMPHONY_BUILD_DIR:-}"
if [[ -z "$build" ]]; then
  jobs=$(nproc 2>/dev/null || echo 2)
  step "installing missing system packages"
  ./scripts/install-deps.sh
  step "configuring and building the symphony tool (preset release)"
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$jobs" --target symphony_cli
  build=build/release
fi
bin="$build/symphony"
if ! "$bin" scheduler --help >/dev/null 2>&1; then
  echo "error: $bin has no 'scheduler' command: the cluster extension needs UCX (libucx-dev)" >&2
  exit 1
fi
config=examples/cluster/cluster.yaml
work=$(mktemp -d /tmp/symphony-cluster-demo-XXXXXX)
pids=()
fe_pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  if [[ -z "${SYMPHONY_DEMO_KEEP:-}" ]]; then rm -rf "$work"; else echo "logs kept in $work" >&2; fi
}
trap cleanup EXIT

step "laying out the cluster's model repository ($work/repository)"
# ResNet50 as the config has it, and Inception, served from the start; VGG16
# waits beside the repository until it is added while the cluster serves.
# Emulated GPUs open no model file; each version has the profile the
# scheduler plans with. The roles take the config less its models.
repo="$work/repository"
added=VGG16
unloaded=Inception
/usr/bin/python3 - "$config" "$work" "$added" <<'PY'
import os, sys, yaml
src, work, added = sys.argv[1:4]
cfg = yaml.safe_load(open(src))
def lay_out(folder, name, alpha, beta, slo, max_batch):
    os.makedirs(os.path.join(folder, name, "1"))
    with open(os.path.join(folder, name, "config.pbtxt"), "w") as f:
        f.write("max_batch_size: %d\n"
                'input [ { name: "INPUT__0" data_type: TYPE_UINT8 dims: [ 64 ] } ]\n'
                'output [ { name: "OUTPUT__0" data_type: TYPE_UINT8 dims: [ 16 ] } ]\n'
                'parameters { key: "symphony.slo_ms" value { string_value: "%g" } }\n' % (max_batch, slo))
    open(os.path.join(folder, name, "1", "model.pt"), "wb").close()
    points = "".join("  - [%d, %.3f, %.3f, %.3f]\n" % ((b,) + (alpha * b + beta,) * 3) for b in range(1, max_batch + 1))
    with open(os.path.join(folder, name, "1", "model.cpu0.profile.yaml"), "w") as f:
        f.write('model: %s\ndevice: cpu:0\ninputs: ["uint8[64]"]\nmax_batch: %d\nalpha_ms: %g\nbeta_ms: %g\n'
                "stopped_because: the demo's emulated profile\npoints:\n" % (name, max_batch, alpha, beta) + points)
(m,) = cfg["models"]
lay_out(os.path.join(work, "repository"), m["name"], m["alpha_ms"], m["beta_ms"], m["slo_ms"], m["max_batch"])
lay_out(os.path.join(work, "repository"), "Inception", 0.8, 4.0, 25, 32)
# VGG16's batch of one (8 ms) within what ResNet50 can wait beside it (half of
# 25 ms less its 6.1 ms: 9.4 ms); one longer would be refused at its load.
lay_out(work, added, 2.0, 6.0, 50, 16)
cfg.pop("models")
cfg["cluster"].pop("models", None)
yaml.safe_dump(cfg, open(os.path.join(work, "cluster.yaml"), "w"), sort_keys=False)
open(os.path.join(work, "token"), "w").write(cfg["cluster"]["token"])
PY
roles=(--config "$work/cluster.yaml")

step "starting the scheduler and two backends (4 emulated GPUs each)"
"$bin" scheduler --listen 127.0.0.1:0 "${roles[@]}" --model-repository "$repo" --model-control-mode explicit \
  --metrics 127.0.0.1:0 --port-file "$work/port" --json "$work/scheduler.json" >"$work/scheduler.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || { cat "$work/scheduler.log" >&2; exit 1; }
addr="127.0.0.1:$(cat "$work/port")"
for _ in $(seq 100); do grep -q '^metrics: listening on' "$work/scheduler.log" && break; sleep 0.1; done
sched_metrics=$(sed -n 's|^metrics: listening on \(http://[^ ]*\)$|\1|p' "$work/scheduler.log")
[[ -n "$sched_metrics" ]] || { cat "$work/scheduler.log" >&2; exit 1; }
for b in 1 2; do
  # Emulated GPUs read no model: the token is all they need of the config.
  "$bin" backend --scheduler "$addr" --devices emulated:4 --token "$(cat "$work/token")" --name "backend$b" \
    --json "$work/backend$b.json" >"$work/backend$b.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 100); do
  [[ $(grep -c " registered " "$work/scheduler.log" || true) -ge 2 ]] && break
  sleep 0.1
done

step "calibration: 5 s of load while the scheduler learns the network delays"
"$bin" loadgen --scheduler "$addr" --config "$config" --duration 5 --rate 3000 --quiet --name calibration \
  >"$work/calibration.log" 2>&1
sleep 1.5  # the next report has the delays of the whole calibration
read -r ctrl_ms data_ms resp_ms < <(/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["delays_us"]
def us(v):  # as the reports print durations: whole microseconds, one decimal below 10
    return "%.1f us" % v if v < 10 else "%.0f us" % v
print("learned: d_ctrl %s, d_data %s per request, d_resp %s" % (us(d["ctrl"]), us(d["data"]), us(d["resp"])), file=sys.stderr)
print(d["ctrl"] / 1000, d["data"] / 1000, d["resp"] / 1000)' "$work/scheduler.json")

# simulate RESP_MS: the config with the learned delays and d_resp RESP_MS;
# its goodput, and 0.95 x (--fraction) of it
simulate() {
  /usr/bin/python3 - "$config" "$work/sim.yaml" "$ctrl_ms" "$data_ms" "$1" <<'PY'
import sys, yaml
src, dst, ctrl, data, resp = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
cfg = yaml.safe_load(open(src))
cfg.pop("cluster", None)
cfg["delays"] = {"ctrl_ms": ctrl, "data_ms": data, "resp_ms": resp}
yaml.safe_dump(cfg, open(dst, "w"), sort_keys=False)
PY
  "$bin" simulate "$work/sim.yaml" --goodput -q --json "$work/sim_goodput.json" >/dev/null
  goodput=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["goodput_rps"])' "$work/sim_goodput.json")
  rate=$(/usr/bin/python3 -c "print(round($goodput * $fraction, 1))")
}
ms_us() { /usr/bin/python3 -c "v = 1000 * $1; print('%.1f us' % v if v < 10 else '%.0f us' % v)"; }
step "simulating the same config with those delays"
simulate "$resp_ms"
goodput_calibration=$goodput
echo "simulated goodput ${goodput} r/s" >&2

step "starting two protocol frontends (symphony frontend: HTTP and gRPC on loopback)"
for f in 1 2; do
  "$bin" frontend --scheduler "$addr" "${roles[@]}" --model-repository "$repo" --http 127.0.0.1:0 \
    --grpc 127.0.0.1:0 --metrics 127.0.0.1:0 --name "frontend$f" --port-file "$work/frontend$f.ports" \
    --json "$work/frontend$f.json" --quiet >"$work/frontend$f.log" 2>&1 &
  fe_pids+=($!)
  pids+=($!)
done
urls=()
metrics_urls=()  # the frontends' Prometheus endpoints (model_control.sh's counts)
for f in 1 2; do
  for _ in $(seq 100); do [[ -s "$work/frontend$f.ports" ]] && break; sleep 0.1; done
  [[ -s "$work/frontend$f.ports" ]] || { cat "$work/frontend$f.log" >&2; exit 1; }
  http=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["http"])' "$work/frontend$f.ports")
  for _ in $(seq 100); do  # ready: joined the cluster, a backend connected to it
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://$http/v2/health/ready") == 200 ]] && break
    sleep 0.1
  done
  urls+=("http://$http")
  for _ in $(seq 100); do grep -q '^metrics: listening on' "$work/frontend$f.log" && break; sleep 0.1; done
  metrics_urls+=("$(sed -n 's|^metrics: listening on \(http://[^ ]*\)$|\1|p' "$work/frontend$f.log")")
done
echo "frontends: ${urls[*]}" >&2
http=${urls[0]#http://}  # the frontend that model_control.sh's functions ask
source scripts/model_control.sh

# The scheduler plans each frontend's requests to end earlier by that
# frontend's one-way delay and its replies' way out (docs/cluster.md#time-
# delays-and-deadlines), which the calibration through the cluster client
# does not show, and its delays grow with the load: it learns them all
# under this load, and the simulator plans with their means (the frontends'
# as part of d_resp), so that both plan the same system.
step "warm-up: ${warmup} s of ${rate} r/s through the frontends while the scheduler learns their delays"
read -r ctrl_ms data_ms resp_ms ow_us rp_us < <(/usr/bin/python3 - "$bin" "$rate" "$warmup" "$sched_metrics" "$work" "${urls[@]}" <<'PY'
import re, subprocess, sys, time, urllib.request
bin, rate, secs, metrics, work, urls = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6:]
loads = [subprocess.Popen([bin, "load", "--url", u, "--model", "ResNet50", "--rate", str(rate / len(urls)),
                           "--duration", str(secs), "--warmup", "0", "--budget", "none", "--seed", str(10 + i),
                           "--json", f"{work}/warmup{i + 1}.json", "--quiet"],
                          stdout=subprocess.DEVNULL, stderr=open(f"{work}/warmup{i + 1}.log", "w"))
         for i, u in enumerate(urls)]
frontend = re.compile(r'^symphony_frontend_delay_seconds\{.*kind="(one_way|reply_path)"\} (\S+)$', re.M)
learned = re.compile(r'^symphony_delay_seconds\{kind="(ctrl|data|resp)"\} (\S+)$', re.M)
samples = {k: [] for k in ("ctrl", "data", "resp", "one_way", "reply_path")}  # the frontends': their mean
start = time.monotonic()
while time.monotonic() - start < secs - 0.25:
    time.sleep(0.5)
    if time.monotonic() - start < secs / 2:  # the frontends' way out needs 100 replies, pings a few rounds
        continue
    text = urllib.request.urlopen(metrics, timeout=5).read().decode()
    now = {"one_way": 0.0, "reply_path": 0.0}
    for kind, v in frontend.findall(text):
        now[kind] += float(v) / len(urls)
    now.update((kind, float(v)) for kind, v in learned.findall(text))
    for kind, v in now.items():
        samples[kind].append(v)
for p in loads:
    p.wait()
if not samples["resp"]:
    sys.exit("the warm-up read no delays from the scheduler's " + metrics)
mean = {k: sum(v) / len(v) if v else 0.0 for k, v in samples.items()}
print("%g %g %g %.1f %.1f" % (1e3 * mean["ctrl"], 1e3 * mean["data"], 1e3 * mean["resp"], 1e6 * mean["one_way"],
                              1e6 * mean["reply_path"]))
PY
)
echo "the delays the scheduler planned with (means of the warm-up's second half): d_ctrl $(ms_us "$ctrl_ms"), d_data $(ms_us "$data_ms") per request, d_resp $(ms_us "$resp_ms"); each frontend's one-way ${ow_us} us and replies' way out ${rp_us} us" >&2
step "simulating with those delays (the frontends' added to d_resp)"
simulate "$(/usr/bin/python3 -c "print($resp_ms + ($ow_us + $rp_us) / 1000)")"
"$bin" simulate "$work/sim.yaml" --rate "$rate" -q --json "$work/sim_run.json" >/dev/null
echo "simulated goodput ${goodput} r/s (${goodput_calibration} with the calibration's delays); offering ${fraction} x = ${rate} r/s" >&2

step "offering ${rate} r/s through the two frontends for ${duration} s (symphony load over HTTP)"
half=$(/usr/bin/python3 -c "print($rate / 2)")
lg=()
for f in 1 2; do
  "$bin" load --url "${urls[$((f - 1))]}" --model ResNet50 --rate "$half" --duration "$duration" --warmup 2 \
    --budget none --seed "$f" --json "$work/load$f.json" --quiet >"$work/load$f.log" 2>&1 &
  lg+=($!)
  pids+=($!)
done
# 7 s in (after the load's 2 s warm-up), while the load goes on: add VGG16
# to the repository and load it, unloading Inception while that load runs;
# then three requests to VGG16.
sleep 3
counts warm
sleep 4
mv "$work/$added" "$repo/$added"
print_index "before loading $added and unloading $unloaded (as frontend 1 lists it)"
control_window --at-least 2 before loaded load "$added" unload "$unloaded" || true
print_index "after loading $added and unloading $unloaded"
/usr/bin/python3 - "${urls[0]}" "$added" "$work/showcase.json" <<'PY' >&2 || true
import json, sys, time, urllib.error, urllib.request
body = json.dumps({"inputs": [{"name": "INPUT__0", "datatype": "UINT8", "shape": [1, 64],
                               "data": list(range(64))}]}).encode()
statuses, outcomes = [], []
for i in range(3):
    url = "%s/v2/models/%s/infer" % (sys.argv[1], sys.argv[2])
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body), timeout=30) as r:
            outcome = r.headers.get("Symphony-Outcome", "?")  # ok, or late: after its target
            out = json.load(r)["outputs"][0]
            print("request %d to %s: output %s %s, %s, in %.1f ms" % (i + 1, sys.argv[2], out["name"], out["shape"],
                                                                      outcome, 1000 * (time.monotonic() - t0)))
            statuses.append(200)
            outcomes.append(outcome)
    except urllib.error.HTTPError as e:
        print("request %d to %s: HTTP %d %s" % (i + 1, sys.argv[2], e.code, e.read().decode(errors="replace")))
        statuses.append(e.code)
        outcomes.append(e.headers.get("Symphony-Outcome", "?"))
json.dump({"statuses": statuses, "outcomes": outcomes}, open(sys.argv[3], "w"))
PY
for p in "${lg[@]}"; do wait "$p"; done
counts end
print_bad_rates "ResNet50 (the frontends' counts)" "$added,$unloaded" "before the load,2 s from its start,after it" \
  warm before loaded end
for p in "${fe_pids[@]}"; do kill -TERM "$p"; done  # they write their reports
for p in "${fe_pids[@]}"; do wait "$p" || true; done

step "report"
/usr/bin/python3 - "$work" "$goodput" "$rate" "$json_out" "$goodput_calibration" \
  "$ctrl_ms" "$data_ms" "$resp_ms" "$ow_us" "$rp_us" <<'PY'
import json, sys
work, goodput, rate, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
goodput_calibration, ctrl_ms, data_ms, resp_ms, ow_us, rp_us = map(float, sys.argv[5:11])
# What the protocol clients saw (symphony load), and what the frontends ran.
lo = [json.load(open(f"{work}/load{i}.json")) for i in (1, 2)]
fe = [json.load(open(f"{work}/frontend{i}.json")) for i in (1, 2)]
sim = json.load(open(f"{work}/sim_run.json"))
sched = json.load(open(f"{work}/scheduler.json"))
r = {k: sum(x[k] for x in lo) for k in ("sent", "ok", "late", "dropped", "errors")}
reasons = {}
for x in lo:
    for k, v in x["dropped_by_reason"].items():
        reasons[k] = reasons.get(k, 0) + v
errors = {}
for x in lo:
    for k, v in x["errors_by_message"].items():
        errors[k] = errors.get(k, 0) + v
hist = {}  # the batches the frontends' requests ran in (warm-up included)
for f in fe:
    for k, v in f["models"]["ResNet50"].get("requests_by_batch_size", {}).items():
        hist[int(k)] = hist.get(int(k), 0) + v
n, seen, median = sum(hist.values()), 0, 0
for b in sorted(hist):
    seen += hist[b]
    if 2 * seen >= n:
        median = b
        break
window = lo[0]["duration_s"]
p99 = max(x["latency_ms"]["p99"] for x in lo)
r.update({
    "dropped_by_reason": reasons,
    "errors_by_message": errors,
    "bad_rate": (r["sent"] - r["ok"]) / r["sent"] if r["sent"] else 0.0,
    "offered_rps": r["sent"] / window,
    "target_rps": rate,
    "goodput_rps": r["ok"] / window,
    "sim_goodput_rps": goodput,
    "sim_goodput_calibration_rps": goodput_calibration,
    "planned_delays_us": {"ctrl": 1000 * ctrl_ms, "data": 1000 * data_ms, "resp": 1000 * resp_ms,
                          "frontend_one_way": ow_us, "frontend_reply_path": rp_us},
    "median_batch": median,
    "sim_median_batch": sim["median_batch"],
    "sim_bad_rate": sim["bad_rate"],
    "client_p99_ms": p99,
    "learned_delays_us": {k: sched["delays_us"][k] for k in ("ctrl", "data", "resp")},
    "duplicate_outputs": sum(f["client"]["duplicate_outputs"] for f in fe),
    "frontends_sent": sum(f["sent"] for f in fe),
    "scheduler_cpu_us_per_request": sched["cpu_us_per_request"],
    "load_cpu_s": sum(x["client"]["cpu_s"] for x in lo),
    "duration_s": window,
})
def read(name, default):
    try:
        return json.load(open(f"{work}/{name}"))
    except (OSError, ValueError):
        return default
def ms(op):
    try:
        return int(open(f"{work}/{op}.ms").read())
    except (OSError, ValueError):
        return None
r["model_control"] = {
    "loaded": "VGG16", "unloaded": "Inception", "load_ms": ms("load"), "unload_ms": ms("unload"),
    "showcase_statuses": read("showcase.json", {}).get("statuses", []),
    "showcase_outcomes": read("showcase.json", {}).get("outcomes", []),
    "bad_rate_by_phase": read("bad_rates.json", []),
}
def us(v):  # whole microseconds, one decimal below 10 (as the learned line above)
    return f"{v:.1f} us" if v < 10 else f"{v:.0f} us"


print(f"""
cluster: 1 scheduler, 2 backends x 4 emulated GPUs, 2 protocol frontends (TCP loopback), 2 HTTP load generators
offered  {r['offered_rps']:9.1f} r/s  ({rate:.1f} = {rate / goodput:.2f} x the simulator's goodput {goodput:.1f})
sent {r['sent']}, ok {r['ok']}, late {r['late']}, dropped {r['dropped']} {reasons or ''}, errors {r['errors']} {errors or ''}
bad rate {100 * r['bad_rate']:.2f} %   (simulator at the same rate: {100 * sim['bad_rate']:.2f} %)
median batch {median}   (simulator: {sim['median_batch']:g}); client p99 {p99:.1f} ms (SLO 25 ms at the frontend)
learned delays: d_ctrl {us(r['learned_delays_us']['ctrl'])}, d_data {us(r['learned_delays_us']['data'])} per request, d_resp {us(r['learned_delays_us']['resp'])}
the simulator planned with the warm-up's: d_ctrl {us(1000 * ctrl_ms)}, d_data {us(1000 * data_ms)}, d_resp {us(1000 * resp_ms)} + each frontend's one-way {us(ow_us)} and way out {us(rp_us)}""")
mc = r["model_control"]
phases = ", ".join(f"{p['phase']} {100 * p['bad_rate']:.2f} %" for p in mc["bad_rate_by_phase"])
print(f"model control: VGG16 loaded in {mc['load_ms']} ms, Inception unloaded in {mc['unload_ms']} ms while it loaded; "
      f"{mc['showcase_statuses'].count(200)} of 3 requests to VGG16 answered 200 "
      f"({mc['showcase_outcomes'].count('ok')} within target); ResNet50's bad rate {phases}")
if out:
    json.dump(r, open(out, "w"), indent=2, sort_keys=True)
    print(f"wrote {out}")
PY
