"""symphony.Server(policy="triton"): Triton's dynamic batcher on the server's
own devices (docs/serving.md#triton-policy-triton), from Python: answers as
a direct forward, batches formed, nothing dropped for its deadline, and
options the server cannot run refused by name."""

import pytest

import symphony


def test_triton_on_a_cpu_device_answers_as_a_direct_forward(cpu_server, answers_as_direct_forward):
    s = cpu_server("linear", policy="triton:max_queue_delay_us=2000", max_batch=16)
    answers_as_direct_forward(s, seed=7)
    st = s.stats()
    assert st["sent"] == 64 and st["ok"] + st["late"] == 64
    assert st["models"]["linear"]["mean_batch"] > 1, "a burst waits up to the queue delay for company"


def test_triton_runs_late_what_deferred_scheduling_would_drop(emulated_server):
    # 100 requests at once on one device of l(b) = b + 5 ms, max batch 8, SLO
    # 20 ms: about 160 ms of work. Triton's batcher drops nothing for its
    # deadline (no queue timeout here): every request ends with its outcome,
    # ok or late, and most are late.
    s = emulated_server(gpus=1, alpha_ms=1.0, beta_ms=5.0, slo_ms=20, max_batch=8, policy="triton")
    rs = [f.result(timeout=30) for f in [s.infer("m", None, details=True) for _ in range(100)]]
    assert all(r.outcome in ("ok", "late") for r in rs), {r.outcome for r in rs}
    assert sum(r.outcome == "late" for r in rs) > 50
    st = s.stats()
    assert st["sent"] == 100 and st["dropped"] == 0


@pytest.mark.parametrize("policy,says", [("triton:placement=disjoint", "placement"),
                                         ("triton:no_such_option=1", "no_such_option")])
def test_triton_options_the_server_cannot_run_are_refused_by_name(policy, says):
    # An unknown option when the server is made; the simulator's placement
    # when it starts (where serve refuses it too).
    with pytest.raises(symphony.ConfigError, match=says):
        s = symphony.Server(devices="emulated:1", policy=policy)
        try:
            s.add_model("m", slo_ms=100, max_batch=8, alpha_ms=1.0, beta_ms=5.0)
            s.start()
        finally:
            s.stop(cancel=True)
