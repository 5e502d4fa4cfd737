#!/usr/bin/env bash
# Builds Symphony's OCI image, symphony:<VERSION> and symphony:latest, with
# podman (docs/deploy.md):
#
#   1. installs the build's and the containers' Debian packages
#      (scripts/install-deps.sh, scripts/container-deps.sh) and builds the
#      `symphony` binary of the release preset (incremental);
#   2. makes the base image once: a Debian 12 minbase from Debian's archive
#      (debootstrap), imported as localhost/symphony-base:bookworm (the cache:
#      remove that image to make it again);
#   3. installs the binary into a staging folder (cmake --install --strip),
#      finds the Debian packages that own its shared libraries (ldd, dpkg -S),
#      and builds deploy/Containerfile on the base with those packages alone.
#
#   ./scripts/image.sh [--test] [--cluster-test] [--base IMAGE] [--variant NAME]
#
#   --test          then run the image's test (deploy/tests/test_image.py):
#                   health, metadata, REST and gRPC inference, metrics, repository
#                   load and unload, SIGTERM with requests in flight
#   --cluster-test  then run the containerised cluster's test
#                   (deploy/tests/test_cluster_containers.py): scheduler, hot spare,
#                   backend and frontend containers; the scheduler's is killed
#   --base IMAGE    build on IMAGE instead of the debootstrap'd base (the CUDA
#                   variant: a CUDA runtime image; docs/deploy.md#the-cuda-variant)
#   --variant NAME  the tag's suffix and the io.symphony.variant label (default cpu;
#                   a variant other than cpu is tagged symphony:<VERSION>-NAME)
#
# SYMPHONY_BUILD_DIR: use that build's binary as it is (default: build/release,
# built here). Needs root or password-less sudo for the packages and podman.
set -euo pipefail

run_test=0
run_cluster_test=0
base=""
variant=cpu
while [[ $# -gt 0 ]]; do
  case "$1" in
    --test) run_test=1; shift ;;
    --cluster-test) run_cluster_test=1; shift ;;
    --base) base="$2"; shift 2 ;;
    --variant) variant="$2"; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "image.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
# (After the arguments: --help and a mistyped flag answer before any package is checked.)
source "$(dirname "$0")/common.sh"

step "installing missing container packages (podman, runc, debootstrap)"
./scripts/container-deps.sh

# podman as it works on these machines: runc (crun fails on hybrid cgroups), cgroupfs.
podman() { command podman --runtime runc --cgroup-manager=cgroupfs "$@"; }

work=$(mktemp -d /tmp/symphony-image-XXXXXX)
trap 'rm -rf "$work"' EXIT

