#!/usr/bin/env bash
# What a cache line beyond the L2 costs, alone and beside a neighbour on the shared L3
# (bench/results/core.md, issue 14): build/release/bench/cache_probe chases 8 dependent random lines
# per round through buffers of MIB MiB on CPU 0, once alone and once while cache_neighbour streams
# through NEIGHBOUR_MIB on CPU 1, alternating, ROUNDS times; prints nanoseconds per line.
#
#   bench/experiments/cache_probe.sh [ROUNDS (3)] [NEIGHBOUR_MIB (32)] [MIB... (1 2 4 6 8)]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}; neighbour_mib=${2:-32}; shift $(($# < 2 ? $# : 2))
sizes=("$@"); ((${#sizes[@]})) || sizes=(1 2 4 6 8)
probe=build/release/bench/cache_probe neighbour=build/release/bench/cache_neighbour
for f in "$probe" "$neighbour"; do
  [[ -x $f ]] || { echo "error: $f missing: cmake --build build/release --target cache_probe cache_neighbour" >&2; exit 2; }
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "error: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
[[ $neighbour_mib =~ ^[1-9][0-9]*$ ]] && ((neighbour_mib <= 4096)) ||
  { echo "error: NEIGHBOUR_MIB must be an integer in [1, 4096], got '$neighbour_mib'" >&2; exit 2; }
for s in "${sizes[@]}"; do
  [[ $s =~ ^[1-9][0-9]*$ ]] && ((s <= 4096)) || { echo "error: MIB must be an integer in [1, 4096], got '$s'" >&2; exit 2; }
done
pin_probe=() pin_neighbour=()
if command -v taskset >/dev/null && (($(nproc) >= 2)); then
  pin_probe=(taskset -c 0) pin_neighbour=(taskset -c 1)
else
  echo "warning: no second CPU to pin the neighbour to (or no taskset): it will share the probe's core" >&2
fi
npid=""
trap '[[ -n $npid ]] && kill "$npid" 2>/dev/null || true' EXIT
per_line() {  # MIB -> ns per line
  "${pin_probe[@]}" "$probe" "$1" 8 1 | awk '{print $(NF - 3)}'
}
echo "round mib alone_ns_per_line beside_ns_per_line ratio"
for ((r = 1; r <= rounds; r++)); do
  for s in "${sizes[@]}"; do
    a=$(per_line "$s")
    "${pin_neighbour[@]}" "$neighbour" "$neighbour_mib" 60 >/dev/null & npid=$!  # bounded: a minute at most
    sleep 0.5
    b=$(per_line "$s")
    kill -0 "$npid" 2>/dev/null || { echo "error: cache_neighbour exited early" >&2; exit 1; }
    kill "$npid" 2>/dev/null || true; wait "$npid" 2>/dev/null || true; npid=""
    awk -v r="$r" -v s="$s" -v a="$a" -v b="$b" 'BEGIN {printf "%d %d %.1f %.1f %.2fx\n", r, s, a, b, b / a}'
  done
done
