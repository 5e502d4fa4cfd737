#!/usr/bin/env bash
# Installs the Debian packages Symphony needs to build, test and run its demo.
#
# Idempotent: packages already present are left alone and nothing is downloaded
# when all are installed. Uses --no-install-recommends. Needs root or sudo only
# when something is missing. With arguments, installs those packages instead
# (scripts/container-deps.sh uses it so).
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build ccache pkg-config git
  # the formatting check (.clang-format is written for clang-format 14)
  clang-format-14
  # core tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  libconcurrentqueue-dev libreaderwriterqueue-dev
  # CLI, configs, reports
  libcli11-dev nlohmann-json3-dev libyaml-cpp-dev
  # sub-cluster partitioning MILP (found through pkg-config)
  coinor-libcbc-dev
  # metrics: the /metrics endpoint (cpp-httplib) and the real Prometheus of its test
  libcpp-httplib-dev prometheus
  # models (CPU libtorch on Debian; CUDA builds bring their own libtorch)
  libtorch-dev python3-torch python3-torchvision
  # Python bindings, their tests and the plots
  python3-dev pybind11-dev python3-pybind11 python3-pytest python3-numpy
  python3-matplotlib python3-yaml
  # pip install of the bindings (offline: pip install --no-build-isolation .)
  python3-pip python3-setuptools python3-wheel python3-venv
  # the cluster extension (extensions/rdma): UCX, ucx_info, and clang's
  # libFuzzer for the wire-protocol fuzzer; iproute2 for the network-namespace test
  libucx-dev ucx-utils clang-14 libclang-rt-14-dev iproute2
  # the Open Inference Protocol front: gRPC and protobuf (C++ library, protoc
  # and its C++/Python plugins), Boost.Beast for HTTP, and the clients we did
  # not write that its tests use (curl, Python grpcio)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libboost-dev
  curl python3-grpcio python3-protobuf
  # gzip and deflate request bodies
  zlib1g-dev
  # the symphony tool's allocator (tcmalloc_minimal; SYMPHONY_WITH_TCMALLOC)
  libgoogle-perftools-dev
)

if [[ $# -gt 0 ]]; then PACKAGES=("$@"); fi

say() { printf '[install-deps] %s\n' "$*" >&2; }

if [[ ! -r /etc/debian_version ]] || ! command -v apt-get >/dev/null 2>&1 \
   || ! command -v dpkg-query >/dev/null 2>&1; then
  say "This script supports Debian and Ubuntu (apt) only."
  say "On another system install the equivalents of: ${PACKAGES[*]}"
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  say "all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  say "missing packages: ${missing[*]}"
  say "run this script as root, or as a user with password-less sudo, to install them:"
  say "  sudo apt-get install --no-install-recommends ${missing[*]}"
  exit 1
fi

say "installing ${#missing[@]} missing packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  say "install failed; refreshing the package lists and retrying"
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
say "done"
