"""Request priorities from Python: Server.infer(..., priority=) and
add_model(priority_levels=, default_priority_level=), as Triton's request
parameter `priority` and dynamic_batching fields (docs/serving.md#priorities).
Emulated devices: no model runs, l(b) is the profile's."""

import pytest

import symphony


def test_a_priority_beyond_the_levels_is_refused_at_once_naming_them():
    with symphony.Server(devices="emulated:1", policy="eager") as s:
        s.add_model("two", slo_ms=500, max_batch=8, alpha_ms=0.5, beta_ms=1.0, priority_levels=2)
        s.add_model("one", slo_ms=500, max_batch=8, alpha_ms=0.5, beta_ms=1.0)
        with pytest.raises(symphony.ConfigError, match=r"default_priority_level 3 must be in \[1, priority_levels = 2\]"):
            s.add_model("bad", slo_ms=500, alpha_ms=0.5, beta_ms=1.0, priority_levels=2, default_priority_level=3)
        with pytest.raises(symphony.ConfigError, match="priority_levels must be a whole number"):
            s.add_model("bad", slo_ms=500, alpha_ms=0.5, beta_ms=1.0, priority_levels=-1)
        s.start()
        with pytest.raises(symphony.InvalidInput, match="priority 3 is beyond its priority_levels 2"):
            s.infer("two", None, priority=3)
        with pytest.raises(symphony.InvalidInput, match="priority must be a whole number"):
            s.infer("two", None, priority=-1)
        # Every priority of the model's levels, and the default (0), is served;
        # a model of one level takes any priority as the same.
        futs = [s.infer("two", None, priority=p, details=True) for p in (0, 1, 2)]
        futs += [s.infer("one", None, priority=p, details=True) for p in (0, 1, 7)]
        assert all(f.result(timeout=30).outcome in ("ok", "late") for f in futs)
        by = s.stats()["models"]["two"]["by_priority"]
    # Without default_priority_level, 0 is the lowest level: priorities 0 and 2 count as 2.
    assert by[1]["sent"] == 1 and by[2]["sent"] == 2


def test_under_overload_the_low_priority_is_shed_before_the_high_one():
    """One emulated GPU, batches of at most 2 of 20 ms, SLO 200 ms: about 20
    requests can make their target. 400 arrive at once, high (1) and low (2)
    alternating: admission refuses low first and high ones push queued low
    ones out (those end ``pushed_out``, never a high one), so the high ones
    are served at a higher rate than the low ones. Every request ends exactly
    once, and the per-priority counts add up."""
    n = 200
    with symphony.Server(devices="emulated:1", policy="deferred") as s:
        s.add_model("m", slo_ms=200, max_batch=2, alpha_ms=0.0, beta_ms=20.0, priority_levels=2)
        s.start()
        futs = []
        for _ in range(n):
            futs.append((1, s.infer("m", None, priority=1, details=True)))
            futs.append((2, s.infer("m", None, priority=2, details=True)))
        ok = {1: 0, 2: 0}
        ended = {1: 0, 2: 0}
        pushed = {1: 0, 2: 0}
        for p, f in futs:
            try:
                r = f.result(timeout=60)
            except symphony.Dropped as e:
                pushed[p] += e.reason == "pushed_out"
            else:
                ok[p] += r.outcome == "ok"
            ended[p] += 1
        st = s.stats()["models"]["m"]
    assert ended == {1: n, 2: n}
    assert ok[1] > ok[2], ok
    assert ok[1] > 0
    by = st["by_priority"]
    for p in (1, 2):
        c = by[p]
        assert c["sent"] == n
        assert c["ok"] + c["late"] + c["dropped"] + c["errors"] == n
    assert by[1]["ok"] == ok[1] and by[2]["ok"] == ok[2]
    assert pushed[1] == 0, pushed
    assert st["dropped_by_reason"].get("pushed_out", 0) == pushed[2], (st["dropped_by_reason"], pushed)


@pytest.mark.parametrize("admission", [True, False])
def test_admission_refuses_on_arrival_only_when_on(admission):
    """400 requests at once against about 20 that can make their target: with
    admission they are refused on arrival (``overload``); without, none is,
    and the doomed ones wait to expire. Every request ends exactly once."""
    n = 400
    with symphony.Server(devices="emulated:1", admission=admission) as s:
        s.add_model("m", slo_ms=200, max_batch=2, alpha_ms=0.0, beta_ms=20.0)
        s.start()
        futs = [s.infer("m", None, details=True) for _ in range(n)]
        reasons = {}
        ended = 0
        for f in futs:
            try:
                f.result(timeout=60)
            except symphony.Dropped as e:
                reasons[e.reason] = reasons.get(e.reason, 0) + 1
            ended += 1
    assert ended == n
    if admission:
        assert reasons.get("overload", 0) > 0, reasons
    else:
        assert "overload" not in reasons, reasons
        assert reasons.get("expired", 0) + reasons.get("batch_policy", 0) > 0, reasons
