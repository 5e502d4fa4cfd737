# Shared preamble of the project's entry-point scripts (demo.sh, test.sh,
# sanitize.sh; sourced, never run): strict mode, the repository root as the
# working directory, step(), the build parallelism, and the missing Debian
# packages installed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Prints a step heading on stderr.
step() { printf '\n==> %s\n' "$*" >&2; }

# Compile and test jobs: one per core.
jobs=$(nproc 2>/dev/null || echo 2)

step "installing missing system packages"
./scripts/install-deps.sh
