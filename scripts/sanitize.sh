#!/usr/bin/env bash
# The sanitizer runs CI adds to the test suite: the core tests under
# AddressSanitizer + UndefinedBehaviorSanitizer (preset asan) and the core and
# runtime tests under ThreadSanitizer (preset tsan). Both presets build at
# -O1 -g1: the template-heavy tests compile in less than half the time of
# -O2 -g, and line tables are all the sanitizers' stack traces need.
source "$(dirname "$0")/common.sh"

for preset in asan tsan; do
  step "configuring and building (preset $preset)"
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j "$jobs"
  step "running tests under $preset"
  ctest --preset "$preset" -j "$jobs"
done
step "sanitizer runs passed"
