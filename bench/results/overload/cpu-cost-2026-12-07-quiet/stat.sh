#!/bin/bash
# $1: serve binary; prints requests served and perf stat of the server over 3 s of a 64-connection flood
B=$1
taskset -c 0 $B serve /tmp/cpucost/cpu.yaml --http 127.0.0.1:18100 --quiet > /tmp/cpucost/serve.log 2>&1 &
SP=$!; sleep 1.5
taskset -c 1 /work/main/build/release/symphony load --url http://127.0.0.1:18100 --model m --duration 4 --warmup 0.5 \
  --concurrency 64 --connections 64 --budget 40 --quiet --json /tmp/cpucost/stat.json > /dev/null 2>&1 &
LP=$!
sleep 1.5
perf stat -e task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter,syscalls:sys_enter_recvmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_futex,syscalls:sys_enter_read -p $SP -- sleep 2 2>&1 | grep -E "^ +[0-9]" 
wait $LP
python3 -c "import json; d=json.load(open('/tmp/cpucost/stat.json')); print('goodput', round(d['goodput_rps']))"
kill $SP; wait $SP 2>/dev/null
