"""tests/hydra_memo.py, the suite's memory of Hydra's composition steps, changes no outcome:
with it, Hydra composes what it composes without it, refuses what it refuses in the same
words, sees an edited or added conf file, and hands out configs a caller may change."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict

from bench.cli import CONF_DIR
from tests import hydra_memo

# Group choices, value overrides, additions and deletions, Hydra's own groups, a preset with
# its own defaults list, typed strategies from the ConfigStore, interpolations.
GOOD = [
    [],
    ["model=lenet5"],
    ["model=lenet5", "batch_size=7", "optimizer.lr=1e-3"],
    ["model=lenet5", "batch_size=8"],
    ["framework=tf", "model=resnet18", "+optimizer.nesterov=true"],
    ["model=resnet18", "distributed=ddp", "workers=2", "distributed.backend=gloo"],
    ["+experiment=seed001_frameworks", "scale=smoke"],
    ["+experiment=seed001_frameworks", "scale=smoke", "model=lenet5"],
    ["hydra/job_logging=none", "hydra/hydra_logging=none", "hydra.run.dir=/tmp/x"],
    ["mode=serve", "model=hf", "model.name=gpt2"],
    ["tracking={uri: 'sqlite:////tmp/m.db'}"],
    ["~tuning"],
    ["data=digits", "goal=accuracy"],
]
BAD = [["model=notamodel"], ["batchsize=4"], ["+model=lenet5"], ["batch_size=abc"]]


@pytest.fixture
def memo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The memory on, empty, for the test (also in a run with it turned off); as the suite
    had it afterwards."""
    was = bool(hydra_memo._ORIGINAL)
    hydra_memo.uninstall()
    monkeypatch.delenv("BENCH_TESTS_HYDRA_MEMO", raising=False)
    assert hydra_memo.install()
    yield
    hydra_memo.uninstall()
    if was:
        hydra_memo.install()


def _compose(overrides: list[str], conf: str = CONF_DIR) -> dict[str, Any]:
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    out = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(out, dict)
    return out


def _refusal(overrides: list[str]) -> tuple[type, str]:
    with pytest.raises(Exception) as refused:  # noqa: PT011 - Hydra's and OmegaConf's own
        _compose(overrides)
    return type(refused.value), str(refused.value)


def test_with_the_memory_hydra_composes_and_refuses_as_without_it(memo: None) -> None:
    hydra_memo.uninstall()
    plain = [_compose(o) for o in GOOD]
    refusals = [_refusal(o) for o in BAD]
    hydra_memo.install()
    for _ in range(2):  # first remembered, then handed out
        assert [_compose(o) for o in GOOD] == plain
        assert [_refusal(o) for o in BAD] == refusals
    assert hydra_memo._DEFAULTS and hydra_memo._MERGED and hydra_memo._FILES  # it was used


def test_the_file_source_hydra_composes_with_is_the_one_remembered(memo: None) -> None:
    """Hydra's plugin scan executes its config sources' module afresh: its FileConfigSource
    is another class than the imported one, and the one the CLI's compositions use."""
    from hydra._internal.core_plugins.file_config_source import FileConfigSource
    from hydra.core.plugins import Plugins
    from hydra.plugins.config_source import ConfigSource

    scanned = [c for c in Plugins.instance().discover(ConfigSource) if c.scheme() == "file"]
    assert scanned
    for cls in [FileConfigSource, *scanned]:
        assert cls.load_config is hydra_memo._file_load_config, cls


def test_a_config_a_caller_changes_does_not_reach_the_next_call(memo: None) -> None:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        for _ in range(2):
            cfg = compose("config", overrides=["model=lenet5"])
            assert cfg.batch_size == 32 and cfg.model.name == "lenet5"
            with open_dict(cfg):
                cfg.batch_size = 999
                cfg.model.name = "changed"


def test_an_edited_or_added_conf_file_is_seen(memo: None, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    assert _compose(["model=lenet5"], str(conf))["batch_size"] == 32
    main = conf / "config.yaml"
    main.write_text(main.read_text().replace("batch_size: 32", "batch_size: 33", 1))
    assert _compose(["model=lenet5"], str(conf))["batch_size"] == 33
    lenet = conf / "model" / "lenet5.yaml"
    lenet.write_text(lenet.read_text().replace("name: lenet5", "name: lenet5b"))
    assert _compose(["model=lenet5"], str(conf))["model"]["name"] == "lenet5b"
    (conf / "model" / "mine.yaml").write_text("name: mine\n")
    assert _compose(["model=mine"], str(conf))["model"]["name"] == "mine"
    assert _compose(["model=lenet5"], CONF_DIR)["model"]["name"] == "lenet5"  # bench's own


def test_it_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    was = bool(hydra_memo._ORIGINAL)
    hydra_memo.uninstall()
    try:
        monkeypatch.setenv("BENCH_TESTS_HYDRA_MEMO", "0")
        assert not hydra_memo.install() and not hydra_memo._ORIGINAL
    finally:
        monkeypatch.delenv("BENCH_TESTS_HYDRA_MEMO")
        if was:
            hydra_memo.install()
