#!/usr/bin/env bash
# Input fetch: the one-sided reads (ucp_get_nbx) of a batch's inputs, 16
# requests x 150 KB, measured at the backend per batch (from the Batch's
# arrival to the last read's completion: p50 / p99 / p99.9), over loopback
# and (as root) across network namespaces; and the d_data the scheduler
# learned (99th percentile of read time / requests).
#
#   bench/cluster/fetch.sh [--duration 10] [--no-netns] [--json FILE]
cd "$(dirname "$0")/../.."
duration=10
netns=1
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --no-netns) netns=0; shift ;;
    --json) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
source bench/cluster/common.sh
config=bench/cluster/fetch.yaml
if [[ $netns == 1 && ( $(id -u) != 0 || ! -x "$(command -v ip)" ) ]]; then
  echo "not root or no 'ip': measuring loopback only" >&2
  netns=0
fi

# measure LABEL SCHED_NS BACKEND_NS FRONTEND_NS HOST_S HOST_F
measure() {
  local label="$1" ns_s="$2" ns_b="$3" ns_f="$4" host="$5"
  start_scheduler "$config" "$host:0" "$ns_s"
  local addr="$host:$SCHED_PORT"
  start_backend "$config" "$addr" emulated:2 backend "$ns_b"
  wait_registered 1
  run_in "$ns_f" "$BIN" loadgen --scheduler "$addr" --config "$config" --duration "$duration" --warmup 2 \
    --input-bytes 153600 --max-pending 512 --json "$WORK/fe.json" --quiet >"$WORK/fe.log" 2>&1
  sleep 1.2
  cp "$WORK/scheduler.json" "$WORK/sched_final.json"
  stop_all
  /usr/bin/python3 - "$WORK" "$label" <<'PY'
import json, sys
w, label = sys.argv[1], sys.argv[2]
b, s, f = (json.load(open(f"{w}/{n}.json")) for n in ("backend", "sched_final", "fe"))
h = b["input_fetch_per_batch"]
r = {"path": label, "batches": h["count"], "requests_per_batch": b["requests"] / max(1, b["batches"]),
     "reads_per_batch": b["reads"] / max(1, b["batches"]),
     "fetch_us": {k: h[k] for k in ("p50_us", "p99_us", "p999_us", "max_us")},
     "learned_d_data_us": s["delays_us"]["data"], "learned_d_ctrl_us": s["delays_us"]["ctrl"],
     "bad_rate": f["bad_rate"], "output_mismatch": f["output_mismatch"]}
print(json.dumps(r))
PY
}

rows=()
rows+=("$(measure loopback "" "" "" 127.0.0.1)")
if [[ $netns == 1 ]]; then
  ns_make "symf$$" 3
  rows+=("$(measure namespaces "symf$$-1" "symf$$-2" "symf$$-3" 10.78.0.1)")
fi
/usr/bin/python3 - "$out" "${rows[@]}" <<'PY'
import json, sys
out, rows = sys.argv[1], [json.loads(r) for r in sys.argv[2:]]
print("%-11s %8s %9s %9s %9s %9s %10s %10s" % ("path", "batches", "req/batch", "p50 us", "p99 us", "p99.9 us", "d_data us", "reads/b"))
for r in rows:
    f = r["fetch_us"]
    print("%-11s %8d %9.1f %9.0f %9.0f %9.0f %10.1f %10.2f" % (r["path"], r["batches"], r["requests_per_batch"], f["p50_us"], f["p99_us"], f["p999_us"], r["learned_d_data_us"], r["reads_per_batch"]))
if out:
    json.dump(rows, open(out, "w"), indent=2)
PY
