"""model=hf under launcher=docker (bench.checks.own_models): allowed where bench's image has
the library (the pinned torch's image: transformers; the pinned TF's: keras-hub), refused
before any trial, naming framework.version, where the image of another version has none."""

from __future__ import annotations

from bench.checks.own_models import rules
from bench.core.config import (
    BenchConfig,
    DockerConfig,
    FrameworkConfig,
    LauncherConfig,
    ModelConfig,
)

LLAMA = ModelConfig(name="llama", source="hf")


def _cfg(framework: str, version: str = "", image: str = "") -> BenchConfig:
    launcher = LauncherConfig(name="docker", docker=DockerConfig(image=image))
    return BenchConfig(
        model=LLAMA, framework=FrameworkConfig(name=framework, version=version), launcher=launcher
    )


def test_the_pinned_images_run_model_hf() -> None:
    assert rules(_cfg("torch")) == []
    assert rules(_cfg("tf")) == []


def test_another_torch_versions_image_is_refused_naming_the_version() -> None:
    (problem,) = rules(_cfg("torch", "2.14.0"))
    assert problem.startswith(
        "framework.version: model=hf under launcher=docker needs transformers, which the "
        "image of torch 2.14.0 does not install"
    ), problem
    assert "launcher.docker.image" in problem
    # the same version under launcher=process: its environment's probe answers
    process = BenchConfig(model=LLAMA, framework=FrameworkConfig(version="2.14.0"))
    assert rules(process) == []


def test_an_image_of_the_users_is_theirs_to_equip() -> None:
    assert rules(_cfg("torch", "2.14.0", image="mine/torch:2.14")) == []


def test_another_tf_versions_image_is_refused_naming_the_version() -> None:
    (problem,) = rules(_cfg("tf", "2.20.0"))
    assert problem.startswith("framework.version: model=hf under "), problem
    assert "keras-hub and tensorflow-text" in problem and "tf 2.20.0" in problem
