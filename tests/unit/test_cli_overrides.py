"""bench.cli.overrides: the command line's keys and group options checked before Hydra,
each unknown one named with the nearest key or option (groups included)."""

from __future__ import annotations

import pytest

from bench.cli.overrides import check, groups, known_keys


def test_groups_are_the_conf_folders_and_the_strategies() -> None:
    found = groups()
    assert {"framework", "model", "data", "launcher", "tuning", "distributed"} <= set(found)
    assert {"torch", "tf", "jax", "mxnet"} <= set(found["framework"])
    assert {"none", "ddp", "mirrored"} <= set(found["distributed"])


def test_keys_include_every_strategys_fields() -> None:
    keys = known_keys()
    assert {"batch_size", "model.source", "tuning.keys", "distributed.backend"} <= keys


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["modle=lenet5"], "modle: no such key or group; did you mean model=lenet5?"),
        (["~modle"], "modle: no such key or group"),
        (["frameworks=tf"], "did you mean framework=tf?"),
        (["batchsize=4"], "did you mean batch_size?"),
        (["optimizer.nam=sgd"], "optimizer.nam: no such key; did you mean optimizer.name?"),
        (["framework=pytorch"], "framework has no option 'pytorch'; did you mean framework=torch?"),
        (["-m", "model=lenet5,resnt50"], "did you mean model=resnet50?"),
        (["mdoe=train"], "did you mean mode"),
    ],
)
def test_unknown_names_are_named_with_the_nearest(args: list[str], said: str) -> None:
    problems = check(args)
    assert len(problems) == 1, problems
    assert said in problems[0], problems


@pytest.mark.parametrize(
    "args",
    [
        ["-m", "framework=torch,tf", "model=lenet5", "repeats=auto"],
        ["model.config.rope_theta=1e4", "++model.config.x=1"],
        ["hydra.sweeper.max_batch_size=1", "hydra/launcher=submitit_slurm"],
        ["--cfg", "job"],
        ["-sc", "install=bash"],
        ["tuning.keys=[xla]", "model=${oc.env:M}", "batch_size=range(1,3)"],
        ["+experiment=seed000_single_gpu", "scale=smoke", "distributed=ddp", "~goal"],
        ["distributed.backend=gloo", "launcher.docker.image=x"],
    ],
)
def test_known_names_and_hydras_own_pass(args: list[str]) -> None:
    assert check(args) == []


def test_a_users_own_config_folder_adds_its_group_options(tmp_path) -> None:  # noqa: ANN001
    """A model of the user's own in a folder Hydra searches (``-cd DIR`` or
    ``hydra.searchpath``) is an option like bench's; a typo of it is still named."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "mynet.yaml").write_text("defaults:\n  - lenet5\n")
    for added in (["-cd", str(tmp_path)], [f"--config-dir={tmp_path}"],
                  [f"hydra.searchpath=[file://{tmp_path}]"],
                  [f"+hydra.searchpath=['file://{tmp_path}']"]):  # fmt: skip
        assert check([*added, "model=mynet"]) == [], added
        (problem,) = check([*added, "model=mynett"])
        assert "did you mean model=mynet?" in problem
    assert "no option 'mynet'" in check(["model=mynet"])[0]  # not without the folder
    # Folders whose options are not listed here leave group options to Hydra.
    assert check(["hydra.searchpath=[pkg://mypkg.conf]", "model=mynet"]) == []
    assert check(["-cp", str(tmp_path), "model=mynet"]) == []
