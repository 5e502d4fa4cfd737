#!/usr/bin/env bash
# Runs every recorded simulator figure's config (bench/results/exp1-6, examples/paper, tests/data/sim_small.yaml,
# and goodput searches of the two stagger configs under four policies) with two builds of `symphony` and compares
# every value of their --json reports. Keys only the new build reports are listed, not counted as differences.
#
#   bench/experiments/compare_sim_builds.sh OLD_SYMPHONY [NEW_SYMPHONY (default build/release/symphony)]
set -uo pipefail
cd "$(dirname "$0")/../.."
old=${1:?usage: $0 OLD_SYMPHONY [NEW_SYMPHONY]}
new=${2:-build/release/symphony}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
# A bare --json (the report on stdout) is what builds before and after `--json FILE` both understand.
run() {
  "$old" simulate "$@" --json >"$tmp/o.json" 2>/dev/null
  "$new" simulate "$@" --json >"$tmp/n.json" 2>/dev/null
  r=$(/usr/bin/python3 - "$tmp/o.json" "$tmp/n.json" <<'PY'
import json, sys
def flat(x, p=""):
    if isinstance(x, dict):
        return {k2: v2 for k, v in x.items() for k2, v2 in flat(v, p + "." + k).items()}
    if isinstance(x, list):
        return {k2: v2 for i, v in enumerate(x) for k2, v2 in flat(v, f"{p}[{i}]").items()}
    return {p: x}
try:
    o, n = (flat(json.load(open(f))) for f in sys.argv[1:3])
except ValueError as e:
    print("unreadable report:", e)
    sys.exit()
bad = [k for k in o if k not in n or o[k] != n[k]]
extra = sorted({k.split("[")[0] for k in n if k not in o})
print(("same" if not bad else f"differ at {bad[:5]}") + (f"; new keys {extra}" if extra else ""))
PY
)
  n=$((n + 1))
  [[ $r == same* ]] || bad=$((bad + 1))
  echo "$*: $r"
}
for c in bench/results/exp[1-6]/configs/*.yaml examples/paper/*.yaml tests/data/sim_small.yaml; do run "$c"; done
for c in examples/paper/stagger_resnet50.yaml examples/paper/stagger_inceptionresnetv2.yaml; do
  for p in deferred eager deferred:paper timeout:5ms; do run "$c" --goodput --policy "$p"; done
done
echo "$n runs, $bad differ"
[[ $bad == 0 ]]
