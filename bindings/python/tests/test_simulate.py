"""symphony.simulate returns exactly what `symphony simulate --json -` prints."""

import json
import os
import pathlib
import subprocess

import pytest

import symphony

SOURCE = pathlib.Path(os.environ.get("SYMPHONY_SOURCE_DIR", pathlib.Path(__file__).parents[3]))
SMALL = SOURCE / "tests" / "data" / "sim_small.yaml"

CONFIG = {
    "name": "py_small",
    "seed": 3,
    "gpus": 2,
    "duration_s": 2,
    "warmup_s": 0.5,
    "workload": {"rate": 600, "arrival": "poisson"},
    "models": [
        {"name": "a", "alpha_ms": 1.0, "beta_ms": 4.0, "slo_ms": 30, "max_batch": 16},
        {"zoo": "a100", "model": "ResNet50"},
    ],
}


def cli(*args) -> dict:
    exe = os.environ.get("SYMPHONY_CLI")
    if not exe:
        pytest.skip("SYMPHONY_CLI is not set (run through CTest)")
    out = subprocess.run([exe, "simulate", *map(str, args), "--json", "-", "-q"], capture_output=True, text=True,
                         check=True, timeout=300)
    return json.loads(out.stdout)


@pytest.mark.parametrize("options, flags", [
    ({}, []),
    ({"goodput": True}, ["--goodput"]),
    ({"policy": "eager", "seed": 11, "gpus": 4, "rate": 900}, ["--policy", "eager", "--seed", "11", "--gpus", "4",
                                                               "--rate", "900"]),
    ({"min_gpus": 700.0}, ["--min-gpus", "700"]),
])
def test_a_yaml_file_gives_the_cli_report(options, flags):
    assert symphony.simulate(SMALL, **options) == cli(SMALL, *flags)


def test_a_dict_gives_the_report_of_the_same_yaml_file(tmp_path):
    path = tmp_path / "py_small.yaml"
    path.write_text(json.dumps(CONFIG))  # JSON is YAML
    from_dict = symphony.simulate(CONFIG)
    assert from_dict == cli(path)
    assert from_dict == symphony.simulate(str(path))
    assert from_dict["config"]["name"] == "py_small"
    assert from_dict["mode"] == "run"
    assert {m["name"] for m in from_dict["models"]} == {"a", "ResNet50"}


def test_deterministic_and_seed_sensitive():
    a = symphony.simulate(CONFIG)
    assert symphony.simulate(CONFIG) == a
    assert symphony.simulate(CONFIG, seed=99) != a


def test_progress_and_trace(tmp_path):
    steps = []
    trace = tmp_path / "trace.csv"
    r = symphony.simulate(CONFIG, goodput=True, trace_out=trace,
                          progress=lambda search, i, x, bad, ok: steps.append((search, i, x, ok)))
    assert r["mode"] == "goodput"
    assert steps and all(s[0] == "goodput" for s in steps)
    assert [s[1] for s in steps] == list(range(len(steps)))
    assert len(r["search"]["steps"]) == len(steps)
    assert trace.read_text().startswith("kind,model,gpu,size")


def test_an_exception_in_progress_stops_the_search():
    def boom(*_):
        raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        symphony.simulate(CONFIG, goodput=True, progress=boom)


def test_config_errors_name_the_key():
    bad = dict(CONFIG, workload={"rate": -5})
    with pytest.raises(symphony.ConfigError, match=r"workload.rate: must be >= 0, got -5"):
        symphony.simulate(bad)
    with pytest.raises(symphony.ConfigError, match="sim_bad.yaml:3"):
        symphony.simulate(SOURCE / "tests" / "data" / "sim_bad.yaml")
    with pytest.raises(symphony.ConfigError, match="unknown key 'arival'"):
        symphony.simulate(dict(CONFIG, workload={"rate": 5, "arival": "poisson"}))
    # The same language and the same messages as symphony.Server and every CLI (policy.hpp).
    with pytest.raises(symphony.ConfigError, match="policy 'sometimes' is not one of: deferred"):
        symphony.simulate(CONFIG, policy="sometimes")
    with pytest.raises(symphony.ConfigError, match="gather 'foo' is not one of: target_batch or sliding_window"):
        symphony.simulate(CONFIG, gather="foo")
    with pytest.raises(TypeError):
        symphony.simulate(42)
    with pytest.raises(ValueError, match="exclude"):
        symphony.simulate(CONFIG, goodput=True, min_gpus=100)
    with pytest.raises(ValueError, match="rate excludes goodput"):
        symphony.simulate(CONFIG, goodput=True, rate=100)
