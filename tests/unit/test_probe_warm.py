"""bench.checks.own_models.warm: a sweep's distinct model probes are asked side by side
before validation (a torch and a tf probe of one model=hf family overlap), once each, and
check() then answers from them without asking again."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pytest

from bench.checks import own_models
from bench.core.config import BenchConfig, FrameworkConfig, ModelConfig


def _hf(framework: str, hidden: int = 32) -> BenchConfig:
    return BenchConfig(
        model=ModelConfig(name="llama", source="hf", hidden=hidden),
        framework=FrameworkConfig(name=framework),
    )


def test_distinct_probes_run_at_once_and_check_reuses_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    both = threading.Barrier(2, timeout=10)  # broken unless the two probes overlap
    asked: list[tuple[str, ...]] = []

    def request(cfg: BenchConfig) -> tuple[str, str, str, str]:
        return ("python", "/here", f"{cfg.model.hidden}", cfg.framework.name)

    def answer(*args: str) -> dict[str, Any]:
        asked.append(args)
        both.wait()
        return {}

    cached = functools.cache(answer)
    monkeypatch.setattr(own_models, "_request", request)
    monkeypatch.setattr(own_models, "_probe", cached)
    configs = [_hf("torch"), _hf("tf"), _hf("torch"), _hf("torch", hidden=0)]
    configs[3].launcher.name = "docker"
    configs[3].framework.version = "2.14.0"  # refused by the rules: never probed
    own_models.warm(configs)
    assert sorted(asked) == [("python", "/here", "32", "tf"), ("python", "/here", "32", "torch")]
    assert [own_models.check(c) for c in configs[:3]] == [[], [], []]
    assert len(asked) == 2, "check() asks no probe again"


def test_one_probe_is_left_to_check(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(own_models, "_request", lambda cfg: ("python", "/here", "r", "m"))
    monkeypatch.setattr(own_models, "_probe", lambda *args: asked.append(args) or {})
    own_models.warm([_hf("torch"), _hf("torch")])
    assert asked == []
