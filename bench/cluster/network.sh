#!/usr/bin/env bash
# The paper's network experiment (§5 "Impact of network"), end to end: 20
# ResNet-like models of equal popularity on 32 emulated GPUs (4 backends x 8),
# SLO 20 / 25 / 50 / 100 ms, a one-way delay added with `tc netem` on every
# host's link (0 to 3 ms, and a jittery setting), the scheduler, the backends
# and the frontend each in its own network namespace. For each SLO and delay:
#   1. a calibration load lets the scheduler learn d_ctrl / d_data / d_resp;
#   2. the simulator's goodput for the same config with those delays;
#   3. the end-to-end goodput: a bisection over the offered rate (--steps
#      runs of --duration s) for the highest rate at which every model's bad
#      rate is <= 1 %.
# Writes JSON (--json) for bench/plots/cluster_network.py. Needs root and a
# kernel with sch_netem (delays other than 0).
#
#   bench/cluster/network.sh [--slos "20 25 50 100"] [--delays "0 0.5 1 2 3 1:1"]
#                            [--duration 10] [--steps 5] [--json FILE]
# A delay "D:J" is D ms with J ms of jitter (normal distribution).
cd "$(dirname "$0")/../.."
slos="20 25 50 100"
delays="0 0.5 1 2 3 1:1"
duration=10
steps=5
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --slos) slos="$2"; shift 2 ;;
    --delays) delays="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --json) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ $(id -u) == 0 ]] || { echo "error: needs root (network namespaces)" >&2; exit 1; }
source bench/cluster/common.sh
P="symn$$"
ns_make "$P" 3  # 1: scheduler, 2: backends, 3: frontend

set_delay() {  # set_delay "D" or "D:J" on every host's link
  local d="${1%%:*}" j=""
  [[ "$1" == *:* ]] && j="${1##*:}"
  for i in 1 2 3; do
    ip netns exec "$P-$i" tc qdisc del dev "$P-h$i" root 2>/dev/null || true
    if [[ "$d" != "0" || -n "$j" ]]; then
      local args=(delay "${d}ms")
      [[ -n "$j" ]] && args+=("${j}ms" distribution normal)
      if ! ip netns exec "$P-$i" tc qdisc add dev "$P-h$i" root netem "${args[@]}" 2>"$WORK/tc.err"; then
        echo "error: tc netem failed ($(cat "$WORK/tc.err")): this kernel has no sch_netem; only --delays 0 runs here" >&2
        exit 1
      fi
    fi
  done
}

make_config() {  # make_config SLO_MS FILE
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, yaml
slo, path = float(sys.argv[1]), sys.argv[2]
models = [{"name": f"m{i:02d}", "alpha_ms": round(1.053 * (0.9 + 0.01 * i), 4), "beta_ms": 5.072,
           "slo_ms": slo, "max_batch": 64} for i in range(20)]
cfg = {"name": f"network_slo{int(slo)}", "seed": 1, "gpus": 32, "duration_s": 30, "warmup_s": 2,
       "policy": "deferred", "gather": "target_batch",
       "workload": {"rate": 20000, "arrival": "poisson", "popularity": "equal"},
       "models": models, "cluster": {"token": "bench-token"}}
yaml.safe_dump(cfg, open(path, "w"), sort_keys=False)
PY
}

# One run at RATE; prints the worst model's bad rate.
run_at() {
  ip netns exec "$P-3" "$BIN" loadgen --scheduler "10.78.0.1:$SCHED_PORT" --config "$1" --duration "$duration" \
    --warmup 2 --rate "$2" --quiet --json "$WORK/run.json" >"$WORK/run.log" 2>&1
  json "$WORK/run.json" 'max(m["bad_rate"] for m in d["models"].values())'
}

results="[]"
for slo in $slos; do
  cfg="$WORK/slo$slo.yaml"
  make_config "$slo" "$cfg"
  for delay in $delays; do
    set_delay "$delay"
    start_scheduler "$cfg" 10.78.0.1:0 "$P-1"
    for b in 1 2 3 4; do start_backend "$cfg" "10.78.0.1:$SCHED_PORT" emulated:8 "b$b" "$P-2"; done
    wait_registered 4
    # Calibration: the scheduler learns the delays at a moderate load.
    ip netns exec "$P-3" "$BIN" loadgen --scheduler "10.78.0.1:$SCHED_PORT" --config "$cfg" --duration 5 --rate 2000 \
      --quiet >"$WORK/calib.log" 2>&1
    sleep 1.2
    read -r ctrl data resp < <(json "$WORK/scheduler.json" '" ".join(str(d["delays_us"][k] / 1000) for k in ("ctrl", "data", "resp"))')
    /usr/bin/python3 - "$cfg" "$WORK/sim.yaml" "$ctrl" "$data" "$resp" <<'PY'
import sys, yaml
src, dst, ctrl, data, resp = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
cfg = yaml.safe_load(open(src)); cfg.pop("cluster", None)
cfg["delays"] = {"ctrl_ms": ctrl, "data_ms": data, "resp_ms": resp}
yaml.safe_dump(cfg, open(dst, "w"), sort_keys=False)
PY
    "$BIN" simulate "$WORK/sim.yaml" --goodput -q --json "$WORK/sim.json" >/dev/null
    sim=$(json "$WORK/sim.json" 'd["goodput_rps"]')
    # Bisection between half and 1.2 x the simulator's goodput.
    lo=$(/usr/bin/python3 -c "print($sim * 0.5)"); hi=$(/usr/bin/python3 -c "print($sim * 1.2)"); best=0
    for _ in $(seq "$steps"); do
      mid=$(/usr/bin/python3 -c "print(($lo + $hi) / 2)")
      bad=$(run_at "$cfg" "$mid")
      if /usr/bin/python3 -c "import sys; sys.exit(0 if $bad <= 0.01 else 1)"; then best=$mid; lo=$mid; else hi=$mid; fi
    done
    stop_all
    row=$(/usr/bin/python3 -c "import json; print(json.dumps({'slo_ms': $slo, 'delay': '$delay', 'sim_goodput_rps': $sim, 'e2e_goodput_rps': $best, 'learned_delays_ms': {'ctrl': $ctrl, 'data': $data, 'resp': $resp}}))")
    echo "$row" >&2
    results=$(/usr/bin/python3 -c "import json,sys; l=json.loads(sys.argv[1]); l.append(json.loads(sys.argv[2])); print(json.dumps(l))" "$results" "$row")
  done
done
if [[ -n "$out" ]]; then echo "$results" | /usr/bin/python3 -m json.tool >"$out"; echo "wrote $out" >&2; fi
