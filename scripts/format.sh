#!/usr/bin/env bash
# Formats the project's C++ sources with .clang-format (clang-format 14), or
# with --check changes nothing and fails (exit 1) listing every file that is
# not formatted; .ci/run runs the check. Only tracked files are read.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || true)
if [[ -z "$fmt" ]]; then
  echo "format: clang-format-14 is missing (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
dirs='^(include|server|serve|load|front|repository|config|extensions|tools|tests|bench|bindings|partition|simtool|metrics|gpu|profile_io|examples)/'
mapfile -d '' files < <(git ls-files -z -- '*.cc' '*.hpp' '*.h' '*.cu' | grep -zE "$dirs")
if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do
    if ! "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
  done
  if ((${#bad[@]})); then
    printf 'format: %d files are not formatted (run ./scripts/format.sh):\n' "${#bad[@]}" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted" >&2
  exit 0
fi
printf '%s\0' "${files[@]}" | xargs -0 "$fmt" -i
echo "format: ${#files[@]} files formatted" >&2
