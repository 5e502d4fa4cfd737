#!/usr/bin/env python3
"""Experiment 2 plot: eager's goodput as a percentage of deferred's, against
beta/alpha, for both gathering policies and against the paper's exact rule
(left); absolute goodputs (right).

  exp2_beta.py bench/results/exp2/results.json out.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    runs = json.load(open(src))["runs"]
    betas = sorted({r["beta"] for r in runs})

    def g(beta, policy, gather):
        return next(r["goodput_rps"] for r in runs if r["beta"] == beta and r["policy"] == policy and r["gather"] == gather)

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    for gather, style in (("target_batch", "o-"), ("sliding_window", "s--")):
        a.plot(betas, [100 * g(x, "eager", gather) / g(x, "deferred", gather) for x in betas], style, label=gather)
        for policy in ("deferred", "eager"):
            b.plot(betas, [g(x, policy, gather) for x in betas], style, label=f"{policy}/{gather}")
    if any(r["policy"] == "deferred:paper" for r in runs):
        a.plot(betas, [100 * g(x, "eager", "target_batch") / g(x, "deferred:paper", "target_batch") for x in betas],
               "^:", color="gray", label="target_batch, vs deferred:paper")
    a.axhline(100, color="gray", lw=0.8)
    a.set_xlabel("beta / alpha")
    a.set_ylabel("eager goodput, % of deferred")
    a.set_title("10 models, 32 GPUs, SLO = 2 l(8), Poisson")
    a.legend()
    b.set_xlabel("beta / alpha")
    b.set_ylabel("goodput (r/s)")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(*sys.argv[1:3])
