"""The configs and the report of scripts/gpu-check.sh (standard library only).

  gpu_report.py configs WORK [--serve-s S]
      From the measured profiles WORK/resnet50.cuda0.profile.yaml and
      WORK/resnet18.cuda0.profile.yaml, writes the serve and simulator configs
      of the check: both models on cuda:0 together, each with an SLO of
      2 l(B) + the largest l(B) of the two (so that a batch of B = 16 fits
      even behind the other model's batch) and a rate that fills 45 % of the
      GPU at batch B (90 % together), l = the p90 column that `serve` and
      `simulate` plan with. serve.yaml / sim.yaml run the models;
      serve-kernel.yaml / sim-kernel.yaml the same load on busy kernels of the
      profiles' linear fits (devices: cuda-emulated:0).

  gpu_report.py report WORK OUTDIR [--selftest]
      Collects what the steps left in WORK into OUTDIR/gpu.json (every figure
      and the raw outputs) and OUTDIR/gpu.md (the bars of issue 15 and the
      tables). Missing pieces (a step that failed or was skipped) are
      reported as such, never invented.
"""
import argparse
import datetime
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

MODELS = ["resnet50", "resnet18"]
TARGET_BATCH = 16
GPU_SHARE = 0.45  # of the GPU per model at the target batch
MAX_BATCH = 32
MARGIN_MS = 1.0


# ---- profiles ------------------------------------------------------------------------


def read_profile(path):
    """Reads a `symphony profile` file: alpha/beta and [batch, median, p90, p99] points."""
    out = {"points": []}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*-\s*\[([^\]]*)\]", line)
            if m:
                v = [float(x) for x in m.group(1).split(",")]
                if len(v) == 3:  # older files: [batch, median, p99]
                    v = [v[0], v[1], v[2], v[2]]
                out["points"].append({"batch": int(v[0]), "median_ms": v[1], "p90_ms": v[2], "p99_ms": v[3]})
                continue
            m = re.match(r"(\w+):\s*(.*)$", line)
            if m and m.group(1) in ("model", "device", "stopped_because"):
                out[m.group(1)] = m.group(2).strip()
            elif m and m.group(1) in ("alpha_ms", "beta_ms", "max_batch"):
                out[m.group(1)] = float(m.group(2))
    if not out["points"]:
        raise ValueError(f"{path}: no points")
    return out


def latency(profile, b, column="p90_ms"):
    """l(b) in ms, linearly interpolated between the measured batch sizes."""
    pts = profile["points"]
    if b <= pts[0]["batch"]:
        return pts[0][column]
    for lo, hi in zip(pts, pts[1:]):
        if lo["batch"] <= b <= hi["batch"]:
            t = (b - lo["batch"]) / (hi["batch"] - lo["batch"])
            return lo[column] + t * (hi[column] - lo[column])
    return pts[-1][column]


def plan(work, max_batch=MAX_BATCH):
    profiles = {m: read_profile(os.path.join(work, f"{m}.cuda0.profile.yaml")) for m in MODELS}
    b = {m: min(TARGET_BATCH, max_batch, int(p["points"][-1]["batch"])) for m, p in profiles.items()}
    lb = {m: latency(profiles[m], b[m]) for m in MODELS}
    worst = max(lb.values())
    out = {}
    for m in MODELS:
        out[m] = {
            "target_batch": b[m],
            "l_target_ms": round(lb[m], 3),
            "slo_ms": round(2 * lb[m] + worst + MARGIN_MS, 1),
            "rate": round(GPU_SHARE * b[m] / lb[m] * 1000, 1),
            "alpha_ms": profiles[m].get("alpha_ms"),
            "beta_ms": profiles[m].get("beta_ms"),
        }
    return profiles, out


# The serve runs: real models deferred and eager, busy kernels, real models
# deferred once more with the first run's dispatch overhead as the delays, and
# deferred without overlap (--overlap off), without CUDA graphs (cuda_graphs:
# off) and with TorchScript's simple executor (jit_executor: simple; the
# simulator's deferred run is the reference of the three).
RUNS = ("deferred", "eager", "kernel", "delayed", "no-overlap", "no-graphs", "simple-jit")
SIM_OF = {"no-overlap": "deferred", "no-graphs": "deferred", "simple-jit": "deferred"}
# The runtime's scaling series (issue 54): shards (as many generators) and the rate offered per shard.
SCALING_SHARDS = (1, 2, 4, 7)
SCALING_RATES = (2000000, 4000000)


