#!/usr/bin/env bash
# The sanitizer runs CI adds to the test suite: the core tests under
# AddressSanitizer + UndefinedBehaviorSanitizer (preset asan) and the core and
# runtime tests under ThreadSanitizer (preset tsan), with line tables only
# (-g1: all the sanitizers' stack traces need). asan builds at -O0: its
# template-heavy simulator tests compile in about half the time of -O1 (the
# preset from scratch, ccache off, 2 cores: 414 s against 754 s; its tests
# then take 45 s against 16 s). tsan stays at -O1, which ThreadSanitizer
# needs to run at a usable speed. asan-cluster and tsan-cluster add the
# cluster extension's unit tests that need no process (the wire, the UCX
# transport, sessions, the frontend client's threads; about a minute each):
# under TSan with UCX's malloc and mmap hooks off (UCX_MEM_*, the test
# preset), which crash under TSan's own interceptors.
source "$(dirname "$0")/common.sh"

for preset in asan asan-cluster tsan tsan-cluster; do
  step "configuring and building (preset $preset)"
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j "$jobs"
  step "running tests under $preset"
  ctest --preset "$preset" -j "$jobs"
done
step "sanitizer runs passed"
