"""./scripts/cluster-demo.sh end to end, shortened (--duration 10): a
scheduler, two emulated backends and two protocol frontends serving a model
repository under HTTP load; while the load runs the demo adds a model folder
and loads it, unloads another, and sends the new model three requests. The
test checks what the demo reports (its --json), not its rates: every request
the load generators sent ended once, both controls answered, the new model
answered 200 three times, the bad rate was measured over each phase, and
the simulator was given the delays the scheduler planned with through the
frontends. Bounded: the demo runs about 30 s; the subprocess is killed
after 240 s."""
import json
import os
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLI = os.environ.get("SYMPHONY_CLI", "")


def test_the_cluster_demo_loads_a_model_and_unloads_another_under_load():
    if not CLI or not os.path.exists(CLI):
        pytest.skip("SYMPHONY_CLI (the symphony binary) is not set")
    with tempfile.TemporaryDirectory(prefix="symphony-cluster-demo-test-") as d:
        out = os.path.join(d, "demo.json")
        env = dict(os.environ, SYMPHONY_BUILD_DIR=os.path.dirname(CLI))
        env.pop("SYMPHONY_DEMO_KEEP", None)
        p = subprocess.run([os.path.join(ROOT, "scripts", "cluster-demo.sh"), "--duration", "10", "--json", out],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
        log = p.stdout.decode(errors="replace")
        assert p.returncode == 0, log
        r = json.load(open(out))
    assert r["sent"] > 0 and r["sent"] == r["ok"] + r["late"] + r["dropped"] + r["errors"], r
    assert r["errors"] == 0 and r["duplicate_outputs"] == 0, r
    # The simulator plans what the scheduler planned under the warm-up's load,
    # each frontend's one-way delay and replies' way out included.
    planned = r["planned_delays_us"]
    assert planned["ctrl"] > 0 and planned["resp"] > 0, (planned, log)
    # (the way out can be capped to nothing on a machine stalled for milliseconds)
    assert planned["frontend_one_way"] > 0 and planned["frontend_reply_path"] >= 0, (planned, log)
    mc = r["model_control"]
    assert isinstance(mc["load_ms"], int) and isinstance(mc["unload_ms"], int), (mc, log)
    assert mc["showcase_statuses"] == [200, 200, 200], (mc, log)
    assert all(o in ("ok", "late") for o in mc["showcase_outcomes"]) and len(mc["showcase_outcomes"]) == 3, (mc, log)
    phases = mc["bad_rate_by_phase"]
    assert [x["phase"] for x in phases] == ["before the load", "2 s from its start", "after it"], phases
    assert all(x["ended"] > 0 for x in phases), phases
    # The index before and after, as frontend 1 listed it.
    assert "VGG16                    UNAVAILABLE  not loaded (added to the repository" in log, log
    assert "VGG16                1   READY" in log and "Inception            1   UNAVAILABLE  unloaded" in log, log