def write_delayed_configs(work):
    """serve-delayed.yaml and sim-delayed.yaml: serve.yaml and sim.yaml with the
    deferred run's measured dispatch overhead as the delays (d_ctrl: its p50 less
    the staging; d_data: the staging per request), so that the rank dispatches each
    batch that much before its GPU frees and its CPU work overlaps the batch before."""
    s = load_json(os.path.join(work, "serve-deferred.json")) or {}
    d = ((s.get("devices") or [{}])[0]).get("dispatch_overhead_us") or {}
    if not d.get("p50"):
        print("serve-deferred.json has no dispatch overhead: no delayed run", file=sys.stderr)
        return 1
    staging = (d.get("staging") or {}).get("p50") or 0.0
    batches = [v["mean_batch"] for v in (s.get("models") or {}).values() if v.get("mean_batch")]
    mean_b = sum(batches) / len(batches) if batches else 1.0
    ctrl_ms, data_ms = max(0.0, d["p50"] - staging) / 1000, staging / mean_b / 1000
    old = f"delays: {{safety_margin_ms: {MARGIN_MS}}}"
    new = f"delays: {{ctrl_ms: {ctrl_ms:.3f}, data_ms: {data_ms:.4f}, safety_margin_ms: {MARGIN_MS}}}"
    for name in ("serve", "sim"):
        with open(os.path.join(work, f"{name}.yaml")) as f:
            text = f.read()
        if old not in text:
            print(f"{name}.yaml has no '{old}' line to replace", file=sys.stderr)
            return 1
        with open(os.path.join(work, f"{name}-delayed.yaml"), "w") as f:
            f.write(text.replace(old, new).replace("name: gpu-check", "name: gpu-check-delayed"))
    print(f"delayed run: ctrl_ms {ctrl_ms:.3f}, data_ms {data_ms:.4f} (dispatch overhead p50 {d['p50']:.1f} us, "
          f"staging p50 {staging:.1f} us, mean batch {mean_b:.1f})")
    return 0


def write_configs(work, serve_s, device="cuda:0", size=224, max_batch=MAX_BATCH):
    _, p = plan(work, max_batch)
    duration, warmup = serve_s + 5, 5
    models_dir = os.path.join(work, "models")

    def serve(devices, kernel, extra=None):
        lines = [
            "# Written by scripts/gpu_report.py configs (scripts/gpu-check.sh).",
            f"devices: {devices}",
            "policy: deferred",
            "shards: 1",
            f"delays: {{safety_margin_ms: {MARGIN_MS}}}",
            f"profiling: {{latency: p90, max_batch: {max_batch}, repeats: 10}}",
            f"load: {{duration_s: {duration}, warmup_s: {warmup}, arrival: poisson, seed: 1}}",
            "models:",
        ]
        for m in MODELS:
            lines += [f"  - name: {m}"]
            if kernel:
                lines += [f"    alpha_ms: {p[m]['alpha_ms']}", f"    beta_ms: {p[m]['beta_ms']}"]
            else:
                lines += [
                    f"    path: {os.path.join(models_dir, m + '.pt')}",
                    f"    input: float32[3,{size},{size}]",
                    f"    profile: {os.path.join(work, m + '.cuda0.profile.yaml')}",
                ]
                lines += [f"    {k}: {v}" for k, v in (extra or {}).items()]
            lines += [f"    slo_ms: {p[m]['slo_ms']}", f"    max_batch: {max_batch}", f"    rate: {p[m]['rate']}"]
        return "\n".join(lines) + "\n"

    def sim(kernel):
        lines = [
            "# Written by scripts/gpu_report.py configs (scripts/gpu-check.sh): the served load, simulated.",
            "name: gpu-check" + ("-kernel" if kernel else ""),
            "seed: 1",
            "gpus: 1",
            "duration_s: 60",
            "warmup_s: 5",
            "policy: deferred",
            "gather: target_batch",
            f"delays: {{safety_margin_ms: {MARGIN_MS}}}",
            "workload: {arrival: poisson}",
            "models:",
        ]
        for m in MODELS:
            lines += [f"  - name: {m}"]
            if kernel:
                lines += [f"    alpha_ms: {p[m]['alpha_ms']}", f"    beta_ms: {p[m]['beta_ms']}"]
            else:
                lines += [f"    profile_file: {os.path.join(work, m + '.cuda0.profile.yaml')}"]
            lines += [f"    slo_ms: {p[m]['slo_ms']}", f"    max_batch: {max_batch}", f"    rate: {p[m]['rate']}"]
        return "\n".join(lines) + "\n"

    files = {
        "serve.yaml": serve(device, False),
        "serve-no-graphs.yaml": serve(device, False, {"cuda_graphs": "off"}),
        "serve-simple-jit.yaml": serve(device, False, {"jit_executor": "simple"}),
        "sim.yaml": sim(False),
        "serve-kernel.yaml": serve("cuda-emulated:0", True),
        "sim-kernel.yaml": sim(True),
    }
    for name, text in files.items():
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    with open(os.path.join(work, "plan.json"), "w") as f:
        json.dump(p, f, indent=2)
    for m in MODELS:
        print(f"{m}: l({p[m]['target_batch']}) = {p[m]['l_target_ms']} ms (p90) -> SLO {p[m]['slo_ms']} ms, "
              f"rate {p[m]['rate']} r/s")


