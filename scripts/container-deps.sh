#!/usr/bin/env bash
# Installs and configures what building and running Symphony's container
# images needs on Debian 12 (scripts/image.sh calls it; docs/deploy.md):
# podman with the runc runtime, netavark and aardvark-dns (a network whose
# containers find each other by name), slirp4netns, fuse-overlayfs, uidmap,
# catatonit, debootstrap (the base image is made from Debian's archive: no
# image registry is needed), and the manifests' validator and linter.
#
# Idempotent, like scripts/install-deps.sh (which installs them): packages
# already present are left alone, and /etc/containers/containers.conf gets
# `default_ulimits = []` under [containers] only when it lacks the key
# (podman's default ulimits make the OCI runtime fail on these machines).
# Needs root or sudo only when something must change.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(podman runc conmon netavark aardvark-dns slirp4netns fuse-overlayfs uidmap catatonit
          iptables debootstrap
          # the manifests' validator (deploy/validate_manifests.py) and linter
          python3-kubernetes yamllint)
CONF=/etc/containers/containers.conf

say() { printf '[container-deps] %s\n' "$*" >&2; }

./scripts/install-deps.sh "${PACKAGES[@]}"

if ! grep -Eq '^[[:space:]]*default_ulimits[[:space:]]*=' "$CONF" 2>/dev/null; then
  if [[ $(id -u) -eq 0 ]]; then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    say "$CONF needs 'default_ulimits = []' under [containers]: run this script as root or with sudo"
    exit 1
  fi
  say "setting [containers] default_ulimits = [] in $CONF"
  "${SUDO[@]}" mkdir -p "$(dirname "$CONF")"
  if grep -Eq '^\[containers\]' "$CONF" 2>/dev/null; then
    "${SUDO[@]}" sed -i '0,/^\[containers\]/s//[containers]\ndefault_ulimits = []/' "$CONF"
  else
    printf '[containers]\ndefault_ulimits = []\n' | "${SUDO[@]}" tee -a "$CONF" >/dev/null
  fi
fi
