#!/usr/bin/env python3
"""The paper's network experiment (Figure `ddata`, "Impact of network"), in the
simulator: 20 equally popular ResNet-like models (the ResNet50 profile of the
examples, l(b) = 1.053 b + 5.072 ms, max batch 64), 32 GPUs, Poisson arrivals,
SLO 20, 25, 50 and 100 ms; Symphony's default policy (deferred, target-batch
gathering). For each network setting, `symphony simulate --goodput` (the
highest total rate at which every model is <= 1 % bad; seed 1).

Network settings (x is the network latency of the point):

  rdma        d_ctrl = d_data = x, x in 0..100 us: every input read costs a
              whole RDMA latency, one after another (the pessimistic reading).
  tcp_fixed   d_ctrl = x (the scheduler's message and the input fetch, one
              round), d_data = 30 us (a 150 KB input at 40 Gb/s), x in
              0..10 ms, exactly x every time: the scheduler knows the delay.
  tcp_tail    the same medians, but each dispatch's real delay is drawn from a
              log-normal whose 99.99th percentile is 12x its median (the
              paper's TCP measurement: median 3034 us, p99.99 12x);
              the scheduler plans with its 99th percentile (as the cluster's
              scheduler learns delays) -- `delays.distribution: lognormal`.
  tcp_tail_p90, tcp_tail_p50  the same draws, the scheduler plans with the
              90th percentile or the median: the price of planning
              optimistically.

  /usr/bin/python3 bench/experiments/network_sim.py [-j 1] [--only rdma,tcp_fixed] [--duration 10]

Results: bench/results/network/sim.json (each row with its command),
bench/results/network/configs/*.yaml, bench/results/network/ddata.png (the
paper's two panels) and ddata_tcp_plan.png (the plan percentile, per SLO).
"""
import argparse

from simlib import Clock, command_line, log, pmap, results_dir, save_json, simulate, write_config

SLOS = [20, 25, 50, 100]
MODELS = 20
GPUS = 32
ALPHA, BETA = 1.053, 5.072
TAIL = {"percentile": 0.9999, "ratio": 12}

RDMA_US = [0, 10, 25, 50, 100]
TCP_MS = [0.5, 1, 2, 3, 5, 10]


def delays_for(variant, x):
    if variant == "rdma":
        return {"ctrl_ms": x / 1000, "data_ms": x / 1000}
    d = {"ctrl_ms": x, "data_ms": 0.03}
    if variant == "tcp_tail":
        d.update({"distribution": "lognormal", "tail": TAIL, "plan_percentile": 0.99})
    elif variant == "tcp_tail_p90":
        d.update({"distribution": "lognormal", "tail": TAIL, "plan_percentile": 0.9})
    elif variant == "tcp_tail_p50":
        d.update({"distribution": "lognormal", "tail": TAIL, "plan_percentile": 0.5})
    return d


def config(slo, variant, x, duration):
    return {
        "name": f"net_{variant}_{x:g}_slo{slo}", "seed": 1, "gpus": GPUS, "duration_s": duration, "warmup_s": 1,
        "policy": "deferred", "gather": "target_batch",
        "delays": delays_for(variant, x),
        "workload": {"rate": 20000, "arrival": "poisson", "popularity": "equal"},
        "models": [{"name": f"resnet{i}", "alpha_ms": ALPHA, "beta_ms": BETA, "slo_ms": slo, "max_batch": 64}
                   for i in range(MODELS)],
        "search": {"goodput": {"tolerance": 0.01}},
    }


def points(variants):
    for variant in variants:
        xs = RDMA_US if variant == "rdma" else TCP_MS
        for slo in SLOS:
            for x in xs:
                yield slo, variant, x


def series(rows, variant, slo):
    r = sorted((row for row in rows if row["variant"] == variant and row["slo_ms"] == slo), key=lambda r: r["x"])
    pts = [(p["x"], p["goodput_rps"] / 1000) for p in r]
    if variant != "rdma" and pts:  # x = 0 of the TCP panels: the RDMA sweep's zero point
        z = [row for row in rows if row["variant"] == "rdma" and row["slo_ms"] == slo and row["x"] == 0]
        pts = [(0, z[0]["goodput_rps"] / 1000)] + pts if z else pts
    return [p[0] for p in pts], [p[1] for p in pts]


