"""bench's checks in two stages (bench.checks.config, then bench.checks.host): a sweep runs
each once per distinct configuration, and a configuration's problems are said topic by
topic, the config stage's first within a topic, whichever stage found them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.checks import config, host
from bench.core.config import BenchConfig, ConfigError, TrackingConfig
from bench.sweep.jobs import check_all


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[BenchConfig]:
    seen: list[BenchConfig] = []
    real = getattr(module, name)

    def counting(cfg: BenchConfig, *args: Any) -> Any:
        seen.append(cfg)
        return real(cfg, *args)

    monkeypatch.setattr(module, name, counting)
    return seen


def test_each_stage_runs_once_per_distinct_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ruled = _counted(monkeypatch, config, "rules")
    probed = _counted(monkeypatch, host, "probes")
    monkeypatch.setattr(host, "devices", lambda configs: [])  # no framework asked
    store = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    # Three rounds of two configurations (repeat is the round), the second refused.
    configs = [
        (f"batch_size={b} repeat={r}", BenchConfig(batch_size=b, repeat=r, tracking=store))
        for r in range(3)
        for b in (8, 0)
    ]
    with pytest.raises(ConfigError) as caught:
        check_all(configs)
    assert [c.batch_size for c in ruled] == [8, 0]
    assert [c.batch_size for c in probed] == [8, 0]
    assert caught.value.problems == [
        "[batch_size=0 repeat=0, batch_size=0 repeat=1, batch_size=0 repeat=2] "
        "batch_size: must be >= 1, got 0"
    ]


def test_a_negative_round_is_a_configuration_of_its_own() -> None:
    assert config.key(BenchConfig(repeat=0)) == config.key(BenchConfig(repeat=3))
    assert config.key(BenchConfig(repeat=-1)) != config.key(BenchConfig(repeat=0))
    assert config.key(BenchConfig(seed=1)) != config.key(BenchConfig(seed=2))


def _found(**topics: list[str]) -> config.Found:
    found: config.Found = {topic: [] for topic in config.TOPICS}
    found.update({t.replace("_", "."): v for t, v in topics.items()})
    return found


def test_problems_are_said_topic_by_topic_the_rules_first_within_one() -> None:
    ruled = _found(tracking=["t-rule"], precision=["p-rule"], distributed=["d-rule"])
    probed = _found(tracking=["t-host"], precision=["p-host"], data=["data-host"])
    assert config.said(ruled, probed) == [
        "p-rule", "p-host", "data-host", "t-rule", "t-host", "d-rule"
    ]  # fmt: skip
    assert config.said(_found(fields=["same"]), _found(fields=["same"])) == ["same"]


def test_how_a_model_may_run_is_said_once_the_model_can_be_had() -> None:
    """model=timm with its library missing here: the host stage's answer, not the rules of
    running it (model.run), as when one function said both."""
    run = _found(model_run=["distributed: model=timm trains undistributed"])
    assert config.said(run, _found()) == ["distributed: model=timm trains undistributed"]
    missing = _found(model_source=["model.source: timm needs timm"])
    assert config.said(run, missing) == ["model.source: timm needs timm"]
