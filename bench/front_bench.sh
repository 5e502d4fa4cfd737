#!/usr/bin/env bash
# The Open Inference Protocol front's benchmarks (bench/results/front.md): round trip at
# concurrency 1, the highest rate with <= 1 % bad, and the same against a do-nothing echo on the
# same HTTP and gRPC stacks (bench/front_echo.cc), all on 127.0.0.1 with `symphony load` as the
# client. Bounded: about 10 minutes with the defaults on a 2-core machine.
#
#   bench/front_bench.sh [--json FILE] [options of bench/front_bench.py: --runs N, --server-cpus 0
#                         --client-cpus 1, --only latency throughput httplib, ...]
#
# Builds symphony_cli and front_echo in build/release (cmake --preset release, -j2), or uses
# SYMPHONY_BUILD_DIR as it is. Measure on a quiet machine: the load average is printed and saved.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -n ${SYMPHONY_BUILD_DIR:-} ]]; then
  build=$SYMPHONY_BUILD_DIR
else
  build=build/release
  [[ -f $build/CMakeCache.txt ]] || cmake --preset release >/dev/null
  cmake --build --preset release --target symphony_cli front_echo -j2
fi
for f in "$build/symphony" "$build/bench/front_echo"; do
  [[ -x $f ]] || { echo "error: $f missing (cmake --build $build --target symphony_cli front_echo)" >&2; exit 2; }
done
command -v taskset >/dev/null || echo "note: no taskset; --server-cpus / --client-cpus cannot pin" >&2
exec python3 bench/front_bench.py --build-dir "$build" "$@"