def plot(rows, path, path_plan):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not available: no figure")
        return False
    colors = dict(zip(SLOS, ["tab:red", "tab:orange", "tab:green", "tab:blue"]))
    # The paper's two panels: the RDMA range, and the TCP range (fixed and heavy-tailed delays).
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for slo in SLOS:
        x, y = series(rows, "rdma", slo)
        left.plot(x, y, "o-", color=colors[slo], label=f"SLO {slo} ms")
        x, y = series(rows, "tcp_fixed", slo)
        right.plot(x, y, "o-", color=colors[slo], label=f"SLO {slo} ms, fixed")
        x, y = series(rows, "tcp_tail", slo)
        right.plot(x, y, "s--", color=colors[slo], label=f"SLO {slo} ms, heavy tail (plan p99)")
    left.set_xlabel("d_ctrl = d_data (us)")
    left.set_ylabel("goodput (k requests/s)")
    left.set_title("RDMA range (exact delays)")
    left.set_ylim(bottom=0)
    left.legend(fontsize=7)
    right.set_xlabel("d_ctrl (ms; the median for the heavy tail), d_data 30 us")
    right.set_ylabel("goodput (k requests/s)")
    right.set_title("TCP range: exact, or log-normal with p99.99 = 12 x median", fontsize=9)
    right.set_ylim(bottom=0)
    right.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    # The plan percentile under the heavy tail, one panel per SLO.
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.4), sharey=False)
    for ax, slo in zip(axes, SLOS):
        for variant, style, label in [("tcp_fixed", "o-", "exact"), ("tcp_tail", "s--", "tail, plan p99"),
                                      ("tcp_tail_p90", "d-.", "tail, plan p90"),
                                      ("tcp_tail_p50", "^:", "tail, plan p50")]:
            x, y = series(rows, variant, slo)
            if x:
                ax.plot(x, y, style, label=label)
        ax.set_title(f"SLO {slo} ms")
        ax.set_xlabel("d_ctrl median (ms)")
        ax.set_ylim(bottom=0)
    axes[0].set_ylabel("goodput (k requests/s)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path_plan, dpi=100)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--only", default="rdma,tcp_fixed,tcp_tail,tcp_tail_p90,tcp_tail_p50")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--plot-only", action="store_true", help="redraw the figure from sim.json")
    args = ap.parse_args()
    out = results_dir("network")
    if args.plot_only:
        import json
        rows = json.load(open(out / "sim.json"))["rows"]
        plot(rows, out / "ddata.png", out / "ddata_tcp_plan.png")
        return
    clock = Clock()
    todo = list(points(args.only.split(",")))

    def run(p):
        slo, variant, x = p
        cfg = config(slo, variant, x, args.duration)
        path = write_config(out / "configs" / f"{cfg['name']}.yaml", cfg)
        rep = simulate(path, "--goodput")
        row = {"slo_ms": slo, "variant": variant, "x": x, "x_unit": "us" if variant == "rdma" else "ms",
               "delays": cfg["delays"], "goodput_rps": rep["goodput_rps"],
               "bad_rate_at_goodput": rep.get("bad_rate"),
               "worst_model_bad_rate_at_goodput": rep.get("worst_model_bad_rate"),
               "median_batch_at_goodput": rep.get("median_batch"),
               "planned_delays_ms": rep["config"].get("delay_distribution"),
               "command": command_line(path, "--goodput")}
        log(f"{variant:13s} slo {slo:3d} x {x:g}: goodput {rep['goodput_rps']:.0f} r/s")
        return row

    rows = pmap(run, todo, args.jobs)
    prev = {}
    try:
        import json
        prev = json.load(open(out / "sim.json"))
    except (OSError, ValueError):
        pass
    keep = [r for r in prev.get("rows", []) if r["variant"] not in set(args.only.split(","))]
    rows = keep + rows
    save_json(out / "sim.json", {
        "experiment": "network_sim", "models": MODELS, "gpus": GPUS, "slos_ms": SLOS,
        "profile": {"alpha_ms": ALPHA, "beta_ms": BETA, "max_batch": 64}, "tail": TAIL,
        "duration_s": args.duration, "rows": rows,
        "wall_s_last_run": round(clock.wall_seconds(), 1), "cpu_s_last_run": round(clock.cpu_seconds(), 1)})
    plot(rows, out / "ddata.png", out / "ddata_tcp_plan.png")
    for slo in SLOS:
        line = [f"{r['variant']}@{r['x']:g}={r['goodput_rps']:.0f}" for r in rows if r["slo_ms"] == slo]
        print(f"SLO {slo}: " + " ".join(line))


if __name__ == "__main__":
    main()
