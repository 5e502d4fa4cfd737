#!/usr/bin/env bash
# The whole test suite: installs missing Debian packages, configures and
# builds the release preset (core, simulator, runtime, server, CLI, bindings,
# benchmarks), then runs every test (GoogleTest through CTest, and pytest).
# GPU tests skip themselves on machines without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*" >&2; }
jobs=$(nproc 2>/dev/null || echo 2)

step "installing missing system packages"
./scripts/install-deps.sh

step "configuring (preset release)"
cmake --preset release

step "building with $jobs jobs"
cmake --build --preset release -j "$jobs"

step "running the test suite"
ctest --preset release -j "$jobs"

step "all tests passed"
