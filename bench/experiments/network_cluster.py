#!/usr/bin/env python3
"""The network experiment on real processes: the cluster demo's setup
(scripts/cluster-demo.sh: a scheduler and two backends with 4 emulated GPUs
each, 8 in all, UCX over TCP on loopback; the ResNet50 profile at SLO 25 ms,
examples/cluster/cluster.yaml) with `cluster.inject_delay_us: X` in every
process (docs/cluster.md, "Injected network delay"), for a few X.

For each X:
  1. start the scheduler and the backends; 4 s of calibration load
     (`symphony loadgen`) so that the scheduler learns d_ctrl, d_data, d_resp;
  2. offer a fixed grid of rates, RATE_S seconds each (`symphony loadgen`,
     the cluster client), and record the bad rate (late + dropped + errors
     over sent) the load generator saw;
  3. ask the simulator about the same config at the delays the scheduler
     learned: its goodput (--goodput) and its bad rate at each offered rate.

Every process runs under `nice -n 19` (the machine is shared). Every load is
bounded. Results: bench/results/network/cluster.json (with the commands).

  /usr/bin/python3 bench/experiments/network_cluster.py [--delays-us 0,100,1000,3000] [--rates 2000,3500,4500,5200]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from simlib import ROOT, binary, log, results_dir, save_json, simulate, write_config

NICE = ["nice", "-n", "19"]


def wait_for(pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


class Cluster:
    def __init__(self, cfg_path, work):
        self.cfg, self.work, self.procs = str(cfg_path), Path(work), []

    def start(self):
        port_file = self.work / "port"
        b = str(binary())
        self.procs.append(subprocess.Popen(
            NICE + [b, "scheduler", "--listen", "127.0.0.1:0", "--config", self.cfg, "--port-file", str(port_file),
                    "--json", str(self.work / "scheduler.json")],
            stdout=open(self.work / "scheduler.log", "w"), stderr=subprocess.STDOUT))
        if not wait_for(lambda: port_file.exists() and port_file.read_text().strip(), 60):
            raise RuntimeError("the scheduler did not start: " + (self.work / "scheduler.log").read_text())
        self.addr = "127.0.0.1:" + port_file.read_text().strip()
        for i in (1, 2):
            self.procs.append(subprocess.Popen(
                NICE + [b, "backend", "--scheduler", self.addr, "--devices", "emulated:4", "--config", self.cfg,
                        "--name", f"backend{i}", "--json", str(self.work / f"backend{i}.json")],
                stdout=open(self.work / f"backend{i}.log", "w"), stderr=subprocess.STDOUT))
        if not wait_for(lambda: (self.work / "scheduler.log").read_text().count(" registered ") >= 2, 60):
            raise RuntimeError("the backends did not register: " + (self.work / "scheduler.log").read_text())

    def loadgen(self, name, rate, duration, warmup):
        out = self.work / f"{name}.json"
        cmd = NICE + [str(binary()), "loadgen", "--scheduler", self.addr, "--config", self.cfg, "--duration",
                      str(duration), "--warmup", str(warmup), "--rate", str(rate), "--quiet", "--name", name,
                      "--json", str(out)]
        subprocess.run(cmd, check=True, timeout=duration + 60, stdout=subprocess.DEVNULL,
                       stderr=open(self.work / f"{name}.log", "w"))
        return json.load(open(out))

    def learned_delays(self):
        return json.load(open(self.work / "scheduler.json"))["delays_us"]

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delays-us", default="0,100,1000,3000")
    ap.add_argument("--rates", default="2000,3500,4500,5200")
    ap.add_argument("--rate-seconds", type=float, default=6)
    ap.add_argument("--slo-ms", type=float, default=25, help="the model's SLO (the demo's: 25 ms)")
    ap.add_argument("--out", default="cluster.json")
    args = ap.parse_args()
    out = results_dir("network")
    base = yaml.safe_load(open(ROOT / "examples" / "cluster" / "cluster.yaml"))
    rates = [float(r) for r in args.rates.split(",")]
    rows = []
    for x in [float(v) for v in args.delays_us.split(",")]:
        cfg = json.loads(json.dumps(base))
        tag = f"slo{args.slo_ms:g}_inject_{x:g}us"
        cfg["name"] = f"cluster_{tag}"
        cfg["models"][0]["slo_ms"] = args.slo_ms
        cfg["cluster"]["inject_delay_us"] = x
        cfg_path = write_config(out / "configs" / f"cluster_{tag}.yaml", cfg)
        work = Path(tempfile.mkdtemp(prefix="symphony-network-"))
        cl = Cluster(cfg_path, work)
        row = {"inject_delay_us": x, "config": os.path.relpath(cfg_path, ROOT), "runs": []}
        try:
            cl.start()
            cal = cl.loadgen("calibration", 2000, 4, 1)
            time.sleep(1.5)  # the scheduler's report is rewritten every second
            d = cl.learned_delays()
            row["loadavg_1min_at_calibration"] = os.getloadavg()[0]
            row["learned_delays_us"] = {k: d[k] for k in ("ctrl", "data", "resp", "batch_samples")}
            row["calibration_bad_rate"] = (cal["sent"] - cal["ok"]) / max(cal["sent"], 1)
            log(f"inject {x:g} us: learned d_ctrl {d['ctrl']:.0f} us, d_data {d['data']:.1f} us, "
                f"d_resp {d['resp']:.0f} us")
            for r in rates:
                rep = cl.loadgen(f"load_{r:g}", r, args.rate_seconds, 1)
                bad = (rep["late"] + rep["dropped"] + rep["errors"]) / max(rep["sent"], 1)
                row["runs"].append({"offered_rps": r, "sent": rep["sent"], "ok": rep["ok"], "late": rep["late"],
                                    "dropped_by_reason": rep.get("dropped_by_reason"),
                                    "dropped": rep["dropped"], "errors": rep["errors"], "bad_rate": bad,
                                    "loadavg_1min_after": os.getloadavg()[0]})
                log(f"  offered {r:g} r/s: bad {100 * bad:.2f} % ({rep['sent']} sent)")
        finally:
            cl.stop()
            shutil.rmtree(work, ignore_errors=True)
        # The simulator at the learned delays (as scripts/cluster-demo.sh does).
        sim = {k: v for k, v in cfg.items() if k != "cluster"}
        sim["name"] = f"sim_{tag}"
        ld = row["learned_delays_us"]
        sim["delays"] = {"ctrl_ms": ld["ctrl"] / 1000, "data_ms": ld["data"] / 1000, "resp_ms": ld["resp"] / 1000}
        sim_path = write_config(out / "configs" / f"sim_{tag}.yaml", sim)
        g = simulate(sim_path, "--goodput")
        row["sim_goodput_rps"] = g["goodput_rps"]
        row["sim_command"] = f"build/release/symphony simulate {os.path.relpath(sim_path, ROOT)} --goodput"
        for run in row["runs"]:
            s = simulate(sim_path, "--rate", run["offered_rps"])
            run["sim_bad_rate"] = s["bad_rate"]
        passing = [run["offered_rps"] for run in row["runs"] if run["bad_rate"] <= 0.01]
        row["real_highest_passing_rps"] = max(passing) if passing else 0
        log(f"  sim goodput {g['goodput_rps']:.0f} r/s; real: highest passing offered rate "
            f"{row['real_highest_passing_rps']:g} r/s")
        rows.append(row)
    save_json(out / args.out, {
        "experiment": "network_cluster", "setup": "examples/cluster/cluster.yaml: ResNet50 (SLO as slo_ms), "
        "2 backends x emulated:4 (8 GPUs), UCX over TCP on loopback, every process under nice -n 19",
        "command": "/usr/bin/python3 bench/experiments/network_cluster.py --delays-us " + args.delays_us +
        " --rates " + args.rates + f" --rate-seconds {args.rate_seconds:g} --slo-ms {args.slo_ms:g} --out {args.out}",
        "slo_ms": args.slo_ms,
        "rate_seconds": args.rate_seconds, "rows": rows})


if __name__ == "__main__":
    main()
