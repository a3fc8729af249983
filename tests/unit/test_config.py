from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError, from_dict, to_dict
from bench.core.identity import config_hash


def test_validate_reports_every_problem_with_its_field() -> None:
    cfg = BenchConfig(batch_size=0, epochs=-1, mode="eval")
    cfg.optimizer.lr = 0
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    fields = [p.split(":")[0] for p in err.value.problems]
    assert fields == ["mode", "batch_size", "epochs", "optimizer.lr"]


def test_image_size_minimum_is_the_models() -> None:
    with pytest.raises(ConfigError, match="image_size: vgg16 needs at least 32x32"):
        validate(BenchConfig(image_size=16, model=BenchConfig().model.__class__("vgg16")))


def test_round_trip_through_a_dict() -> None:
    cfg = BenchConfig(batch_size=7)
    cfg.optimizer.name = "adam"
    assert from_dict(BenchConfig, to_dict(cfg)) == cfg


def test_from_dict_refuses_unknown_fields() -> None:
    with pytest.raises(ConfigError, match="bogus"):
        from_dict(BenchConfig, {"bogus": 1})


def test_hash_covers_what_is_measured_only() -> None:
    base = BenchConfig()
    moved = BenchConfig(timeout_s=5, force=True)
    moved.tracking.uri = "http://elsewhere:5000"
    assert config_hash(base) == config_hash(moved)
    assert config_hash(base) != config_hash(BenchConfig(batch_size=64))
    other = BenchConfig()
    other.framework.name = "tf"
    assert config_hash(base) != config_hash(other)


def test_a_file_store_is_refused_unless_mlflow_is_told_to_write_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bench.checks.host import _check_tracking

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    for uri in (str(tmp_path / "store"), (tmp_path / "store").as_uri()):
        problems: list[str] = []
        _check_tracking(problems, uri)
        assert len(problems) == 1 and "MLFLOW_ALLOW_FILE_STORE=true" in problems[0]
        assert problems[0].startswith("tracking.uri: ")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    problems = []
    _check_tracking(problems, str(tmp_path / "store"))
    assert problems == []
