#!/usr/bin/env bash
# The main job: installs missing Debian packages, builds the `symphony` tool
# and runs the demo.
#
# Until the in-process server lands, the demo schedules the paper's worked
# example (§3.3: 3 GPUs, l(b) = b + 5 ms, SLO 12 ms, a request every 0.75 ms,
# with R13-R15 missing) through the real scheduler on the virtual clock, under
# deferred and then eager scheduling, and prints both schedules.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }
jobs=$(nproc 2>/dev/null || echo 2)

step "installing missing system packages"
./scripts/install-deps.sh
step "configuring (preset release)"
cmake --preset release >/dev/null
step "building the symphony tool"
cmake --build --preset release -j "$jobs" --target symphony_cli

for policy in deferred eager; do
  step "paper example, policy $policy"
  ./build/release/symphony example --requests 48 --skip 13,14,15 --policy "$policy"
done
