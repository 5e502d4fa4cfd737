#!/bin/bash
# The front-bound (CPU) model's closed-loop peak, serve built before the kernel's receive stamp
# (OLD) and at HEAD (NEW), in alternating pairs: serve pinned to CPU 0, one client binary
# (CLIENT, symphony load) pinned to CPU 1 for both; 2 s a point after 0.5 s of warm-up.
#   OLD=/path/old/symphony NEW=build/release/symphony CLIENT=build/release/symphony pairs.sh OUTDIR [PAIRS]
out=${1:?an output folder}; pairs=${2:-8}
printf 'devices: emulated:1\nmodels:\n  - {name: m, input: "float32[4]", slo_ms: 40, max_batch: 32, alpha_ms: 0.001, beta_ms: 0.01}\n' > $out/cpu.yaml
steal() { awk '/^cpu /{print $9}' /proc/stat; }
echo "# steal ticks at start: $(steal)"
echo "# pair variant good-r/s@64 good-r/s@512"
for r in $(seq 1 $pairs); do
 order="old new"; [ $((r % 2)) = 0 ] && order="new old"
 for v in $order; do
  B=$OLD; [ $v = new ] && B=$NEW
  taskset -c 0 $B serve $out/cpu.yaml --http 127.0.0.1:18100 --quiet > $out/serve.log 2>&1 &
  SP=$!; sleep 1.5
  line="$r $v"
  for c in 64 512; do
    taskset -c 1 $CLIENT load --url http://127.0.0.1:18100 --model m --duration 2 --warmup 0.5 \
      --concurrency $c --connections $c --budget 40 --quiet --json $out/$r-$v-c$c.json > /dev/null 2>&1
    line="$line $(/usr/bin/python3 -c "import json; print(round(json.load(open('$out/$r-$v-c$c.json'))['goodput_rps']))")"
  done
  echo "$line"
  kill $SP; wait $SP 2>/dev/null
 done
done
echo "# steal ticks at end: $(steal); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
