#!/bin/bash
# A/B in one session: serve built before (OLD: asio's read, the budget from when the front read
# the request) and after (NEW: the kernel's receive stamp) the change, pinned to CPU 0, the
# client (symphony load, the same binary as the server) to CPU 1; rounds alternate the order.
#   OLD=/path/to/old/symphony NEW=build/release/symphony ab.sh OUTDIR
out=${1:?an output folder}
printf 'devices: emulated:1\nmodels:\n  - {name: m, input: "float32[4]", slo_ms: 40, max_batch: 16, alpha_ms: 0.5, beta_ms: 2}\n' > $out/dev.yaml
printf 'devices: emulated:1\nmodels:\n  - {name: m, input: "float32[4]", slo_ms: 40, max_batch: 32, alpha_ms: 0.001, beta_ms: 0.01}\n' > $out/cpu.yaml
for round in 1 2 3; do
 order="old new"; [ $((round % 2)) = 0 ] && order="new old"
 for v in $order; do
  B=$OLD; [ $v = new ] && B=$NEW
  for model in dev cpu; do
   taskset -c 0 $B serve $out/$model.yaml --http 127.0.0.1:18100 --quiet > $out/serve.log 2>&1 &
   SP=$!; sleep 1.5
   if [ $model = dev ]; then points="r1500 c64 c256 c512 c1024"; else points="c64 c512"; fi
   for p in $points; do
     if [ ${p:0:1} = r ]; then arg="--rate ${p:1}"; else arg="--concurrency ${p:1} --connections ${p:1}"; fi
     taskset -c 1 $B load --url http://127.0.0.1:18100 --model m --duration 3 --warmup 1 $arg --budget 40 --quiet --json $out/$round-$v-$model-$p.json > /dev/null 2>&1
     /usr/bin/python3 -c "import json; d=json.load(open('$out/$round-$v-$model-$p.json')); print('$round $v $model $p', round(d['goodput_rps']), d['ok'], d['late'], d['dropped'])"
   done
   kill $SP; wait $SP 2>/dev/null
  done
 done
done
