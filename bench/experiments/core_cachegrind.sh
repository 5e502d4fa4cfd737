#!/usr/bin/env bash
# Cache misses per request of the scheduler at M models x M GPUs (bench/results/core.md, issue 14):
# runs bench/scheduler_driver under cachegrind with 0 and N requests and prints the difference per
# request: instructions, L1 data misses, and misses of a 1 MiB L2 (cachegrind models two levels; its
# last level is set to this VM's L2). With two drivers (two builds), also alternates them ROUNDS times
# without valgrind and prints each build's rate (wall time; compare paired rounds).
#
#   bench/experiments/core_cachegrind.sh [M (4096)] [N (1000000)] [OTHER_DRIVER [ROUNDS (12)]]
set -euo pipefail
cd "$(dirname "$0")/../.."
m=${1:-4096} n=${2:-1000000} other=${3:-} rounds=${4:-12}
drv=build/release/bench/scheduler_driver
[[ -x $drv ]] || { echo "error: $drv missing: cmake --build build/release --target scheduler_driver" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "error: valgrind is not installed (apt install valgrind)" >&2; exit 2; }
count() {  # driver requests -> "Ir D1misses LLmisses"
  valgrind --tool=cachegrind --cache-sim=yes --LL=1048576,8,64 --cachegrind-out-file=/dev/null "$1" "$m" "$2" 2>&1 |
    awk '/I *refs:/ {gsub(",","",$4); i=$4} /D1  misses:/ {gsub(",","",$4); d=$4} /LLd misses:/ {gsub(",","",$4); l=$4}
         END {print i, d, l}'
}
for d in "$drv" ${other:+"$other"}; do
  read -r i0 d0 l0 < <(count "$d" 0)
  read -r i1 d1 l1 < <(count "$d" "$n")
  awk -v d="$d" -v m="$m" -v n="$n" -v i="$((i1 - i0))" -v a="$((d1 - d0))" -v b="$((l1 - l0))" \
    'BEGIN {printf "%s, %d x %d: per request %.1f instructions, %.2f L1 misses, %.2f L2 (1 MiB) misses\n", d, m, m, i/n, a/n, b/n}'
done
if [[ -n $other ]]; then
  for ((r = 1; r <= rounds; r++)); do
    echo "round $r: $("$drv" "$m" 1500000) | other: $("$other" "$m" 1500000)"
  done
fi
