#!/usr/bin/env bash
# Proves that .gpu-bundle/, not /usr, satisfies the build: builds the project
# and runs its whole test suite in a Debian 12 chroot that has only the
# compiler, CMake, ninja and python3 (no libtorch and none of the bundle's
# packages), with the CUDA toolkit bind-mounted read-only at /usr/local/cuda
# as on the GPU machine. It runs `scripts/gpu-check.sh --selftest`, the same
# configure line as the GPU machine's, which also checks that every package
# CMake found lies in the bundle.
#
#   sudo ./scripts/gpu-bundle-selftest.sh [OUTDIR]     # OUTDIR default: build/gpu-selftest
#
# Needs root, debootstrap and the Debian archive. The chroot (about 450 MB)
# is made once, in $GPU_SELFTEST_ROOT (default /var/tmp/symphony-gpu-selftest),
# and reused; it takes a few minutes, the build and the tests about 15 minutes
# on 2 cores. The copy of the project is what the `device` tool would send:
# tracked files and untracked files that git does not ignore, plus the bundle.
# libtorch comes from torch's pip package on the GPU machine, not from the
# bundle, so the libtorch half of the build is not part of this proof.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-build/gpu-selftest}
CHROOT=${GPU_SELFTEST_ROOT:-/var/tmp/symphony-gpu-selftest}
MIRROR=${GPU_SELFTEST_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=g++,cmake,ninja-build,python3,xz-utils
# The bundle's packages: none may be installed in the chroot.
# (Runtime libraries that a base system has, such as zlib1g and libssl3, may be there.)
BUNDLED=(libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  libbenchmark1debian libconcurrentqueue-dev libreaderwriterqueue-dev googletest libcpp-httplib-dev
  libcpp-httplib0.11 libssl-dev zlib1g-dev libbrotli-dev pkgconf pkgconf-bin pkg-config libprotobuf-dev libprotobuf32
  protobuf-compiler libprotoc32 libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc libabsl-dev
  libre2-dev libc-ares-dev libboost1.74-dev libboost-dev)

say() { printf '[gpu-selftest] %s\n' "$*" >&2; }
[[ $(id -u) -eq 0 ]] || { say "needs root (chroot, mount)"; exit 1; }
command -v debootstrap >/dev/null || { say "needs debootstrap (apt-get install debootstrap)"; exit 1; }

[[ -f .gpu-bundle.txz ]] || ./scripts/gpu-bundle.sh

if [[ ! -e $CHROOT/.symphony-ready ]]; then
  say "making a Debian 12 chroot with only $BASE_PACKAGES in $CHROOT (once)"
  rm -rf "$CHROOT"
  debootstrap --variant=minbase --include="$BASE_PACKAGES" bookworm "$CHROOT" "$MIRROR" >/dev/null
  touch "$CHROOT/.symphony-ready"
fi
for p in "${BUNDLED[@]}"; do
  if chroot "$CHROOT" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    say "the chroot has $p installed: it would hide what the bundle lacks"
    exit 1
  fi
done
for f in /usr/include/yaml-cpp /usr/include/gtest /usr/include/benchmark /usr/include/CLI /usr/include/nlohmann \
  /usr/include/concurrentqueue /usr/include/httplib.h /usr/include/openssl /usr/bin/pkg-config /usr/bin/pkgconf \
  /usr/include/google/protobuf /usr/include/grpcpp /usr/include/boost /usr/bin/protoc /usr/bin/grpc_cpp_plugin; do
  [[ ! -e $CHROOT$f ]] || { say "the chroot has $f"; exit 1; }
done

say "copying the project (what the device tool sends) and the bundle"
rm -rf "$CHROOT/src" "$CHROOT/out" "$CHROOT/build/CMakeCache.txt"  # a fresh configure; objects are reused
mkdir -p "$CHROOT/src" "$CHROOT/out"
git ls-files -z --cached --others --exclude-standard | xargs -0 -I{} sh -c 'test -e "{}" && echo "{}"' |
  tar -cf - -T - | tar -xf - -C "$CHROOT/src"
cp .gpu-bundle.txz "$CHROOT/src/"  # what travels; gpu-check.sh unpacks it

mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount -t proc proc "$CHROOT/proc" && mounts+=("$CHROOT/proc")
if [[ -d /usr/local/cuda/ ]]; then
  mkdir -p "$CHROOT/usr/local/cuda"
  cuda=$(readlink -f /usr/local/cuda)
  mount --bind "$cuda" "$CHROOT/usr/local/cuda" && mounts+=("$CHROOT/usr/local/cuda")
  mount -o remount,bind,ro "$CHROOT/usr/local/cuda"
else
  say "no /usr/local/cuda here: the busy-kernel executor is not part of this run"
fi

say "building and testing in the chroot (scripts/gpu-check.sh --selftest)"
rc=0
chroot "$CHROOT" /usr/bin/env -i PATH=/usr/local/cuda/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
  GPU_CHECK_BUILD=/build GPU_CHECK_BUDGET_S=3600 \
  /bin/bash -c 'cd /src && scripts/gpu-check.sh --selftest /out' || rc=$?
mkdir -p "$OUT"
cp "$CHROOT"/out/* "$OUT"/ 2>/dev/null || true
say "$([[ $rc == 0 ]] && echo PASSED || echo "FAILED (exit $rc)"): the bundle satisfies the build; log and summary in $OUT"
exit $rc
