#!/usr/bin/env bash
# The core benchmark beside a neighbour on the shared L3 (bench/results/core.md, issue 14): runs
# BM_SchedulerRequests at 16 x 16, 64 x 64 and 4096 x 4096, one fresh bench_core process each,
# while build/release/bench/cache_neighbour streams through NEIGHBOUR_MIB of memory on the other
# core (0: no neighbour), and prints M requests/s and the 4096^2 / 16^2 cost growth per round.
# With OTHER_BENCH_CORE (another build's bench_core), runs it in each round too, interleaved.
#
#   bench/experiments/core_neighbour.sh [ROUNDS (3)] [NEIGHBOUR_MIB... (0 8 64)] [-- OTHER_BENCH_CORE]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}; shift || true
sizes=(); other=""
while (($#)); do
  if [[ $1 == -- ]]; then
    [[ $# -ge 2 ]] || { echo "error: -- must be followed by another build's bench_core" >&2; exit 2; }
    other=$2; break
  fi
  sizes+=("$1"); shift
done
((${#sizes[@]})) || sizes=(0 8 64)
bench=build/release/bench/bench_core neighbour=build/release/bench/cache_neighbour
for f in "$bench" "$neighbour"; do
  [[ -x $f ]] || { echo "error: $f missing: cmake --build build/release --target bench_core cache_neighbour" >&2; exit 2; }
done
[[ -z $other || -x $other ]] || { echo "error: $other is not an executable bench_core" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
for s in "${sizes[@]}"; do
  [[ $s =~ ^[0-9]+$ ]] && ((s <= 4096)) || { echo "error: NEIGHBOUR_MIB must be an integer in [0, 4096], got '$s'" >&2; exit 2; }
done
# The benchmark on CPU 0, the neighbour on CPU 1, where there are two.
pin_bench=() pin_neighbour=()
if command -v taskset >/dev/null && (($(nproc) >= 2)); then
  pin_bench=(taskset -c 0) pin_neighbour=(taskset -c 1)
else
  echo "warning: no second CPU to pin the neighbour to (or no taskset): it will share the benchmark's core" >&2
fi
npid=""
trap '[[ -n $npid ]] && kill "$npid" 2>/dev/null || true' EXIT
rate() {  # bench_core size -> M requests/s
  local v
  v=$("${pin_bench[@]}" "$1" --benchmark_filter="BM_SchedulerRequests/$2\$" --benchmark_min_time=1 2>/dev/null |
    awk '/^BM_Sched/ {for (i = 1; i <= NF; i++) if ($i ~ /^items_per_second=/) {sub("items_per_second=", "", $i); sub("M/s", "", $i); print $i}}')
  [[ -n $v ]] || { echo "error: $1 reported no rate for BM_SchedulerRequests/$2" >&2; return 1; }
  echo "$v"
}
neighbour_alive() {  # a neighbour that died would leave the rounds without one, unnoticed
  [[ -z $npid ]] || kill -0 "$npid" 2>/dev/null || { echo "error: cache_neighbour exited early" >&2; exit 1; }
}
echo "neighbour_mib build round 16x16 64x64 4096x4096 growth"
for s in "${sizes[@]}"; do
  if ((s > 0)); then
    # Bounded: the neighbour exits by itself after an hour at most (a set that outlasts it stops with an
    # error), and is killed when its rounds end.
    "${pin_neighbour[@]}" "$neighbour" "$s" 3600 >/dev/null & npid=$!
    sleep 0.5
  fi
  for ((r = 1; r <= rounds; r++)); do
    for b in "$bench" ${other:+"$other"}; do
      neighbour_alive
      a=$(rate "$b" 16/16)
      m=$(rate "$b" 64/64)
      z=$(rate "$b" 4096/4096)
      neighbour_alive
      name=new; [[ $b == "$other" ]] && name=other
      awk -v s="$s" -v n="$name" -v r="$r" -v a="$a" -v m="$m" -v z="$z" \
        'BEGIN {printf "%s %s %d %.2f %.2f %.2f %.2fx\n", s, n, r, a, m, z, a / z}'
    done
  done
  if [[ -n $npid ]]; then kill "$npid" 2>/dev/null || true; wait "$npid" 2>/dev/null || true; npid=""; fi
done
