"""torchvision's and timm's models, and torch's stock twins, under launcher=docker
(bench.checks.own_models): bench's torch images have neither library, so such a trial is
refused before it starts, naming the launcher, unless the image is the user's own."""

from __future__ import annotations

import pytest

from bench.checks.own_models import rules
from bench.core.config import (
    BenchConfig,
    DockerConfig,
    FrameworkConfig,
    LauncherConfig,
    ModelConfig,
)


def _cfg(source: str, name: str, framework: str = "torch", **docker: str) -> BenchConfig:
    return BenchConfig(
        model=ModelConfig(name=name, source=source),
        framework=FrameworkConfig(name=framework),
        launcher=LauncherConfig(name="docker", docker=DockerConfig(**docker)),
    )


@pytest.mark.parametrize(
    ("source", "name", "needs"),
    [
        ("timm", "resnet50d", "torchvision and timm"),
        ("torchvision", "resnet50", "torchvision"),
        ("stock", "resnet50", "torchvision"),
    ],
)
def test_bench_images_have_no_torchvision(source: str, name: str, needs: str) -> None:
    problems = rules(_cfg(source, name))
    expected = f"launcher: model.source={source} needs {needs}, which bench's torch images"
    assert any(p.startswith(expected) for p in problems), problems


def test_your_own_image_and_tf_stock_twins_are_not_refused() -> None:
    own = rules(_cfg("torchvision", "resnet50", image="me/torch-with-torchvision:1"))
    assert not any(p.startswith("launcher:") for p in own), own
    assert rules(_cfg("stock", "resnet50", framework="tf")) == []
    assert rules(_cfg("bench", "resnet50")) == []
