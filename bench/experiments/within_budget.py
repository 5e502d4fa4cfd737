#!/usr/bin/env python3
"""Outcome shares of a simulator trace, and the share answered within the clients' budget.

  /usr/bin/python3 bench/experiments/within_budget.py TRACE.csv WARMUP_MS BUDGET_X_SLO

TRACE.csv: `symphony simulate ... --trace-out TRACE.csv`. Counts the requests that arrived after the
warm-up: ok, late, dropped, and answered (ok or late) with a latency of at most BUDGET_X_SLO x their SLO
(the trace's deadline_ms - arrival_ms). bench/results/triton.md, "Budgets far above the SLO".
"""
import csv
import sys

path, warm_ms, budget_x = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
n = ok = late = dropped = within_budget = 0
for r in csv.DictReader(open(path)):
    if r['kind'] != 'request' or float(r['arrival_ms']) < warm_ms: continue
    n += 1
    o = r['outcome']
    if o == 'ok': ok += 1
    elif o == 'late': late += 1
    else: dropped += 1
    if o in ('ok', 'late'):
        # deadline_ms is the target (SLO); the budget is budget_x x SLO from arrival
        slo = float(r['deadline_ms']) - float(r['arrival_ms'])
        if float(r['latency_ms']) <= budget_x * slo + 1e-9: within_budget += 1
print(f"requests {n} ok {100*ok/n:.2f}% late {100*late/n:.2f}% dropped {100*dropped/n:.2f}% answered-within-budget {100*within_budget/n:.2f}%")
