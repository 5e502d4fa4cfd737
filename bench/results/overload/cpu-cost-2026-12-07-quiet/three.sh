#!/bin/bash
# The front-bound CPU model's closed-loop goodput at C connections for three serve builds in
# rotating order: serve on CPU 0, one client binary on CPU 1, 2 s a point after 0.5 s warm-up.
#   three.sh OUTDIR ROUNDS C  (binaries: /tmp/symphony-67c11c4 old, /tmp/symphony-head head, /tmp/symphony-peek peek)
out=$1; rounds=$2; c=$3
printf 'devices: emulated:1\nmodels:\n  - {name: m, input: "float32[4]", slo_ms: 40, max_batch: 32, alpha_ms: 0.001, beta_ms: 0.01}\n' > $out/cpu.yaml
steal() { awk '/^cpu /{print $9}' /proc/stat; }
echo "# steal ticks at start: $(steal)"
vs=(old head peek)
for r in $(seq 1 $rounds); do
  line="$r"
  for k in 0 1 2; do
    v=${vs[$(( (k + r) % 3 ))]}
    taskset -c 0 /tmp/symphony-$( [ $v = old ] && echo 67c11c4 || echo $v ) serve $out/cpu.yaml --http 127.0.0.1:18100 --quiet > $out/serve.log 2>&1 &
    SP=$!; sleep 1.5
    taskset -c 1 /work/main/build/release/symphony load --url http://127.0.0.1:18100 --model m --duration 2 --warmup 0.5 \
      --concurrency $c --connections $c --budget 40 --quiet --json $out/$r-$v-c$c.json > /dev/null 2>&1
    line="$line $v=$(/usr/bin/python3 -c "import json; print(round(json.load(open('$out/$r-$v-c$c.json'))['goodput_rps']))")"
    kill $SP; wait $SP 2>/dev/null
  done
  echo "$line"
done
echo "# steal ticks at end: $(steal); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