# ---- report ------------------------------------------------------------------------


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def gtest_summary(path):
    j = load_json(path)
    if j is None:
        return None
    out = {"tests": j.get("tests", 0), "failures": j.get("failures", 0), "errors": j.get("errors", 0),
           "passed": [], "failed": [], "skipped": []}
    for suite in j.get("testsuites", []):
        for t in suite.get("testsuite", []):
            name = f"{suite['name']}.{t['name']}"
            if t.get("failures"):
                out["failed"].append(name)
            elif t.get("result") == "SKIPPED":
                out["skipped"].append(name)
            else:
                out["passed"].append(name)
    return out


def junit_summary(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    out = {"passed": [], "failed": [], "skipped": []}
    for tc in root.iter("testcase"):
        if tc.find("failure") is not None or tc.find("error") is not None:
            out["failed"].append(tc.get("name"))
        elif tc.find("skipped") is not None or tc.get("status") in ("notrun", "disabled"):
            out["skipped"].append(tc.get("name"))
        else:
            out["passed"].append(tc.get("name"))
    return out


def bench_summary(path):
    j = load_json(path)
    if j is None:
        return None
    out = {"context": j.get("context", {}), "benchmarks": {}}
    keep = ("real_time", "cpu_time", "time_unit", "iterations", "items_per_second", "error_occurred", "error_message")
    for b in j.get("benchmarks", []):
        entry = {k: b[k] for k in keep if k in b}
        for k, v in b.items():
            if k not in entry and isinstance(v, (int, float)) and k not in (
                    "family_index", "per_family_instance_index", "repetitions", "repetition_index", "threads"):
                entry[k] = v
        out["benchmarks"][b["name"]] = entry
    return out


def steps(work):
    rows = []
    text = read_text(os.path.join(work, "steps.tsv")) or ""
    for line in text.splitlines():
        f = line.split("\t")
        if len(f) >= 3:
            rows.append({"step": f[0], "status": "ok" if f[1] == "0" else ("skipped" if f[1] == "skipped" else
                                                                           ("timeout" if f[1] in ("124", "137")
                                                                            else f"exit {f[1]}")),
                         "seconds": int(f[2]), "note": f[3] if len(f) > 3 else ""})
    return rows


def bar(value, limit, higher_is_better=False):
    if value is None:
        return None
    return value >= limit if higher_is_better else value <= limit


def fmt(v, digits=1, unit=""):
    if v is None:
        return "not measured"
    if isinstance(v, float):
        return f"{v:.{digits}f}{unit}"
    return f"{v}{unit}"


def verdict(ok):
    return {True: "met", False: "**missed**", None: "not measured"}[ok]


def report(work, out_dir, selftest):
    data = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "scripts/gpu-check.sh" + (" --selftest" if selftest else "") + " OUTDIR",
        "machine": read_text(os.path.join(work, "machine.txt")),
        "torch": (read_text(os.path.join(work, "torch.txt")) or "").strip() or None,
        "steps": steps(work),
    }
    if selftest:
        write(out_dir, data, selftest_md(data))
        return 0 if all(s["status"] == "ok" for s in data["steps"]) else 1

    raw = {
        "tests": {
            "kernel_gtest": gtest_summary(os.path.join(work, "gtest-kernel.json")),
            "server_gtest": gtest_summary(os.path.join(work, "gtest-server.json")),
            "other_gpu_ctest": junit_summary(os.path.join(work, "ctest-gpu.xml")),
        },
        "bench_cuda": bench_summary(os.path.join(work, "bench-cuda.json")),
        "stress": {s: load_json(os.path.join(work, f"stress-{s}.json")) for s in ("1", "14")},
        "scaling": {f"{s}-{r}": load_json(os.path.join(work, f"scaling-{s}-{r}.json"))
                    for s in SCALING_SHARDS for r in SCALING_RATES},
        "bench_runtime": bench_summary(os.path.join(work, "bench-runtime.json")),
        "plan": load_json(os.path.join(work, "plan.json")),
        "profiles": {},
        "serve": {k: load_json(os.path.join(work, f"serve-{k}.json")) for k in RUNS},
        "shm_check": load_json(os.path.join(work, "shm-check.json")),
        "simulate": {},
    }
    for m in MODELS:
        try:
            raw["profiles"][m] = read_profile(os.path.join(work, f"{m}.cuda0.profile.yaml"))
        except (OSError, ValueError):
            raw["profiles"][m] = None
    for k in RUNS:
        s = load_json(os.path.join(work, f"sim-{SIM_OF.get(k, k)}.json"))
        if s is not None:  # the per-model essentials, not the autoscaling series
            s = {key: s.get(key) for key in ("goodput_rps", "ok_rps", "offered_rps", "bad_rate", "mean_batch",
                                             "gpu_busy_fraction", "latency_ms", "outcomes")} | {
                "models": {mm.get("name"): {key: mm.get(key) for key in ("goodput_rps", "bad_rate", "mean_batch",
                                                                         "offered_rps", "latency_ms")}
                           for mm in s.get("models", [])}}
        raw["simulate"][k] = s
    data["raw"] = raw
    data["bars"] = bars(raw)
    write(out_dir, data, markdown(data))
    return 0


