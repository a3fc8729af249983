"""Your own model (bench.trial.models.custom, docs/your-model.md): loading a builder from the
working directory, the probe's answers, the digest of the builders' sources in the configuration's
identity, and the hashes of every configuration without one left as they were."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from bench.core.config import BenchConfig, FrameworkConfig, ModelConfig, flatten, to_dict
from bench.core.identity import config_hash, identity, logged_params
from bench.trial.models import custom, task

CNN = Path(__file__).resolve().parents[2] / "examples" / "custom_cnn.py"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding a copy of the example as ``my_cnn.py``, importable from
    there only (as under ``python -m bench`` started in it)."""
    (tmp_path / "my_cnn.py").write_text(CNN.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_cnn", raising=False)
    return tmp_path


def _py(**keys: str) -> ModelConfig:
    return ModelConfig(name="my_cnn", source="py", task="image", **keys)


def test_a_builder_loads_from_the_working_directory(here: Path) -> None:
    build = custom.load("my_cnn:build")
    assert build.__module__ == "my_cnn"
    with pytest.raises(AttributeError, match="has no function 'nope'"):
        custom.load("my_cnn:nope")
    with pytest.raises(ModuleNotFoundError):
        custom.load("not_here:build")


def test_per_framework_builders_win_over_the_one_for_every_framework() -> None:
    model = _py(builder="a:b", tf="c:d")
    assert custom.builder_key(model, "tf") == ("model.tf", "c:d")
    assert custom.builder_key(model, "torch") == ("model.builder", "a:b")
    assert custom.modules(model) == ["a", "c"]
    assert custom.input_shape("torch", 32) == (3, 32, 32)
    assert custom.input_shape("tf", 32) == (32, 32, 3)


def test_the_example_has_equal_parameter_counts_in_torch_and_keras(here: Path) -> None:
    model = _py(builder="my_cnn:build")
    counts = {fw: custom.probe(fw, model, 10, 32) for fw in ("torch", "tf")}
    assert counts == {"torch": {"num_parameters": 5418}, "tf": {"num_parameters": 5418}}


def test_the_probe_names_the_key_of_a_builder_that_fails(here: Path) -> None:
    (here / "bad.py").write_text(
        "def build(framework, num_classes, input_shape):\n    return object()\n"
        "def broken(framework, num_classes, input_shape):\n    raise RuntimeError('no\\nway')\n"
    )
    wrong = custom.probe("torch", _py(torch="bad:build"), 10, 32)
    assert wrong == {"problem": "model.torch: bad:build returned builtins.object, not a "
                                "torch.nn.Module (framework=torch)"}  # fmt: skip
    raised = custom.probe("torch", _py(builder="bad:broken"), 10, 32)
    assert raised == {"problem": "model.builder: bad:broken raised RuntimeError: way"}
    (here / "syntax.py").write_text("def build(:\n")
    broken = custom.probe("torch", _py(builder="syntax:build"), 10, 32)
    assert broken["problem"].startswith("model.builder: cannot import syntax:build: SyntaxError")


def test_an_edited_builder_is_a_new_configuration(here: Path) -> None:
    model = _py(builder="my_cnn:build")
    before = custom.digest(model)
    cfg = BenchConfig(model=dataclasses.replace(model, digest=before))
    (here / "my_cnn.py").write_text(CNN.read_text().replace("(16, 32)", "(16, 48)"))
    after = custom.digest(model)
    assert before != after
    edited = BenchConfig(model=dataclasses.replace(model, digest=after))
    assert config_hash(cfg) != config_hash(edited)
    assert identity(cfg)["model.digest"] == before
    # A trial whose module changed after composition refuses to run it.
    with pytest.raises(RuntimeError, match="changed after the sweep was composed"):
        custom.build("torch", cfg.model, 10, 32)


def test_the_new_keys_at_their_defaults_leave_every_hash_as_it_was() -> None:
    """The pins of tests/unit/test_config_hash_pins.py hold with the new keys present; the
    new keys are not logged at their defaults."""
    assert config_hash(BenchConfig(steps_per_epoch=5)) == "41fbcc5ea59ecce3"
    assert config_hash(BenchConfig()) == "2551d893289f1ba2"
    flat = flatten(to_dict(BenchConfig()))
    for key in ("builder", "torch", "tf", "task", "digest"):
        assert f"model.{key}" not in logged_params(flat)
        assert f"model.{key}" not in identity(BenchConfig())


def test_one_builder_in_two_frameworks_is_one_configuration_less_the_framework() -> None:
    model = _py(torch="m:a", tf="m:b", digest="0123456789abcdef")
    torch = BenchConfig(model=model)
    tf = BenchConfig(model=model, framework=FrameworkConfig("tf"))
    less = [{k: v for k, v in identity(c).items() if not k.startswith("framework.")}
            for c in (torch, tf)]  # fmt: skip
    assert less[0] == less[1]
    assert less[0]["model.torch"] == "m:a" and less[0]["model.tf"] == "m:b"
    # An image model of your own: the sequence models' sizes are not part of it.
    assert task(model) == "image" and "model.seq_len" not in less[0]
    sized = BenchConfig(model=dataclasses.replace(model, seq_len=64))
    assert config_hash(sized) == config_hash(torch)


def test_a_library_model_by_name_is_an_image_model_with_its_name_in_the_identity() -> None:
    keras = BenchConfig(model=ModelConfig(name="EfficientNetV2S", source="keras"))
    assert task(keras.model) == "image"
    assert identity(keras)["model.name"] == "EfficientNetV2S"
    assert "model.seq_len" not in identity(keras)


def test_docker_and_the_unwired_paths_are_refused_by_the_rules_alone() -> None:
    from bench.checks.own_models import rules
    from bench.core.config import LauncherConfig

    model = _py(builder="my_cnn:build")
    docker = BenchConfig(model=model, launcher=LauncherConfig(name="docker"))
    assert [p.split(":")[0] for p in rules(docker)] == ["launcher"]
    assert "my_cnn" in rules(docker)[0]
    assert rules(BenchConfig(model=model)) == []
    keras = BenchConfig(model=ModelConfig(name="ResNet50", source="keras"))
    (refusal,) = rules(keras)
    assert refusal.startswith("model.source: keras builds keras.applications models for "
                              "framework=tf only, not framework=torch")  # fmt: skip
    assert "model=resnet50 model.source=stock" in refusal


def test_model_timm_is_refused_where_timm_or_torchvision_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before any trial, one line naming model.source and what is missing; a version's own
    environment is not this interpreter's: the probe asks it there."""
    import importlib.util

    from bench.checks.own_models import check, rules

    timm = BenchConfig(model=ModelConfig(name="resnet50d", source="timm"))
    for absent, said in ((("timm", "torchvision"), "timm and torchvision"),
                         (("torchvision",), "torchvision")):  # fmt: skip
        monkeypatch.setattr(
            importlib.util,
            "find_spec",
            lambda n, *a, absent=absent: None if n in absent else object(),
        )
        (refusal,) = check(timm)  # this machine's answer: the host stage's
        assert rules(timm) == []  # the keys' own rules pass
        assert refusal.startswith(
            f"model.source: timm needs {said}, not installed for {sys.executable}"
        )
        assert "install the timm extra" in refusal
        version = dataclasses.replace(timm, framework=FrameworkConfig("torch", version="2.14.0"))
        assert rules(version) == []
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object())
    assert rules(timm) == []
    (refusal,) = rules(dataclasses.replace(timm, framework=FrameworkConfig("tf")))
    assert refusal.startswith("model.source: timm builds timm models for framework=torch only")


def test_parity_true_is_refused_for_a_builder_and_taken_by_model_hf() -> None:
    """model=hf's parity is the LM logit check (bench.sweep.parity); a builder's has none."""
    from bench.checks.own_models import rules

    (refusal,) = rules(BenchConfig(model=_py(builder="my_cnn:build"), parity=True))
    assert refusal == "parity: the parity check covers bench's zoo and model=hf, not model=py"
    assert rules(BenchConfig(model=ModelConfig(name="llama", source="hf"), parity=True)) == []


def test_builders_of_unequal_size_are_not_comparable_across_frameworks() -> None:
    """The report's rule holds for your own model as for the zoo: the logged parameter
    counts must be equal."""
    from bench.analysis import stats

    torch = stats.Sample("torch", [1.0, 1.1, 1.0, 1.05], num_parameters=[5418] * 4)
    tf = stats.Sample("tf", [2.0, 2.1, 2.0, 2.05], num_parameters=[5419] * 4)
    assert stats.compare(torch, tf).kind == stats.NOT_COMPARABLE
    same = stats.Sample("tf", [2.0, 2.1, 2.0, 2.05], num_parameters=[5418] * 4)
    assert stats.compare(torch, same).kind != stats.NOT_COMPARABLE
