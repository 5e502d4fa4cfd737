#!/usr/bin/env python3
"""Experiment 4 on a subset, for comparing variants of the deferred rule.

Takes the configurations of bench/results/exp4/results.json where the rules
differ most: every one where the paper's rule is below 0.95 x the strongest
eager, every one where the default rule is below 0.95 x the paper's rule,
plus 40 others drawn at random (seed 7). Runs one goodput search per
configuration with the given --policy (target batch) and prints, against the
stored strongest eager and paper-rule goodputs of the same configurations:
how many reach 0.95 x eager, the mean and geometric mean ratio to eager, and
the ratio to the paper's rule where the default rule lost to it.

  /usr/bin/python3 bench/experiments/exp4_subset.py 'deferred:miss_gain=8' [-j 2]
"""
import argparse
import json
import random
import statistics

from simlib import RESULTS, log, pmap, simulate


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("policy", help="a --policy of symphony simulate, e.g. deferred:miss_gain=8")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    args = ap.parse_args()
    rows = json.load(open(RESULTS / "exp4" / "results.json"))["configs"]

    def eager(c):
        return max(c["eager/target_batch"]["goodput_rps"], c["eager/sliding_window"]["goodput_rps"])

    paper_losses = [c for c in rows if c["paper_ratio_vs_best_eager"] < 0.95]
    default_losses = [c for c in rows if c["ratio_vs_best_eager"] < 0.95 * c["paper_ratio_vs_best_eager"]]
    chosen = {c["key"] for c in paper_losses + default_losses}
    others = [c for c in rows if c["key"] not in chosen]
    subset = paper_losses + [c for c in default_losses if c not in paper_losses] + random.Random(7).sample(others, 40)
    log(f"{len(subset)} configurations: {len(paper_losses)} where the paper's rule loses to eager, "
        f"{len(default_losses)} where the default rule loses to the paper's, 40 others")

    def one(c):
        r = simulate(RESULTS / "exp4" / "configs" / f"{c['key']}.yaml", "--goodput", "--policy", args.policy,
                     "--gather", "target_batch")
        return c, r["goodput_rps"]

    res = pmap(one, subset, args.jobs)
    vs_eager = [g / eager(c) for c, g in res]
    vs_paper_where_default_lost = [g / c["deferred:paper/target_batch"]["goodput_rps"] for c, g in res
                                   if c in default_losses]
    print(f"{args.policy}: >= 0.95 x eager in {sum(x >= 0.95 for x in vs_eager)} of {len(res)} "
          f"(min {min(vs_eager):.3f}); ratio to eager mean {statistics.mean(vs_eager):.3f}, geometric mean "
          f"{statistics.geometric_mean(vs_eager):.3f}; where the default rule lost to the paper's: ratio to the "
          f"paper's rule min {min(vs_paper_where_default_lost):.3f}, mean {statistics.mean(vs_paper_where_default_lost):.3f}")
    stored = [c["ratio_vs_best_eager"] for c, _ in res]
    print(f"(stored default rule on the same subset: >= 0.95 x eager in {sum(x >= 0.95 for x in stored)}, "
          f"mean {statistics.mean(stored):.3f}, geometric mean {statistics.geometric_mean(stored):.3f})")


if __name__ == "__main__":
    main()
