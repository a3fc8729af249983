"""docs/configuration.md's key table against the typed config and the conf groups (issue 50):
every top-level key has a row, and every option of a group (or choice) is named in its row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.cli import CONF_DIR
from bench.core.config import MODES, BenchConfig, to_dict
from bench.core.strategy_configs import STRATEGY_CONFIGS
from tests.conftest import REPO

ROWS = [
    [cell.strip() for cell in line.strip().strip("|").split("|")]
    for line in (REPO / "docs" / "configuration.md").read_text().splitlines()
    if line.startswith("| `")
]


def _named(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def _options() -> dict[str, list[str]]:
    conf = Path(CONF_DIR)
    groups = {
        g.name: sorted(p.stem for p in g.glob("*.yaml"))
        for g in conf.iterdir()
        if g.is_dir() and g.name not in ("experiment", "scales", "slurm")  # presets: own table
    }
    return {**groups, "distributed": sorted(STRATEGY_CONFIGS), "mode": list(MODES)}


def test_every_top_level_key_has_a_row() -> None:
    keys = set().union(*(_named(row[0]) for row in ROWS))
    missing = [
        k
        for k in to_dict(BenchConfig())
        if k not in keys and not any(x.startswith(f"{k}.") for x in keys)
    ]
    assert not missing, f"docs/configuration.md has no row for {missing}"


@pytest.mark.parametrize(("key", "options"), sorted(_options().items()))
def test_every_option_is_named_in_its_row(key: str, options: list[str]) -> None:
    rows = [row for row in ROWS if key in _named(row[0])]
    assert rows, f"docs/configuration.md has no row for {key}"
    named = set().union(*(_named(row[-1]) for row in rows))
    missing = [o for o in options if o not in named and f"{key}={o}" not in named]
    assert not missing, f"docs/configuration.md's {key} row lacks {missing}"
