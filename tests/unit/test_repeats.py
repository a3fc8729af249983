"""Repeats: the job list bench's sweeper launches and the validation checks (one function)."""

from __future__ import annotations

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from bench.core.config import BenchConfig, ConfigError
from bench.core.identity import config_hash
from bench.sweep.jobs import expand as expand_jobs


def jobs(*args: str, repeats: int = 1) -> list[list[str]]:
    return expand_jobs(OverridesParser.create().parse_overrides(list(args)), repeats)


def test_one_repeat_is_the_basic_sweepers_product() -> None:
    assert jobs("framework=tf,torch", "batch_size=8,16") == [
        ["framework=tf", "batch_size=8"],
        ["framework=tf", "batch_size=16"],
        ["framework=torch", "batch_size=8"],
        ["framework=torch", "batch_size=16"],
    ]


def test_repeats_run_in_rounds_every_other_one_reversed() -> None:
    out = jobs("framework=tf,torch", "model=vgg16,resnet50", repeats=3)
    configs = [tuple(j[1:]) for j in out]
    first = configs[:4]
    assert configs[4:8] == first[::-1] and configs[8:] == first
    assert [j[0] for j in out] == ["repeat=0"] * 4 + ["repeat=1"] * 4 + ["repeat=2"] * 4
    # Every configuration's mean position in the order is the same for an even count.
    even = [tuple(j[1:]) for j in jobs("framework=tf,torch", repeats=4)]
    positions = {c: [i for i, x in enumerate(even) if x == c] for c in set(even)}
    assert len({sum(p) for p in positions.values()}) == 1


@pytest.mark.parametrize(
    ("args", "repeats", "field"),
    [(["repeats=2,3"], 1, "repeats: give one number"), (["repeat=1"], 2, "repeat: set by")],
)
def test_conflicting_repeat_overrides_are_refused(
    args: list[str], repeats: int, field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        jobs(*args, repeats=repeats)


def test_repeat_is_hashed_and_repeats_is_not() -> None:
    assert config_hash(BenchConfig(repeats=1)) == config_hash(BenchConfig(repeats=5))
    assert config_hash(BenchConfig(repeat=0)) != config_hash(BenchConfig(repeat=1))
