#!/usr/bin/env bash
# Writes .gpu-bundle/: what a bare GPU machine lacks to build and test
# Symphony, for scripts/gpu-check.sh to build against there.
#
#   ./scripts/gpu-bundle.sh            # writes .gpu-bundle/ (ignored by git), about 10 MiB
#
# The GPU machines that the `device` tool lends have nvcc, CMake, ninja, g++
# and python3 with torch (CUDA) and torchvision, but no Debian packages and no
# network. This script runs on a Debian 12 x86-64 machine like the project's
# own: it downloads the Debian packages below (`apt-get download`, no root
# needed, nothing installed) and unpacks them with `dpkg -x` into
# .gpu-bundle/root/, so that .gpu-bundle/root/usr is a CMake prefix holding
# their headers, libraries and CMake package files (which locate themselves
# relative to where they are). The compiled ones (yaml-cpp, GoogleTest,
# Google Benchmark) are x86-64 builds for glibc >= 2.36 and the libstdc++ of
# GCC >= 12, which an Ubuntu 24.04 image has. The bundle must stay under
# 48 MiB (it travels with the working tree, whose limit is 64 MiB); the
# script checks that. MANIFEST lists the packages, versions and checksums.
#
# Run on the GPU machine:  the `run` command in bench/results/gpu.md
# (carry: [".gpu-bundle"], command: scripts/gpu-check.sh $OUT).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=.gpu-bundle
LIMIT_MIB=48

# What the build needs beyond the compiler, CMake, ninja, python3, torch and
# CUDA (every find_package/find_path of the project outside those).
PACKAGES=(
  libyaml-cpp-dev libyaml-cpp0.7        # configs, profiles (profile_io, server, simulator)
  libcli11-dev                          # the CLI
  nlohmann-json3-dev                    # reports (simulator, serve)
  libgtest-dev libgmock-dev             # tests
  libbenchmark-dev libbenchmark1debian  # benchmarks
  libconcurrentqueue-dev                # the runtime's MPSC ingress
  libreaderwriterqueue-dev              # the ring benchmarks' baseline
)

say() { printf '[gpu-bundle] %s\n' "$*" >&2; }

arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
if [[ $arch != amd64 ]]; then
  say "this machine is $arch: the GPU machine is x86-64 and needs amd64 builds; run this on a Debian amd64 machine"
  exit 1
fi
command -v apt-get >/dev/null && command -v dpkg >/dev/null || { say "needs apt-get and dpkg (Debian)"; exit 1; }

work=$(mktemp -d)
chmod 755 "$work"  # apt-get download hands the files to its _apt user
trap 'rm -rf "$work"' EXIT
say "downloading ${#PACKAGES[@]} Debian packages"
if ! (cd "$work" && apt-get download -q "${PACKAGES[@]}" >/dev/null); then
  say "apt-get download failed; refreshing the package lists (needs root) and retrying"
  apt-get update -q >/dev/null
  (cd "$work" && apt-get download -q "${PACKAGES[@]}" >/dev/null)
fi

rm -rf "$OUT"
mkdir -p "$OUT/root"
{
  echo "# .gpu-bundle, written by scripts/gpu-bundle.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ) ($(. /etc/os-release && echo "$PRETTY_NAME"), $arch)"
  echo "# package version sha256-of-the-.deb"
} >"$OUT/MANIFEST"
for deb in "$work"/*.deb; do
  dpkg -x "$deb" "$OUT/root"
  printf '%s %s %s\n' "$(dpkg-deb -f "$deb" Package)" "$(dpkg-deb -f "$deb" Version)" \
    "$(sha256sum "$deb" | cut -d' ' -f1)" >>"$OUT/MANIFEST"
done
rm -rf "$OUT/root/usr/share/doc" "$OUT/root/usr/share/lintian" "$OUT/root/usr/share/man"

# Everything the build looks for must be there.
need=(
  usr/include/yaml-cpp/yaml.h usr/lib/x86_64-linux-gnu/cmake/yaml-cpp/yaml-cpp-config.cmake
  usr/include/CLI/CLI.hpp usr/share/cmake/CLI11/CLI11Config.cmake
  usr/include/nlohmann/json.hpp usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake
  usr/include/gtest/gtest.h usr/lib/x86_64-linux-gnu/libgtest.a usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake
  usr/include/benchmark/benchmark.h usr/lib/x86_64-linux-gnu/cmake/benchmark/benchmarkConfig.cmake
  usr/include/concurrentqueue/concurrentqueue.h usr/include/readerwriterqueue/readerwriterqueue.h
)
for f in "${need[@]}"; do
  [[ -e $OUT/root/$f ]] || { say "missing from the bundle: $f"; exit 1; }
done

size_kib=$(du -sk "$OUT" | cut -f1)
if ((size_kib > LIMIT_MIB * 1024)); then
  say "the bundle is $((size_kib / 1024)) MiB, over the $LIMIT_MIB MiB limit"
  exit 1
fi
say "wrote $OUT ($((size_kib / 1024)).$(((size_kib % 1024) * 10 / 1024)) MiB, ${#PACKAGES[@]} packages; see $OUT/MANIFEST)"
