"""bench.cli.hydra_mode skips Hydra's first composition only where Hydra's own answer is None."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from bench.cli import CONF_DIR
from bench.cli.hydra_mode import mode_groups, one_composition, plain

PRESETS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))


@pytest.fixture(scope="module")
def hydra() -> Iterator[Any]:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        yield GlobalHydra.instance().hydra
    GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["-m", "model=vgg16,resnet50", "framework=tf,torch"],
        ["model=lenet5", "hydra.run.dir=/tmp/x", "hydra/job_logging=none"],
        ["-m", "repeats=3", "hydra.sweeper.dry_run=true"],
        ["+optimizer.nesterov=true"],
    ],
)
def test_a_plain_command_line_has_no_mode_from_its_configuration(hydra: Any, args: list[str]):
    assert plain(args, CONF_DIR)
    overrides = [a for a in args if not a.startswith("-")]
    assert hydra.get_mode(config_name="config", overrides=overrides) is None


@pytest.mark.parametrize("preset", PRESETS)
def test_a_study_preset_sets_the_mode_and_composes_twice(hydra: Any, preset: str):
    args = [f"+experiment={preset}"]
    assert not plain(args, CONF_DIR)
    assert str(hydra.get_mode(config_name="config", overrides=args)) == "RunMode.MULTIRUN"


@pytest.mark.parametrize(
    "args",
    [
        ["hydra.mode=MULTIRUN"],
        ["hydra.searchpath=[file:///elsewhere]"],
        ["--config-dir", "/elsewhere"],
        ["experiment=seed001_frameworks"],
        ["+experiment@_global_=seed001_frameworks"],
    ],
)
def test_anything_that_could_set_the_mode_composes_twice(args: list[str]):
    assert not plain(args, CONF_DIR)


def test_the_groups_that_set_the_mode_are_read_from_the_files(tmp_path: Path):
    (tmp_path / "config.yaml").write_text("hydra:\n  help:\n    app_name: x\n")
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "a.yaml").write_text("# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "b.yaml").write_text("hydra_like: 1\n")
    assert mode_groups(str(tmp_path)) == {"study"}
    (tmp_path / "top").mkdir()
    (tmp_path / "config.yaml").write_text("hydra:\n  mode: RUN\n")
    mode_groups.cache_clear()
    assert mode_groups(str(tmp_path)) == {"study", ""}  # the primary config: nothing is plain
    assert not plain(["model=b"], str(tmp_path))
    mode_groups.cache_clear()


def test_hydra_is_patched_only_inside_the_block():
    from hydra._internal.hydra import Hydra

    # The private method replaced, as Hydra 1.3 spells it: an upgrade that renames it fails here.
    assert list(inspect.signature(Hydra.get_mode).parameters) == [
        "self",
        "config_name",
        "overrides",
    ]
    original = Hydra.get_mode
    with one_composition(["model=lenet5"], CONF_DIR):
        assert Hydra.get_mode is not original
        assert Hydra.get_mode(None, "config", []) is None  # type: ignore[arg-type]
    assert Hydra.get_mode is original
    with one_composition(["+experiment=seed001_frameworks"], CONF_DIR):
        assert Hydra.get_mode is original
