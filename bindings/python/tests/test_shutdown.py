"""Stopping with requests in flight, servers left running at interpreter exit,
servers collected while running, stop() from a done-callback: every request
resolves and nothing deadlocks."""

import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import symphony


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "error", "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


def test_stop_drains_requests_in_flight_from_many_threads(cpu_server):
    s = cpu_server("sleepy", slo_ms=2000, max_batch=8)
    futs = []
    lock = threading.Lock()

    def client():
        mine = [s.infer("sleepy", torch.randn(4)) for _ in range(50)]
        with lock:
            futs.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s.stop()  # drain: everything queued runs (or expires) first
    assert len(futs) == 200 and all(f.done() for f in futs)
    st = s.stats()
    assert st["ok"] + st["late"] + st["dropped"] + st["errors"] == 200
    assert st["errors"] == 0


def test_stop_from_a_done_callback(emulated_server):
    s = emulated_server(alpha_ms=0, beta_ms=20, slo_ms=100)
    stopped = threading.Event()

    def stop_now(_):
        s.stop(cancel=True)  # runs on the completion thread
        stopped.set()

    f = s.infer("m", None)
    f.add_done_callback(stop_now)
    assert stopped.wait(30)
    with pytest.raises(symphony.ServerNotRunning):
        s.infer("m", None)


def test_a_running_server_collected_with_requests_in_flight(emulated_server):
    # The first requests deferred too (not sent at once for want of an
    # arrival history), so the 10 wait together whenever the shard takes
    # them: deferred to about 59 s, none runs before the collection.
    s = symphony.Server(devices="emulated:1", defer_without_history=True)
    s.add_model("m", slo_ms=60000, alpha_ms=0, beta_ms=1000, max_batch=32)
    s.start()
    futs = [s.infer("m", None) for _ in range(10)]
    del s
    gc.collect()
    for f in futs:
        with pytest.raises(symphony.Dropped) as e:
            f.result(timeout=30)
        assert e.value.reason == "shutdown"


def test_interpreter_exit_with_a_server_running_and_requests_in_flight(models_dir, profiles_dir):
    r = run_python(f"""
        import threading, torch, symphony
        s = symphony.Server(devices="cpu:2", safety_margin_ms=50)
        s.add_model("sleepy", {str(models_dir / 'sleepy.pt')!r}, input="float32[4]", slo_ms=3000,
                    profile={str(profiles_dir / 'sleepy_exit.yaml')!r})
        s.start()
        futs = []
        def client():
            futs.extend(s.infer("sleepy", torch.randn(4)) for _ in range(200))
        ts = [threading.Thread(target=client) for _ in range(4)]
        for t in ts: t.start()
        for t in ts: t.join()
        futs[0].add_done_callback(lambda f: None)
        print("leaving with", len(futs), "requests", flush=True)
    """)
    assert r.returncode == 0, r.stderr
    assert "leaving with 800 requests" in r.stdout


def test_interpreter_exit_while_a_thread_waits_on_a_future():
    r = run_python("""
        import threading, symphony
        s = symphony.Server(devices="emulated:2")
        s.add_model("m", slo_ms=10000, alpha_ms=0, beta_ms=3000, max_batch=64)
        s.start()
        s.infer("m", None)  # runs at once: the model's arrivals are not known yet
        f = s.infer("m", None)  # waits for company, queued
        seen = []
        def waiter():
            try:
                f.result()
            except symphony.Dropped as e:
                seen.append(e.reason)
        t = threading.Thread(target=waiter, daemon=True)
        t.start()
        s.stop(cancel=True)
        t.join(30)
        print("reason", seen, flush=True)
    """)
    assert r.returncode == 0, r.stderr
    assert "reason ['shutdown']" in r.stdout


def test_without_torch_outputs_are_numpy(models_dir, profiles_dir):
    r = run_python(f"""
        import sys
        sys.modules["torch"] = None  # torch cannot be imported
        import numpy as np, symphony
        assert not symphony.HAVE_TORCH
        with symphony.Server(devices="cpu", safety_margin_ms=50) as s:
            s.add_model("tuple_out", {str(models_dir / 'tuple_out.pt')!r}, input="float32[4]", slo_ms=300,
                        profile={str(profiles_dir / 'tuple_out_numpy.yaml')!r})
            s.start()
            doubled, total = s.infer("tuple_out", np.arange(4, dtype=np.float32)).result()
            print(type(doubled).__name__, doubled.tolist(), float(total))
    """)
    assert r.returncode == 0, r.stderr
    assert "ndarray [0.0, 2.0, 4.0, 6.0] 6.0" in r.stdout