def bench(raw, name, key):
    b = (raw.get("bench_cuda") or {}).get("benchmarks", {})
    for n, entry in b.items():
        if n.startswith(name) and not entry.get("error_occurred"):
            if key in entry:
                return entry[key]
    return None


def bench_all(raw, name, key):
    b = (raw.get("bench_cuda") or {}).get("benchmarks", {})
    return [e[key] for n, e in b.items() if n.startswith(name) and not e.get("error_occurred") and key in e]


def serve_goodput(raw, k):
    s = raw["serve"].get(k)
    return s.get("goodput_rps") if s else None


def sim_goodput(raw, k):
    s = raw["simulate"].get(k)
    return s.get("goodput_rps") if s else None


def ratio(a, b):
    return a / b if a is not None and b else None


def bars(raw):
    out = {}
    p99s = bench_all(raw, "BM_RuntimeOnGpu", "overhead_p99_us")
    p50s = bench_all(raw, "BM_RuntimeOnGpu", "overhead_p50_us")
    out["dispatch_overhead_kernel_runtime_us"] = {
        "p50": max(p50s) if p50s else None, "p99": max(p99s) if p99s else None, "bar_us": 20,
        "met": bar(max(p99s), 20) if p99s else None,
        "source": "bench_cuda BM_RuntimeOnGpu (the runtime over the busy-kernel executor): the shard's dispatch -> "
                  "the last CUDA operation enqueued, per batch; the worse of the two rates",
    }
    out["dispatch_overhead_execute_us"] = {
        "p50": bench(raw, "BM_KernelExecutorExecute", "overhead_p50_us"),
        "p99": bench(raw, "BM_KernelExecutorExecute", "overhead_p99_us"),
        "baseline_raw_launch_ns": bench(raw, "BM_RawLaunch", "real_time"),
        "source": "bench_cuda BM_KernelExecutorExecute (execute() alone); baseline: BM_RawLaunch, two events and "
                  "a kernel enqueued on a bare stream",
    }
    for k in ("deferred", "kernel"):
        s = raw["serve"].get(k)
        dev = (s or {}).get("devices", [{}])[0] if s and s.get("devices") else {}
        out[f"serve_{k}_device"] = {
            "dispatch_overhead_us": dev.get("dispatch_overhead_us"), "idle_gap_us": dev.get("idle_gap_us"),
            "planned_gap_us": dev.get("planned_gap_us"), "busy_fraction": dev.get("busy_fraction"),
            "source": f"symphony serve ({'the libtorch CUDA executor' if k == 'deferred' else 'cuda-emulated:0'}), "
                      "over the whole run",
        }
    out["idle_gap_us"] = {
        "back_to_back_p50": {str(n): v for n, v in zip(("100us", "1000us"), bench_all(raw, "BM_BackToBackGap",
                                                                                        "gap_p50_us"))},
        "back_to_back_p99": {str(n): v for n, v in zip(("100us", "1000us"), bench_all(raw, "BM_BackToBackGap",
                                                                                        "gap_p99_us"))},
        "raw_stream_p50": {str(n): v for n, v in zip(("100us", "1000us"), bench_all(raw, "BM_BackToBackGap",
                                                                                      "raw_gap_p50_us"))},
        "raw_stream_p99": {str(n): v for n, v in zip(("100us", "1000us"), bench_all(raw, "BM_BackToBackGap",
                                                                                      "raw_gap_p99_us"))},
        "planned_p50_runtime": bench_all(raw, "BM_RuntimeOnGpu", "planned_gap_p50_us"),
        "planned_p99_runtime": bench_all(raw, "BM_RuntimeOnGpu", "planned_gap_p99_us"),
    }
    g = {k: serve_goodput(raw, k) for k in RUNS}
    s = {k: sim_goodput(raw, k) for k in RUNS}
    out["goodput_vs_simulator"] = {
        k: {"served_rps": g[k], "simulated_rps": s[k], "ratio": ratio(g[k], s[k]),
            "met": bar(ratio(g[k], s[k]), 0.9, True)} for k in RUNS}
    out["goodput_vs_simulator"]["bar"] = 0.9
    out["deferred_vs_eager"] = {"deferred_rps": g["deferred"], "eager_rps": g["eager"],
                                "ratio": ratio(g["deferred"], g["eager"]),
                                "met": bar(ratio(g["deferred"], g["eager"]), 1.0, True)}
    batches = {}
    for k in ("deferred", "eager"):
        sv = raw["serve"].get(k)
        if sv:
            batches[k] = {m: v.get("mean_batch") for m, v in sv.get("models", {}).items()}
    out["mean_batch"] = batches
    out["batches_ge_8_deferred"] = (all(v is not None and v >= 8 for v in batches["deferred"].values())
                                    if batches.get("deferred") else None)
    st14, st1 = raw["stress"].get("14"), raw["stress"].get("1")
    sweep14 = [e.get("throughput_rps") for n, e in ((raw.get("bench_runtime") or {}).get("benchmarks") or {}).items()
               if n.startswith("BM_RuntimeThroughput/shards:14/") and not e.get("error_occurred")]
    out["runtime_14_shards_bench"] = {
        "throughput_rps": sweep14[0] if sweep14 else None, "bar_rps": 8e6,
        "met": bar(sweep14[0], 8e6, True) if sweep14 else None,
        "source": "bench_runtime BM_RuntimeThroughput/shards:14/models:64/gpus:64 (l(b) = 2 us b + 100 us, "
                  "14 M req/s offered)",
    }
    out["stress_14_shards"] = {
        "throughput_rps": st14.get("throughput_rps") if st14 else None,
        "goodput_rps": st14.get("goodput_rps") if st14 else None,
        "bad_rate": st14.get("bad_rate") if st14 else None,
        "lag_p99_us": (st14.get("lag_us") or {}).get("p99") if st14 else None,
        "bar_rps": 8e6, "met": bar(st14.get("throughput_rps"), 8e6, True) if st14 else None,
        "baseline_1_shard_rps": st1.get("throughput_rps") if st1 else None,
        "baseline_1_shard_lag_p99_us": (st1.get("lag_us") or {}).get("p99") if st1 else None,
        "speedup": ratio(st14.get("throughput_rps") if st14 else None, st1.get("throughput_rps") if st1 else None),
    }
    return out


