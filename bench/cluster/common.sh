# Shared by the cluster benchmarks (bench/cluster/*.sh): where the binary
# is, starting and stopping the processes, network namespaces, cleanup.
# Source it; it defines BIN, WORK, start_*, stop_all and ns_*.
set -euo pipefail

BIN="${SYMPHONY_BUILD_DIR:-build/release}/symphony"
if ! "$BIN" scheduler --help >/dev/null 2>&1; then
  echo "error: $BIN has no 'scheduler' command (build with UCX: libucx-dev; or set SYMPHONY_BUILD_DIR)" >&2
  exit 1
fi
WORK=$(mktemp -d /tmp/symphony-bench-XXXXXX)
PIDS=()
NAMESPACES=()

stop_all() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  PIDS=()
}
cleanup() {
  stop_all
  for n in "${NAMESPACES[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  if [[ -z "${SYMPHONY_BENCH_KEEP:-}" ]]; then rm -rf "$WORK"; else echo "logs kept in $WORK" >&2; fi
}
trap cleanup EXIT

# run_in NS CMD...: CMD inside namespace NS ("" = here), in the foreground.
run_in() {
  local ns="$1"
  shift
  if [[ -n "$ns" ]]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

# spawn_in NS LOG CMD...: CMD in the background (its PID, not a subshell's,
# goes to PIDS: the subshell execs it).
spawn_in() {
  local ns="$1" log="$2"
  shift 2
  if [[ -n "$ns" ]]; then
    (exec ip netns exec "$ns" "$@" >"$log" 2>&1) &
  else
    (exec "$@" >"$log" 2>&1) &
  fi
  PIDS+=($!)
}

# start_scheduler CONFIG LISTEN [NS]: starts it, sets ADDR_PORT to its port.
start_scheduler() {
  rm -f "$WORK/port"
  spawn_in "${3:-}" "$WORK/scheduler.log" "$BIN" scheduler --listen "$2" --config "$1" --port-file "$WORK/port" \
    --json "$WORK/scheduler.json"
  for _ in $(seq 100); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
  [[ -s "$WORK/port" ]] || { cat "$WORK/scheduler.log" >&2; exit 1; }
  SCHED_PORT=$(cat "$WORK/port")
}

# start_backend CONFIG SCHEDULER_ADDR DEVICES NAME [NS]
start_backend() {
  spawn_in "${5:-}" "$WORK/$4.log" "$BIN" backend --scheduler "$2" --devices "$3" --config "$1" --name "$4" \
    --json "$WORK/$4.json"
}

# wait_registered N: until the scheduler's log shows N registrations.
wait_registered() {
  for _ in $(seq 200); do
    [[ $(grep -c " registered " "$WORK/scheduler.log" || true) -ge "$1" ]] && return 0
    sleep 0.05
  done
  echo "error: only $(grep -c ' registered ' "$WORK/scheduler.log" || true) of $1 backends registered" >&2
  exit 1
}

# ns_make PREFIX HOSTS: namespaces PREFIX-1..HOSTS on one bridge (in
# PREFIX-br), addresses 10.78.0.<i>/24 on the veth named PREFIX-h<i>.
ns_make() {
  local p="$1" n="$2"
  ip netns add "$p-br"
  NAMESPACES+=("$p-br")
  ip -n "$p-br" link add br0 type bridge
  ip -n "$p-br" link set br0 up
  for i in $(seq "$n"); do
    ip netns add "$p-$i"
    NAMESPACES+=("$p-$i")
    ip link add "$p-h$i" type veth peer name "$p-p$i"
    ip link set "$p-h$i" netns "$p-$i"
    ip link set "$p-p$i" netns "$p-br"
    ip -n "$p-br" link set "$p-p$i" master br0
    ip -n "$p-br" link set "$p-p$i" up
    ip -n "$p-$i" addr add "10.78.0.$i/24" dev "$p-h$i"
    ip -n "$p-$i" link set "$p-h$i" up
    ip -n "$p-$i" link set lo up
  done
}

# json FILE EXPR: a value of a JSON file, by a Python expression on `d`.
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
