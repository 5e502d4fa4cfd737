#!/usr/bin/env bash
# Writes .gpu-bundle/: what a bare GPU machine lacks to build and test
# Symphony, for scripts/gpu-check.sh to build against there.
#
#   ./scripts/gpu-bundle.sh      # writes .gpu-bundle/ and .gpu-bundle.txz (ignored by git)
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
# cpp-httplib, OpenSSL, brotli, pkgconf, protobuf, gRPC and its libraries) are
# x86-64 builds for glibc >= 2.36 and the libstdc++ of GCC >= 12, which an
# Ubuntu 24.04 image has; scripts/gpu-check.sh puts the bundle's library
# directory on LD_LIBRARY_PATH for what it builds. Of Boost (the front's Beast
# and Asio, headers only) only the header trees the build includes are kept.
# What travels is .gpu-bundle.txz (xz, about 20 MiB; gpu-check.sh unpacks it):
# it must stay under 40 MiB, beside the working tree, under the device tool's
# 64 MiB; the script checks that. MANIFEST lists the packages, versions and
# checksums.
#
# Run on the GPU machine:  the `run` command in bench/results/gpu.md
# (carry: [".gpu-bundle.txz"], command: scripts/gpu-check.sh $OUT).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=.gpu-bundle
LIMIT_MIB=40

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
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32
                                        # config.pbtxt (symphony::repository) and the front's messages
  libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc
  libabsl-dev libabsl20220623 libre2-dev libre2-9 libc-ares-dev libc-ares2
                                        # the front's gRPC service, and what gRPC's CMake package needs
  libboost1.74-dev                      # the front's HTTP (Beast, Asio): headers, pruned below
)
# The Boost header trees the build includes (ninja -t deps of a release build,
# by first path component under boost/, and every header at boost/'s top);
# of boost/numeric only conversion/. The rest of Boost (150 MiB) is dropped.
BOOST_TREES=(asio beast type_traits mpl preprocessor intrusive date_time smart_ptr mp11 numeric/conversion move core
  config optional system utility logic exception detail assert)

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
# Static libraries are never linked (the shared ones are; GoogleTest's and
# Google Benchmark's are the exceptions): 60 MiB saved.
find "$OUT/root/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' \
  ! -name 'libbenchmark*' -delete
boost=$OUT/root/usr/include/boost
mv "$boost" "$work/boost"
mkdir -p "$boost"
find "$work/boost" -maxdepth 1 -type f -exec cp -a {} "$boost/" \;
for t in "${BOOST_TREES[@]}"; do
  mkdir -p "$boost/$(dirname "$t")"
  cp -a "$work/boost/$t" "$boost/$t"
done
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
  usr/bin/protoc usr/bin/grpc_cpp_plugin usr/include/google/protobuf/message.h usr/include/grpcpp/grpcpp.h
  usr/lib/x86_64-linux-gnu/cmake/grpc/gRPCConfig.cmake usr/include/boost/beast.hpp usr/include/boost/asio.hpp
  usr/lib/x86_64-linux-gnu/cmake/Boost-1.74.0/BoostConfig.cmake
)
for f in "${need[@]}"; do
  [[ -e $OUT/root/$f ]] || { say "missing from the bundle: $f"; exit 1; }
done

"$OUT/bin/pkg-config" --cflags --libs cpp-httplib >/dev/null ||
  { say "the bundled pkg-config cannot resolve cpp-httplib"; exit 1; }

# What travels: the same tree, compressed (gpu-check.sh unpacks it where .gpu-bundle/ is absent).
tar -C "$OUT" -cf - . | xz -T0 -6 >"$OUT.txz"
size_kib=$(du -sk "$OUT.txz" | cut -f1)
if ((size_kib > LIMIT_MIB * 1024)); then
  say "$OUT.txz is $((size_kib / 1024)) MiB, over the $LIMIT_MIB MiB limit"
  exit 1
fi
say "wrote $OUT ($(du -sm "$OUT" | cut -f1) MiB, ${#PACKAGES[@]} packages; see $OUT/MANIFEST) and $OUT.txz" \
  "($((size_kib / 1024)).$(((size_kib % 1024) * 10 / 1024)) MiB)"
