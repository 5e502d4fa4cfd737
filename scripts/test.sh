#!/usr/bin/env bash
# The whole test suite: installs missing Debian packages, configures and
# builds the release preset (core, simulator, runtime, server, CLI, bindings,
# benchmarks), then runs every test (GoogleTest through CTest, and pytest).
# GPU tests skip themselves on machines without a CUDA device.
source "$(dirname "$0")/common.sh"

step "configuring (preset release)"
cmake --preset release

step "building with $jobs jobs"
cmake --build --preset release -j "$jobs"

step "running the test suite"
ctest --preset release -j "$jobs"

step "all tests passed"
