#!/bin/bash
# The image's HEALTHCHECK (deploy/Containerfile; docs/deploy.md#probes), with
# bash alone (no curl in the image): healthy when the protocol front answers
# GET /v2/health/ready with 200 (Triton's and KServe's readiness endpoint) on
# the port of SYMPHONY_HTTP (default 8000). A role without a protocol front
# (scheduler, backend) is checked on the metrics endpoint instead: GET /healthz
# on the port of SYMPHONY_METRICS (default 8002), alive rather than ready,
# because a hot-spare scheduler is never ready and must not be restarted for
# it. Exit 0: healthy; 1: not.
set -uo pipefail

# Prints the HTTP status code of GET $2 on 127.0.0.1:$1, or nothing when no one listens.
status_of() {
  local line
  exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || return 0
  printf 'GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$2" >&3
  IFS= read -r -t 3 line <&3 || true
  exec 3<&-
  line=${line#HTTP/1.? }
  printf '%s' "${line%% *}"
}

http=${SYMPHONY_HTTP:-0.0.0.0:8000}
metrics=${SYMPHONY_METRICS:-0.0.0.0:8002}
code=$(status_of "${http##*:}" /v2/health/ready)
if [[ -n $code ]]; then
  [[ $code == 200 ]] || { echo "GET /v2/health/ready on port ${http##*:}: $code" >&2; exit 1; }
  exit 0
fi
code=$(status_of "${metrics##*:}" /healthz)
[[ $code == 200 ]] && exit 0
echo "unhealthy: no answer on port ${http##*:} (/v2/health/ready), and /healthz on port ${metrics##*:}: ${code:-no answer}" >&2
exit 1