if [[ -z "$base" ]]; then
  base=localhost/symphony-base:bookworm
  if podman image exists "$base"; then
    step "base image $base present (podman rmi it to make it again)"
  else
    step "making the base image $base: debootstrap --variant=minbase bookworm (about a minute)"
    debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
      || { tail -20 "$work/debootstrap.log" >&2; echo "image.sh: debootstrap failed (log above)" >&2; exit 1; }
    # Smaller: no package lists, caches, logs, manuals or translations, now and
    # for the packages installed on it later (dpkg's path-exclude); the
    # copyright files stay.
    r="$work/rootfs"
    cat >"$r/etc/dpkg/dpkg.cfg.d/90-symphony-nodoc" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/lintian/*
EOF
    find "$r/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$r"/usr/share/man/* "$r"/usr/share/info/* "$r"/usr/share/locale/* \
      "$r"/var/lib/apt/lists/* "$r"/var/cache/apt/archives/*.deb "$r"/var/log/*
    tar -C "$work/rootfs" -c . | podman import -q --message "debootstrap --variant=minbase bookworm" - "$base" >/dev/null
    rm -rf "$work/rootfs"
  fi
fi

version=$(tr -d '[:space:]' < VERSION)
build="${SYMPHONY_BUILD_DIR:-}"
if [[ -z "$build" ]]; then
  step "configuring and building the symphony tool (preset release)"
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$jobs" --target symphony_cli
  build=build/release
fi
[[ -x "$build/symphony" ]] || { echo "image.sh: no binary at $build/symphony" >&2; exit 1; }
for cmd in serve scheduler backend frontend; do
  "$build/symphony" "$cmd" --help >/dev/null 2>&1 \
    || { echo "image.sh: $build/symphony has no '$cmd' command (needs libtorch, the front and UCX)" >&2; exit 1; }
done

step "staging the binary and finding its runtime packages"
ctx="$work/context"
mkdir -p "$ctx/lib"
cmake --install "$build" --prefix "$work/stage" --strip >/dev/null
cp "$work/stage/bin/symphony" "$ctx/symphony"
cp deploy/healthcheck.sh "$ctx/healthcheck.sh"
# The binary's libraries (ldd: the whole closure), each with the spellings
# dpkg may have recorded it under (merged /usr: /lib and /usr/lib), then one
# dpkg -S for all of them (it reads its whole database on each call).
ldd "$ctx/symphony" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u >"$work/libs"
while read -r lib; do
  for p in "$lib" "$(readlink -f "$lib")"; do
    printf '%s\n' "$p" "${p/#\/usr\/lib\//\/lib/}" "${p/#\/lib\//\/usr\/lib/}"
  done
done <"$work/libs" | sort -u >"$work/candidates"
xargs -a "$work/candidates" dpkg -S 2>/dev/null | sed -n 's/^\([^:, ]*\)\(:[a-z0-9]*\)\?: \(.*\)$/\3 \1/p' >"$work/owners" || true
: >"$work/packages"
unowned=()
# A library found through a link that no package ships (an alternative, as
# libblas.so.3 -> /etc/alternatives/... -> blas/libblas.so.3, made by a
# maintainer script the image does not run) gets that link in links.txt.
: >"$ctx/links.txt"
# Prints the package that owns path $1 under any of its spellings, or nothing.
owner_of() {
  local c pkg=""
  for c in "$1" "${1/#\/usr\/lib\//\/lib/}" "${1/#\/lib\//\/usr\/lib/}"; do
    if [[ -z "$pkg" ]]; then pkg=$(awk -v f="$c" '$1 == f { print $2; exit }' "$work/owners"); fi
  done
  echo "$pkg"
}
while read -r lib; do
  real=$(readlink -f "$lib")
  pkg=$(owner_of "$lib")
  if [[ -z "$pkg" ]]; then
    pkg=$(owner_of "$real")
    if [[ -n "$pkg" ]]; then echo "${lib/#\/lib\//\/usr\/lib/} $real" >>"$ctx/links.txt"; fi
  fi
  if [[ -n "$pkg" ]]; then
    echo "$pkg" >>"$work/packages"
  else
    unowned+=("$lib")
  fi
done <"$work/libs"
if ldd "$ctx/symphony" | grep -q 'not found'; then
  ldd "$ctx/symphony" | grep 'not found' >&2
  echo "image.sh: the binary's libraries above are missing on this machine" >&2
  exit 1
fi
for lib in "${unowned[@]}"; do
  # No package owns it (a libtorch from a wheel, say): the image carries the file itself.
  echo "  no Debian package owns $lib: copied into /opt/symphony/lib" >&2
  cp -L "$lib" "$ctx/lib/"
done
sort -u "$work/packages" >"$ctx/runtime-packages.txt"
echo "  $(wc -l <"$ctx/runtime-packages.txt") packages: $(tr '\n' ' ' <"$ctx/runtime-packages.txt")" >&2

tag="symphony:$version"
latest="symphony:latest"
if [[ "$variant" != cpu ]]; then
  tag="symphony:$version-$variant"
  latest="symphony:latest-$variant"
fi
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
source_url="${SYMPHONY_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}"
step "building $tag and $latest on $base (deploy/Containerfile)"
# --format docker: the OCI format has no HEALTHCHECK. --network host: the
# package installs reach Debian's archive the way this machine does. The
# labels that change between builds are given again with --label: podman
# 4.3 reuses a cached LABEL layer whose ARGs have changed.
previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
t0=$(date +%s)
podman build --format docker --network host -f deploy/Containerfile \
  --build-arg "BASE=$base" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
  --build-arg "SOURCE=$source_url" --build-arg "VARIANT=$variant" \
  --label "org.opencontainers.image.version=$version" --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.source=$source_url" --label "org.opencontainers.image.base.name=$base" \
  --label "io.symphony.variant=$variant" \
  -t "$tag" -t "$latest" "$ctx"
# The image these tags named before, now without a name: removed (its layers are shared or stale).
if [[ -n "$previous" && "$previous" != "$(podman image inspect --format '{{.Id}}' "$tag")" ]] \
   && [[ -z "$(podman image inspect --format '{{join .RepoTags ","}}' "$previous" 2>/dev/null)" ]]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
size=$(podman image inspect --format '{{.Size}}' "$tag")
printf '\nbuilt %s (= %s) in %d s: %d MB (%d bytes; the base alone: %d MB)\n' "$tag" "$latest" \
  $(($(date +%s) - t0)) $((size / 1000000)) "$size" \
  $(($(podman image inspect --format '{{.Size}}' "$base") / 1000000)) >&2

tests=()
[[ $run_test == 1 ]] && tests+=(deploy/tests/test_image.py)
[[ $run_cluster_test == 1 ]] && tests+=(deploy/tests/test_cluster_containers.py)
if [[ ${#tests[@]} -gt 0 ]]; then
  step "making the test models (tests/data/make_test_models.py)"
  mkdir -p "$work/models"
  /usr/bin/python3 tests/data/make_test_models.py "$work/models" >/dev/null
  step "testing $tag: ${tests[*]}"
  SYMPHONY_IMAGE="$tag" SYMPHONY_PROTO_DIR="$PWD/front/proto" SYMPHONY_TEST_MODELS="$work/models" \
    PYTHONPATH="$PWD/front/tests:$PWD/deploy/tests" \
    /usr/bin/python3 -m pytest -q -rP -p no:cacheprovider "${tests[@]}"
fi
