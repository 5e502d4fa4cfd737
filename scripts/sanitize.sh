#!/usr/bin/env bash
# The sanitizer runs CI adds to the test suite: the core tests under
# AddressSanitizer + UndefinedBehaviorSanitizer (preset asan) and the core and
# runtime tests under ThreadSanitizer (preset tsan).
source "$(dirname "$0")/common.sh"

for preset in asan tsan; do
  step "configuring and building (preset $preset)"
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j "$jobs"
  step "running tests under $preset"
  ctest --preset "$preset" -j "$jobs"
done
step "sanitizer runs passed"
