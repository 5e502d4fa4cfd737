#!/usr/bin/env bash
# CTest's entry to the container tests (deploy/CMakeLists.txt): skips (exit 77,
# with the reason) unless SYMPHONY_CONTAINER_TESTS=1 and podman is present;
# else builds the image from SYMPHONY_BUILD_DIR's binary and runs
# ./scripts/image.sh with the given flag (--test or --cluster-test).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ "${SYMPHONY_CONTAINER_TESTS:-0}" != 1 ]]; then
  echo "SKIPPED: container tests take minutes; run them with SYMPHONY_CONTAINER_TESTS=1 (docs/deploy.md#tests)"
  exit 77
fi
if ! command -v podman >/dev/null 2>&1; then
  echo "SKIPPED: podman is absent (./scripts/container-deps.sh installs it; docs/deploy.md)"
  exit 77
fi
exec ./scripts/image.sh "$@"
