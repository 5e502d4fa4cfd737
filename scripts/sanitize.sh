#!/usr/bin/env bash
# The sanitizer runs CI adds to the test suite: the core tests under
# AddressSanitizer + UndefinedBehaviorSanitizer (preset asan) and the core and
# runtime tests under ThreadSanitizer (preset tsan), with line tables only
# (-g1: all the sanitizers' stack traces need). asan builds at -O0: its
# template-heavy simulator tests compile in about half the time of -O1 (the
# preset from scratch, ccache off, 2 cores: 414 s against 754 s; its tests
# then take 45 s against 16 s). tsan stays at -O1, which ThreadSanitizer
# needs to run at a usable speed.
source "$(dirname "$0")/common.sh"

for preset in asan tsan; do
  step "configuring and building (preset $preset)"
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j "$jobs"
  step "running tests under $preset"
  ctest --preset "$preset" -j "$jobs"
done
step "sanitizer runs passed"