def write(out_dir, data, md):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "gpu.json"), "w") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.write("\n")
    with open(os.path.join(out_dir, "gpu.md"), "w") as f:
        f.write(md)
    print(f"wrote {os.path.join(out_dir, 'gpu.json')} and gpu.md")


def steps_md(data):
    lines = ["| step | status | seconds |", "|---|---|---:|"]
    for s in data["steps"]:
        note = f" ({s['note']})" if s.get("note") else ""
        lines.append(f"| {s['step']} | {s['status']}{note} | {s['seconds']} |")
    return lines


def selftest_md(data):
    lines = [f"# Symphony GPU bundle self-test ({data['generated']})", "", "```", (data["machine"] or "").strip(),
             "```", ""] + steps_md(data)
    return "\n".join(lines) + "\n"


def markdown(data):
    b, raw = data["bars"], data["raw"]
    lines = [f"# Symphony on a GPU: scripts/gpu-check.sh ({data['generated']})", "",
             "```", (data["machine"] or "").strip(), f"torch: {data['torch']}", "```", "",
             "## The bars (issue 15)", "", "| figure | measured | bar | |", "|---|---|---|---|"]
    d = b["dispatch_overhead_kernel_runtime_us"]
    lines.append(f"| dispatch overhead per batch, grant -> last op enqueued (runtime + busy-kernel executor) | "
                 f"p50 {fmt(d['p50'], unit=' us')}, p99 {fmt(d['p99'], unit=' us')} | p50/p99 <= 20 us | {verdict(d['met'])} |")
    ig = b["idle_gap_us"]
    def per_size(key):  # {"100us": v, "1000us": v} -> "v / v"
        d = ig[key]
        if not d:
            return "not measured"
        return " / ".join(fmt(d.get(k), 2) for k in ("100us", "1000us")) if isinstance(d, dict) else fmt(d, 2)
    lines.append(f"| GPU idle gap between back-to-back batches (executor, 100 us / 1 ms batches) | "
                 f"p50 {per_size('back_to_back_p50')}, p99 {per_size('back_to_back_p99')} us "
                 f"(bare stream: p50 {per_size('raw_stream_p50')}, p99 {per_size('raw_stream_p99')}) | "
                 f"report | - |")
    for k, what in (("deferred", "real goodput / simulator, deferred"), ("eager", "real goodput / simulator, eager"),
                    ("kernel", "busy kernels / simulator, deferred"),
                    ("delayed", "real goodput / simulator, deferred, dispatched ahead by the measured overhead"),
                    ("no-overlap", "real goodput / simulator, deferred, overlap off (no learned dispatch delay)"),
                    ("no-graphs", "real goodput / simulator, deferred, CUDA graphs off (the others: auto)"),
                    ("simple-jit", "real goodput / simulator, deferred, TorchScript's simple executor (the others: "
                                   "profiling)")):
        g = b["goodput_vs_simulator"].get(k)
        if g is None:  # reports older than the run
            continue
        lines.append(f"| {what} | {fmt(g['served_rps'], 1, ' r/s')} / {fmt(g['simulated_rps'], 1, ' r/s')} = "
                     f"{fmt(g['ratio'], 3)} | "
                     f">= 0.9 | {verdict(g['met'])} |")
    de = b["deferred_vs_eager"]
    lines.append(f"| deferred vs eager, same run | {fmt(de['deferred_rps'], 1, ' r/s')} vs {fmt(de['eager_rps'], 1, ' r/s')} | "
                 f"deferred >= eager | {verdict(de['met'])} |")
    def batches(k):
        v = b["mean_batch"].get(k)
        return ", ".join(f"{m} {fmt(x)}" for m, x in v.items()) if v else "not measured"

    lines.append(f"| mean batch under the SLOs (deferred; eager) | {batches('deferred')}; {batches('eager')} | "
                 f">= 8 (deferred) | {verdict(b['batches_ge_8_deferred'])} |")
    s14 = b["stress_14_shards"]
    lines.append(f"| runtime, 14 shards, 64 models x 64 emulated GPUs | {fmt(s14['throughput_rps'], 0, ' r/s')}, "
                 f"p99 lag {fmt(s14['lag_p99_us'], 1, ' us')} (1 shard: {fmt(s14['baseline_1_shard_rps'], 0, ' r/s')}"
                 f", speedup {fmt(s14['speedup'], 2, 'x')}) | >= 8 M r/s | {verdict(s14['met'])} |")
    r14 = b.get("runtime_14_shards_bench") or {}  # absent from reports older than the sweep
    lines.append(f"| runtime, 14 shards, bench_runtime (GPUs not the bottleneck, 14 M r/s offered) | "
                 f"{fmt(r14.get('throughput_rps'), 0, ' r/s')} | >= 8 M r/s | {verdict(r14.get('met'))} |")
    sweep = (raw.get("bench_runtime") or {}).get("benchmarks", {})
    if sweep:
        lines += ["", "## Runtime throughput by shards (bench_runtime, 64 models, 64 emulated GPUs, "
                  "l(b) = 2 us b + 100 us, 1 M req/s per shard)", "",
                  "| benchmark | offered r/s | throughput r/s | bad % | mean batch | lag p99 us |",
                  "|---|---:|---:|---:|---:|---:|"]
        for n, e in sweep.items():
            bad = 100 * e["bad_rate"] if e.get("bad_rate") is not None else None
            lines.append(f"| {n} | {fmt(e.get('offered_rps'), 0)} | {fmt(e.get('throughput_rps'), 0)} | "
                         f"{fmt(bad, 2)} | {fmt(e.get('mean_batch'))} | {fmt(e.get('lag_p99_us'))} |")
    lines += scaling_md(raw)
    lines += ["", "## Where a served batch's time goes (cuda:0, whole run)", "",
              "| serve run | dispatch overhead p50 / p99 us | queued p50 / p99 | staging p50 / p99 | "
              "enqueueing p50 / p99 | GPU busy | learned dispatch delay | measured l(b) / offline, per model |",
              "|---|---|---|---|---|---|---|---|"]
    for k in RUNS:
        s = raw["serve"].get(k) or {}
        dev = (s.get("devices") or [{}])[0]
        d = dev.get("dispatch_overhead_us") or {}

        def pair(x):
            return f"{fmt((x or {}).get('p50'))} / {fmt((x or {}).get('p99'))}" if x else "-"
        scales = "; ".join(f"{m} " + ", ".join(f"{b}: {fmt(v, 2)}x" for b, v in sorted(e.get("scale", {}).items(),
                                                                                       key=lambda kv: int(kv[0])))
                           for m, e in (dev.get("models") or {}).items())
        busy = 100 * dev["busy_fraction"] if dev.get("busy_fraction") is not None else None
        disp = (s.get("server") or {}).get("dispatch") or {}
        learned = (f"{fmt(disp.get('d_ctrl_us'))} us + {fmt(disp.get('d_data_us'), 2)} us/req "
                   f"({disp.get('samples', 0)} batches)") if disp.get("overlap") else "off"
        lines.append(f"| {k} | {pair(d)} | {pair(d.get('queued'))} | {pair(d.get('staging'))} | "
                     f"{pair(d.get('enqueueing'))} | {fmt(busy, 1, ' %')} | {learned} | {scales or '-'} |")
    lines += ["", "| serve run | model | batch inputs | as views | bytes copied per sample | staging per input us | "
              "CUDA graph batches | ran / profile |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for k in RUNS:
        for m, st in ((raw["serve"].get(k) or {}).get("staging") or {}).items():
            per_sample = st["bytes_copied"] / st["samples"] if st.get("samples") else None
            per_input = st["staging_us"] / st["inputs"] if st.get("inputs") else None
            views = 100 * st["views"] / st["inputs"] if st.get("inputs") else None
            lines.append(f"| {k} | {m} | {st.get('inputs')} | {fmt(views, 0, ' %')} | {fmt(per_sample, 0, ' B')} | "
                         f"{fmt(per_input, 1)} | {st.get('graph_batches', '-')} | "
                         f"{fmt(st.get('ran_over_profile'), 2)} |")
    lines += ["", "queued: dispatch -> the executor began the batch; staging: the inputs into pinned memory and "
              "their copies enqueued (libtorch models only); enqueueing: the rest, the forward's kernels and the "
              "output copies; measured l(b) / offline: the recalibrated profile over the offline one."]
    lines += ["", "## Steps", ""] + steps_md(data)
    lines += ["", "## Tests", ""]
    for kind, r in (raw.get("shm_check") or {}).items():
        state = "not run" if r.get("passed") is None else "passed" if r["passed"] else "FAILED"
        lines.append(f"- {kind} shared memory through the protocol (scripts/shm_check.py): {state}: {r.get('detail')}")
    for k, t in raw["tests"].items():
        if t is None:
            lines.append(f"- {k}: not run")
        else:
            lines.append(f"- {k}: {len(t['passed'])} passed, {len(t['failed'])} failed {t['failed'] or ''}, "
                         f"{len(t['skipped'])} skipped {t['skipped'] or ''}")
    lines += ["", "## Profiles (cuda:0, ms)", "", "| model | batch | median | p90 | p99 |", "|---|---:|---:|---:|---:|"]
    for m, p in raw["profiles"].items():
        if not p:
            lines.append(f"| {m} | not measured | | | |")
            continue
        for pt in p["points"]:
            if pt["batch"] in (1, 2, 4, 8, 16, 24, 32):
                lines.append(f"| {m} | {pt['batch']} | {pt['median_ms']:.2f} | {pt['p90_ms']:.2f} | {pt['p99_ms']:.2f} |")
    if raw.get("plan"):
        lines += ["", "Served load: " + "; ".join(
            f"{m}: SLO {v['slo_ms']} ms, {v['rate']} r/s (l({v['target_batch']}) = {v['l_target_ms']} ms)"
            for m, v in raw["plan"].items())]
    lines += ["", "## busy-kernel executor benchmark (bench_cuda)", "", "| benchmark | time | counters |", "|---|---|---|"]
    for n, e in ((raw.get("bench_cuda") or {}).get("benchmarks") or {}).items():
        if e.get("error_occurred"):
            lines.append(f"| {n} | error: {e.get('error_message')} | |")
            continue
        counters = ", ".join(f"{k} {v:.3g}" for k, v in e.items()
                             if k not in ("real_time", "cpu_time", "time_unit", "iterations", "items_per_second"))
        lines.append(f"| {n} | {e.get('real_time', 0):.3g} {e.get('time_unit', '')} | {counters} |")
    lines += ["", "Raw outputs: gpu.json (`raw`); full log: gpu-check.log; CMake and ninja: build.log."]
    return "\n".join(lines) + "\n"


def scaling_md(raw):
    """The runtime's capacity by shards: each shard count's best goodput over the rates offered, against
    the one-shard figure times the shards."""
    runs = raw.get("scaling") or {}
    if not any(runs.values()):
        return []
    lines = ["", "## Runtime capacity by shards (stress, S shards and S generators, 64 models, 64 emulated GPUs, "
             "l(b) = 2 us b + 100 us, SLO 5 ms, 2 s per run)", "",
             "| shards | offered r/s | goodput r/s | bad % | generators' CPU s | runtime's CPU s | best / (S x 1 shard's) |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    best = {s: max((r.get("goodput_rps") or 0 for k, r in runs.items() if r and k.startswith(f"{s}-")), default=None)
            for s in SCALING_SHARDS}
    for s in SCALING_SHARDS:
        for rate in SCALING_RATES:
            r = runs.get(f"{s}-{rate}")
            if not r:
                lines.append(f"| {s} | {rate * s} | not measured | | | | |")
                continue
            lin = ratio(best[s], s * best[1]) if best.get(1) else None
            lines.append(f"| {s} | {fmt(r.get('offered_rps'), 0)} | {fmt(r.get('goodput_rps'), 0)} | "
                         f"{fmt(100 * r['bad_rate'] if r.get('bad_rate') is not None else None, 2)} | "
                         f"{fmt(r.get('generator_cpu_s'), 2)} | {fmt(r.get('runtime_cpu_s'), 2)} | {fmt(lin, 2)} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("configs")
    c.add_argument("work")
    c.add_argument("--serve-s", type=float, default=20)
    c.add_argument("--device", default="cuda:0")
    c.add_argument("--size", type=int, default=224)
    c.add_argument("--max-batch", type=int, default=MAX_BATCH)
    dl = sub.add_parser("delayed")
    dl.add_argument("work")
    r = sub.add_parser("report")
    r.add_argument("work")
    r.add_argument("out")
    r.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.cmd == "configs":
        write_configs(os.path.abspath(a.work), a.serve_s, a.device, a.size, a.max_batch)
        return 0
    if a.cmd == "delayed":
        return write_delayed_configs(os.path.abspath(a.work))
    return report(os.path.abspath(a.work), a.out, a.selftest)


if __name__ == "__main__":
    sys.exit(main())
