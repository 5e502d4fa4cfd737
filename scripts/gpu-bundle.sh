#!/usr/bin/env bash
# Writes .gpu-bundle/: what a bare GPU machine lacks to build and test
# Symphony, for scripts/gpu-check.sh to build against there.
#
#   ./scripts/gpu-bundle.sh            # writes .gpu-bundle/ (ignored by git), about 15 MiB
#
# The GPU machines that the `device` tool lends have nvcc, CMake, ninja, g++
# and python3 with torch (CUDA) and torchvision, but no Debian packages and no
# network. This script runs on a Debian 12 x86-64 machine like the project's
# own: it downloads the Debian packages below (`apt-get download`, no root
# needed, nothing installed) and unpacks them with `dpkg -x` into
# .gpu-bundle/root/, so that .gpu-bundle/root/usr is a CMake prefix holding
# their headers, libraries and CMake package files (which locate themselves
# relative to where they are). pkg-config files are rewritten to do the same
# (prefix=${pcfiledir}/...), and .gpu-bundle/bin/pkg-config runs the bundled
# pkgconf on the bundle's .pc files only (cpp-httplib is found through
# pkg-config). The compiled ones (yaml-cpp, GoogleTest, Google Benchmark,
# cpp-httplib, OpenSSL, brotli, pkgconf) are x86-64 builds for glibc >= 2.36
# and the libstdc++ of GCC >= 12, which an Ubuntu 24.04 image has. The bundle must stay under
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
  libcpp-httplib-dev libcpp-httplib0.11 # the /metrics endpoint (symphony::metrics), and what its
  libssl-dev libssl3 zlib1g-dev         #   pkg-config module and header need: OpenSSL, zlib and
  libbrotli-dev libbrotli1              #   brotli headers (static libraries dropped) and libraries
  pkgconf-bin libpkgconf3               # pkg-config itself (.gpu-bundle/bin/pkg-config)
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
dl=(apt-get download -q -o APT::Sandbox::User="$(id -un)")
if ! (cd "$work" && "${dl[@]}" "${PACKAGES[@]}" >/dev/null); then
  say "apt-get download failed; refreshing the package lists (needs root) and retrying"
  apt-get update -q >/dev/null
  (cd "$work" && "${dl[@]}" "${PACKAGES[@]}" >/dev/null)
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
# Static OpenSSL, zlib and brotli are never linked (the shared ones are): 10 MiB saved.
rm -f "$OUT"/root/usr/lib/x86_64-linux-gnu/{libssl,libcrypto,libz}.a "$OUT"/root/usr/lib/x86_64-linux-gnu/libbrotli*.a
# pkg-config files that locate themselves, as the CMake package files do.
for pc in "$OUT"/root/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
  sed -i -E 's#^([A-Za-z_]+)=/usr(/|$)#\1=${pcfiledir}/../../..\2#' "$pc"
done
# Debian's OpenSSL keeps opensslconf.h in the multiarch include directory,
# which only /usr/include/<triplet> is searched for by default.
for pc in "$OUT"/root/usr/lib/x86_64-linux-gnu/pkgconfig/{openssl,libssl,libcrypto}.pc; do
  sed -i -E 's#^Cflags: -I\$\{includedir\}$#Cflags: -I${includedir} -I${includedir}/x86_64-linux-gnu#' "$pc"
done
for pc in "$OUT"/root/usr/share/pkgconfig/*.pc; do
  [[ -e $pc ]] && sed -i -E 's#^([A-Za-z_]+)=/usr(/|$)#\1=${pcfiledir}/../..\2#' "$pc"
done
mkdir -p "$OUT/bin"
cat >"$OUT/bin/pkg-config" <<'WRAPPER'
#!/bin/sh
# pkg-config for .gpu-bundle (scripts/gpu-bundle.sh): the bundled pkgconf, on the bundle's .pc files only.
here=$(cd "$(dirname "$0")/.." && pwd)
lib=$here/root/usr/lib/x86_64-linux-gnu
LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  PKG_CONFIG_LIBDIR="$lib/pkgconfig:$here/root/usr/share/pkgconfig" PKG_CONFIG_PATH= \
  exec "$here/root/usr/bin/pkgconf" "$@"
WRAPPER
chmod +x "$OUT/bin/pkg-config"

# Everything the build looks for must be there.
need=(
  usr/include/yaml-cpp/yaml.h usr/lib/x86_64-linux-gnu/cmake/yaml-cpp/yaml-cpp-config.cmake
  usr/include/CLI/CLI.hpp usr/share/cmake/CLI11/CLI11Config.cmake
  usr/include/nlohmann/json.hpp usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake
  usr/include/gtest/gtest.h usr/lib/x86_64-linux-gnu/libgtest.a usr/lib/x86_64-linux-gnu/cmake/GTest/GTestConfig.cmake
  usr/include/benchmark/benchmark.h usr/lib/x86_64-linux-gnu/cmake/benchmark/benchmarkConfig.cmake
  usr/include/concurrentqueue/concurrentqueue.h usr/include/readerwriterqueue/readerwriterqueue.h
  usr/include/httplib.h usr/lib/x86_64-linux-gnu/pkgconfig/cpp-httplib.pc usr/include/openssl/ssl.h
  usr/include/zlib.h usr/include/brotli/decode.h usr/bin/pkgconf
)
for f in "${need[@]}"; do
  [[ -e $OUT/root/$f ]] || { say "missing from the bundle: $f"; exit 1; }
done

"$OUT/bin/pkg-config" --cflags --libs cpp-httplib >/dev/null ||
  { say "the bundled pkg-config cannot resolve cpp-httplib"; exit 1; }

size_kib=$(du -sk "$OUT" | cut -f1)
if ((size_kib > LIMIT_MIB * 1024)); then
  say "the bundle is $((size_kib / 1024)) MiB, over the $LIMIT_MIB MiB limit"
  exit 1
fi
say "wrote $OUT ($((size_kib / 1024)).$(((size_kib % 1024) * 10 / 1024)) MiB, ${#PACKAGES[@]} packages; see $OUT/MANIFEST)"
