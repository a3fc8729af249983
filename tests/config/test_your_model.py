"""Tier 1: your own model (docs/your-model.md) composes, and each kind of bad input is refused
before any trial, exit status 2, one line naming the key (the CLI in this process; the probe
that builds a model runs in a child process, as it does for a real sweep)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from bench.cli import CONF_DIR
from bench.sweep.compose import to_bench_config
from bench.trial.models import stock
from tests.cases import slow_cases
from tests.config.test_bad_input_table import run_cli

PY = "model=py"
CASES = [
    # No builder for the framework of the trial.
    ([PY], "model.torch: framework=torch has no builder"),
    ([PY, "model.torch=examples.custom_cnn:build_torch", "framework=tf"], "model.tf:"),
    ([PY, "model.builder=examples.custom_cnn"], "model.builder: 'examples.custom_cnn' is not MOD"),
    # Cannot be imported: the import error's last line.
    ([PY, "model.builder=examples.nope:build"],
     "model.builder: cannot import examples.nope:build: ModuleNotFoundError: No module named"),
    ([PY, "model.torch=examples.custom_cnn:nope", "model.builder=examples.custom_cnn:build"],
     "model.torch: cannot import examples.custom_cnn:nope: AttributeError"),
    ([PY, "model.builder=tests.builders:NOT_A_FUNCTION"], "model.builder: cannot import"),
    # Raises, or returns no model of the framework.
    ([PY, "model.builder=tests.builders:raises"],
     "model.builder: tests.builders:raises raised ValueError: at all"),
    ([PY, "model.builder=tests.builders:no_keywords"], "model.builder: tests.builders:no_keywo"),
    ([PY, "model.builder=tests.builders:returns_none"],
     "model.builder: tests.builders:returns_none returned builtins.NoneType, not a torch.nn.Mod"),
    ([PY, "model.tf=tests.builders:torch_model", "framework=tf"],
     "model.tf: tests.builders:torch_model returned torch.nn.modules.linear.Linear, not a keras"),
    # Keys of their own.
    ([PY, "model.builder=examples.custom_cnn:build", "model.task=masked_lm"], "model.task"),
    ([PY, "model.builder=examples.custom_cnn:build", "framework=mxnet"], "framework: model=py"),
    ([PY, "model.builder=examples.custom_cnn:build", "distributed=ddp", "workers=2"],
     "distributed: model=py"),
    (["model.builder=examples.custom_cnn:build"], "model.builder: only model=py"),
    (["model=lenet5", "model.tf=examples.custom_cnn:build"], "model.tf: only model=py"),
    # A library's model by its name.
    (["model=keras", "framework=tf"], "model.name: model=keras builds a keras.applications"),
    (["model=keras", "framework=tf", "model.name=EfficientNetV2s"],
     "model.name: keras.applications has no 'EfficientNetV2s'; nearest: EfficientNetV2S"),
    (["model=keras", "model.name=EfficientNetV2S"],
     "model.source: keras builds keras.applications models for framework=tf only"),
]  # fmt: skip
if not stock.torchvision_available():
    CASES.append((["model=torchvision", "model.name=resnet50"],
                  "model.source: torchvision is not importable here"))  # fmt: skip
CASES += [
    (["model=timm"], "model.name: model=timm builds a timm model by its name; give one, e.g. "
                     "model.name=resnet50d"),
    (["model=timm", "model.name=resnet50d", "framework=tf"],
     "model.source: timm builds timm models for framework=torch only, not framework=tf; for "
     "tf: model=keras model.name=NAME"),
]  # fmt: skip
if stock.timm_missing():  # bench's own environment: its CPU torch has no torchvision
    CASES.append((["model=timm", "model.name=resnet50d"],
                  "model.source: timm needs timm and torchvision, not installed for "))  # fmt: skip


# Checks that build the model with TensorFlow in a child process (5-12 s each): the slow tier's.
SLOW = {
    "model=py model.tf=tests.builders:torch_model framework=tf",
    "model=keras framework=tf model.name=EfficientNetV2s",
}


@pytest.mark.parametrize(("args", "expected"), slow_cases(CASES, SLOW))
def test_bad_input_is_refused_in_one_line_naming_its_key(
    args: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    code = run_cli(args, tmp_path, monkeypatch)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert any(line.startswith(expected) for line in lines), err
    assert not (tmp_path / "mlflow.db").exists(), "no store (and so no run) may be made"


def test_a_keras_name_refused_for_torch_names_the_zoo_twin_that_runs_in_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    assert run_cli(["model=keras", "model.name=ResNet50"], tmp_path, monkeypatch) == 2
    assert "model=resnet50 model.source=stock builds it in both" in capsys.readouterr().err


def _compose(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return to_bench_config(compose("config", overrides=list(overrides)))


def test_model_py_composes_with_its_builders_and_their_digest() -> None:
    cfg = _compose(
        PY,
        "model.torch=examples.custom_cnn:build_torch",
        "model.tf=examples.custom_cnn:build_keras",
    )
    assert (cfg.model.name, cfg.model.source, cfg.model.task) == ("py", "py", "image")
    assert len(cfg.model.digest) == 16
    assert _compose("model=lenet5").model.digest == ""  # the zoo's models have none
    assert _compose(PY, "model.builder=examples.nope:build").model.digest == ""  # refused later
