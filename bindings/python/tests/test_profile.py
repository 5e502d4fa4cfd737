"""LatencyProfile and the analytical bounds (paper §3.3)."""

import pytest

import symphony


def test_linear_profile():
    p = symphony.LatencyProfile.linear(1.053, 5.072, max_batch=64)
    assert p.max_batch == 64 and len(p) == 64
    assert p.latency_ms(1) == pytest.approx(6.125)
    assert p.latency_ms(16) == pytest.approx(21.92)
    assert p.largest_batch_within(20.0) == 14
    assert p.largest_batch_within(20.0, limit=8) == 8
    assert p.largest_batch_within(1.0) == 0
    assert p.alpha_ms == pytest.approx(1.053) and p.beta_ms == pytest.approx(5.072)
    assert len(p.table_ms()) == 64
    assert "max_batch=64" in repr(p)
    with pytest.raises(symphony.InvalidInput, match="batch size must be in"):
        p.latency_ms(65)
    with pytest.raises(symphony.InvalidInput, match="max_batch"):
        symphony.LatencyProfile.linear(1, 1, max_batch=0)


def test_table_profile_interpolates():
    p = symphony.LatencyProfile.from_table({1: 2.0, 4: 5.0, 8: 9.0})
    assert p.max_batch == 8
    assert p.latency_ms(2) == pytest.approx(3.0)
    assert p.latency_ms(6) == pytest.approx(7.0)
    q = symphony.LatencyProfile.from_table([(1, 2.0), (4, 5.0)], max_batch=6)
    assert q.latency_ms(6) == pytest.approx(7.0)  # the last segment, extended
    with pytest.raises(symphony.InvalidInput, match="not monotone"):
        symphony.LatencyProfile.from_table({1: 5.0, 2: 4.0})
    with pytest.raises(symphony.InvalidInput, match=r"\(batch, ms\)"):
        symphony.LatencyProfile.from_table([(1, 2.0, 3.0)])


def test_csv_profile(tmp_path):
    f = tmp_path / "m.csv"
    f.write_text("batch,latency_ms\n1,2.0\n8,9.0\n")
    p = symphony.LatencyProfile.read_csv(str(f))
    assert p.max_batch == 8 and p.latency_ms(4) == pytest.approx(5.0)
    with pytest.raises(symphony.ConfigError, match="nope.csv"):
        symphony.LatencyProfile.read_csv(str(tmp_path / "nope.csv"))


def test_analytical_bounds_match_the_paper():
    # ResNet50 on 8 GPUs at a 25 ms SLO: staggered b = 16, 5839 r/s; no
    # coordination b = 7, 4501 r/s (the paper's table).
    p = symphony.LatencyProfile.linear(1.053, 5.072, max_batch=64)
    b = symphony.analytical_bound(p, slo_ms=25, gpus=8)
    assert isinstance(b, symphony.Bound)
    assert b.batch == 16 and b.latency_ms == pytest.approx(21.92)
    assert b.throughput_rps == pytest.approx(5839, abs=1)
    n = symphony.analytical_bound(p, slo_ms=25, gpus=8, coordinated=False)
    assert n.batch == 7 and n.throughput_rps == pytest.approx(4501, abs=1)
    assert symphony.analytical_bound(p, slo_ms=25, gpus=8, max_batch=10).batch == 10
    assert symphony.analytical_bound(p, slo_ms=5, gpus=8).batch == 0
    with pytest.raises(symphony.InvalidInput, match="gpus"):
        symphony.analytical_bound(p, slo_ms=25, gpus=0)
