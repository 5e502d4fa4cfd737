#!/usr/bin/env bash
# The main job: serve models on whatever devices this machine has (every CUDA
# GPU, else the CPU) with deferred batch scheduling, under generated load, and
# print the summary.
#
# Installs missing Debian packages, builds the `symphony` tool, exports three
# torchvision models to TorchScript with random weights (once, into
# data/models/), then runs `symphony serve examples/demo.yaml`: it profiles
# each model on the first run (the profile is saved beside the model), sends
# Poisson load for 30 s with a live progress line, and prints per-model and
# per-device results. Extra arguments go to `symphony serve`, e.g.
#   ./scripts/demo.sh --policy eager --json report.json
source "$(dirname "$0")/common.sh"
step "configuring (preset release)"
cmake --preset release >/dev/null
step "building the symphony tool"
cmake --build --preset release -j "$jobs" --target symphony_cli
step "exporting the demo models (skipped when present)"
/usr/bin/python3 scripts/export_demo_models.py data/models
step "serving examples/demo.yaml"
./build/release/symphony serve examples/demo.yaml "$@"
