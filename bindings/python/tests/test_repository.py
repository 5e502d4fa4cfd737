"""symphony.Server(model_repository=DIR): a model repository in Triton's layout
served in process, with load_model, unload_model and repository_index (the
same manager as `symphony serve --model-repository`, docs/repository.md).

The models are TorchScript modules exported with torch here; every wait is
bounded (each call returns once the model serves or has failed)."""

import os
import pathlib
import shutil
import threading

import pytest
import torch

import symphony

pytestmark = pytest.mark.skipif(not hasattr(symphony._core.Server, "serve_repository"),
                                reason="a build without the front serves no model repository")

CONFIG = """
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
parameters: { key: "symphony.slo_ms" value: { string_value: "5000" } }
"""


class Affine(torch.nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        with torch.no_grad():
            self.lin.weight.fill_(scale)
            self.lin.bias.fill_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def add_model(repo, name, scale, config=CONFIG, version=1):
    d = repo / name / str(version)
    d.mkdir(parents=True)
    torch.jit.script(Affine(scale)).save(str(d / "model.pt"))
    (repo / name / "config.pbtxt").write_text(config)


@pytest.fixture
def repo(tmp_path):
    add_model(tmp_path, "a", 1.0)
    add_model(tmp_path, "b", 2.0)
    add_model(tmp_path, "unknown_field", 1.0, config=CONFIG + "max_queue_delay_us: 5\n")
    return tmp_path


@pytest.fixture
def make_server():
    servers = []

    def make(repo, **opts):
        s = symphony.Server(devices="cpu", policy="eager", safety_margin_ms=50.0, profile_repeats=3,
                            profile_max_batch=4, model_repository=repo, **opts)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop(cancel=True)


def states(server, **kw):
    return {(e["name"], e["version"]): (e["state"], e["reason"]) for e in server.repository_index(**kw)}


def infer(server, name, scale):
    y = server.infer(name, torch.ones(4)).result(timeout=60)
    assert y.tolist() == pytest.approx([4 * scale + 1.0] * 3)


def test_explicit_mode_loads_and_unloads_while_serving(repo, make_server):
    s = make_server(repo, model_control_mode="explicit", load_models=["a"])
    with pytest.raises(symphony.ServerNotRunning, match="start"):
        s.load_model("b")
    s.start()
    idx = states(s)
    assert idx[("a", "1")] == ("READY", "")
    assert idx[("b", "")] == ("UNAVAILABLE", "not loaded")
    assert s.model_names() == ["a"]
    infer(s, "a", 1.0)

    # Requests for `a` go on while `b` loads (and profiles); every one is answered.
    stop = threading.Event()
    answered = []

    def send():
        while not stop.is_set():
            answered.append(s.infer("a", torch.ones(4)).result(timeout=60))

    t = threading.Thread(target=send)
    t.start()
    try:
        s.load_model("b")
    finally:
        stop.set()
        t.join(timeout=120)
    assert not t.is_alive() and answered
    assert states(s)[("b", "1")] == ("READY", "")
    infer(s, "b", 2.0)
    s.load_model("b")  # unchanged: left as it is
    assert sorted(s.model_names()) == ["a", "b"]

    s.unload_model("b")
    with pytest.raises(symphony.ModelNotFound):
        s.infer("b", torch.ones(4))
    assert states(s)[("b", "1")] == ("UNAVAILABLE", "unloaded")
    assert [e["name"] for e in s.repository_index(ready=True)] == ["a"]
    models = s.stats()["models"]
    assert models["a"]["errors"] == 0 and models["a"]["loaded"]
    # The unloaded model keeps its final counts: its one request, answered.
    assert not models["b"]["loaded"]
    assert (models["b"]["sent"], models["b"]["ok"] + models["b"]["late"]) == (1, 1)


def test_a_load_whose_batch_of_one_outlasts_what_the_served_can_wait_fails(tmp_path, make_server):
    """A model whose batch of one runs longer than a model served on its
    device can wait (half of that model's SLO less its own batch of one) is
    not loaded beside it, since each of its runs would make that model's
    requests late: busy.pt (~0.2 s a batch) beside a 100 ms SLO fails its
    load after its first runs, naming both models and the remedy; the index
    gives the reason, and the served model answers on."""
    busy = pathlib.Path(os.environ.get("SYMPHONY_TEST_MODELS", ""), "busy.pt")
    if not busy.exists():
        pytest.skip("SYMPHONY_TEST_MODELS does not point at the built test models")
    add_model(tmp_path, "tight", 1.0, config=CONFIG.replace('"5000"', '"100"'))
    (tmp_path / "slow" / "1").mkdir(parents=True)
    shutil.copy(busy, tmp_path / "slow" / "1" / "model.pt")
    (tmp_path / "slow" / "config.pbtxt").write_text(CONFIG.replace("dims: [ 3 ]", "dims: [ 4 ]"))
    s = make_server(tmp_path, model_control_mode="explicit", load_models=["tight"])
    s.start()
    infer(s, "tight", 1.0)
    with pytest.raises(symphony.ConfigError,
                       match=r"model 'slow[^']*'[^:]*: cannot be loaded beside the models served on cpu.*: its batch of "
                             r"one runs about [\d.]+ ms \(by its runs on cpu.*\), longer than model 'tight[^']*' can "
                             r"wait .*give it a device of its own \(devices, instance_group\)"):
        s.load_model("slow")
    state, reason = states(s)[("slow", "1")]
    assert state == "UNAVAILABLE" and "cannot be loaded beside" in reason, reason
    assert s.model_names() == ["tight"]
    infer(s, "tight", 1.0)


def test_load_with_a_config_in_place_of_config_pbtxt(repo, make_server):
    s = make_server(repo, model_control_mode="explicit")
    s.start()
    config = {"platform": "pytorch_libtorch", "max_batch_size": 2,
              "input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
              "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [3]}]}
    s.load_model("unknown_field", config=config)  # its config.pbtxt alone is refused
    infer(s, "unknown_field", 1.0)
    s.unload_model("unknown_field")
    with pytest.raises(symphony.ConfigError, match="bogus"):
        s.load_model("b", config='{"max_batch_size": 2, "bogus": 1}')
    with pytest.raises(TypeError):
        s.load_model("b", config=3)


def test_refusals_name_the_reason(repo, make_server):
    s = make_server(repo, model_control_mode="explicit")
    s.start()
    with pytest.raises(symphony.ConfigError, match=r"unknown_field/config.pbtxt:\d+:\d+"):
        s.load_model("unknown_field")
    state, reason = states(s)[("unknown_field", "")]
    assert state == "UNAVAILABLE" and "config.pbtxt" in reason
    with pytest.raises(symphony.ModelNotFound, match="no folder"):
        s.load_model("nope")
    with pytest.raises(symphony.ModelNotFound, match="not loaded"):
        s.unload_model("a")
    s.stop()
    with pytest.raises(symphony.ServerNotRunning):
        s.load_model("a")


def test_none_mode_loads_everything_and_refuses_control(repo, make_server):
    s = make_server(repo)  # model_control_mode="none"
    s.start()
    idx = states(s)
    assert idx[("a", "1")] == ("READY", "") and idx[("b", "1")] == ("READY", "")
    assert idx[("unknown_field", "")][0] == "UNAVAILABLE"
    infer(s, "b", 2.0)
    with pytest.raises(symphony.ConfigError, match="explicit"):
        s.load_model("a")
    with pytest.raises(symphony.ConfigError, match="explicit"):
        s.unload_model("a")


def test_bad_repository_options(repo, tmp_path_factory):
    with pytest.raises(symphony.ConfigError, match="model_control_mode"):
        symphony.Server(devices="cpu", model_repository=repo, model_control_mode="sometimes")
    with pytest.raises(symphony.ConfigError, match="explicit"):
        symphony.Server(devices="cpu", model_repository=repo, load_models=["a"])
    with pytest.raises(symphony.ConfigError, match="need model_repository"):
        symphony.Server(devices="cpu", model_control_mode="explicit")
    with pytest.raises(symphony.ConfigError, match="nope"):
        symphony.Server(devices="cpu", model_repository=repo, model_control_mode="explicit",
                        load_models=["nope"])
    with pytest.raises(symphony.ConfigError, match="model_repository"):
        with symphony.Server(devices="cpu") as s:
            s.repository_index()


def test_every_chosen_version_serves_and_the_highest_answers(repo, make_server):
    config = CONFIG + "version_policy: { latest { num_versions: 2 } }\n"
    add_model(repo, "v", 1.0, config=config, version=1)
    add_model(repo, "v", 2.0, config=config, version=2)
    s = make_server(repo, model_control_mode="explicit", load_models=["v"])
    s.start()
    idx = states(s)
    assert idx[("v", "1")] == ("READY", "") and idx[("v", "2")] == ("READY", "")
    assert s.model_names() == ["v"]
    infer(s, "v", 2.0)  # no version named: the highest
    with pytest.raises(symphony.ConfigError, match="model repository"):
        s.remove_model("v")  # the repository's to unload
    infer(s, "v", 2.0)
    stats = s.stats()["models"]
    assert (stats["v version 2"]["model"], stats["v version 2"]["version"]) == ("v", "2")
    assert stats["v version 2"]["ok"] + stats["v version 2"]["late"] == 2
    assert stats["v version 1"]["sent"] == 0
    # A third version: 3 loads, 2 is kept, 1 goes.
    add_model(repo, "v", 3.0, config=config, version=3)
    s.load_model("v")
    infer(s, "v", 3.0)
    idx = states(s)
    assert ("v", "1") not in idx and idx[("v", "3")] == ("READY", "")
    assert s.stats()["models"]["v version 2"]["sent"] == 2  # not loaded again
