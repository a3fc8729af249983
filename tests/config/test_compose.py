"""Tier 1: the config tree composes, and bad input is refused before any trial starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from bench.cli import CONF_DIR
from bench.config import BenchConfig
from bench.data import CIFAR
from bench.preflight import validate
from bench.sweep.compose import to_bench_config
from tests.cifar_fixture import write_cifar_archive

# Groups that pick one option each (presets: experiment/, slurm/ are tested on their own).
GROUPS = ["data", "framework", "launcher", "model"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


@pytest.mark.parametrize(
    ("group", "option"), [(g, o) for g in GROUPS for o in options(g)], ids=lambda v: str(v)
)
def test_every_group_option_composes_and_validates(group: str, option: str, tmp_path) -> None:  # noqa: ANN001
    overrides = [f"{group}={option}"]
    if option in CIFAR:  # a real-format archive, so that validation finds one
        write_cifar_archive(tmp_path, option, per_member=2)
        overrides.append(f"data.root={tmp_path}")
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = to_bench_config(compose("config", overrides=overrides))
    assert isinstance(cfg, BenchConfig)
    assert getattr(cfg, group).name == option
    validate(cfg)


def test_a_data_option_sets_its_number_of_classes() -> None:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        assert compose("config", overrides=["data=cifar100"]).num_classes == 100
        assert compose("config", overrides=["data=digits"]).num_classes == 10


def test_groups_cover_the_documented_choices() -> None:
    assert {"framework", "model", "data", "launcher"} <= set(GROUPS)
    assert options("framework") == ["mxnet", "tf", "torch"]
    assert {"vgg16", "resnet50"} <= set(options("model"))


def test_defaults_are_the_cpu_friendly_main_job() -> None:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = to_bench_config(compose("config"))
    assert (cfg.launcher.name, cfg.device, cfg.tracking.uri) == (
        "process",
        "auto",
        "sqlite:///mlruns/mlflow.db",
    )
    assert (cfg.image_size, cfg.num_classes) == (32, 10)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["foo=1"], ["foo"]),
        (["model=vgg61"], ["model/vgg61", "vgg16", "resnet50"]),
        (["framework=pytorch"], ["framework/pytorch", "torch", "tf"]),
        (["batch_size=0"], ["batch_size", ">= 1"]),
        (["batch_size=abc"], ["batch_size"]),
        (["timeout_s=-5"], ["timeout_s", "> 0"]),
        (["mode=evaluate"], ["mode", "train", "infer"]),
        (["device=tpu"], ["device", "auto", "cpu", "cuda"]),
        (["tracking.uri=sqlite:////proc/bench-nope/m.db"], ["tracking.uri", "/proc/bench-nope"]),
        (["-m", "batch_size=8,0", "framework=tf,torch"], ["batch_size=0", "batch_size: must"]),
        (["data=cifar10", "data.root=/nonexistent"], ["data.root", "bench data download cifar10"]),
        (["data=cifar100", "num_classes=10"], ["num_classes: data=cifar100 has 100 classes"]),
        (["precision=fp16", "device=cpu"], ["precision: fp16", "bf16"]),
        (["compile=true", "warmup_steps=0"], ["warmup_steps: compile=true"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_bad_input_names_the_field_and_starts_nothing(bench, overrides, expected) -> None:  # noqa: ANN001
    result = bench.run(*overrides, timeout=120)
    assert result.returncode != 0, result.output
    for text in expected:
        assert text in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not bench.db.exists(), "no MLflow store (and so no run) may be created"
    assert not (bench.root / "multirun").exists() or not any(
        (bench.root / "multirun").rglob("config.json")
    )


def test_unwritable_tracking_path_under_a_file(bench) -> None:  # noqa: ANN001
    blocker = bench.root / "afile"
    blocker.write_text("x")
    result = bench.run(f"tracking.uri=sqlite:///{blocker}/m.db", timeout=120)
    assert result.returncode == 2
    assert "tracking.uri" in result.stderr and "Not a directory" in result.stderr


@pytest.mark.parametrize("name", ["cifar10_study", "inference_batch_sweep"])
def test_experiment_presets_compose(name: str) -> None:
    from bench.sweep.jobs import jobs_of

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        config = compose("config", overrides=[f"+experiment={name}"], return_hydra_config=True)
    assert str(config.hydra.mode) == "RunMode.MULTIRUN"
    jobs = jobs_of(config)
    assert jobs is not None
    frameworks = {dict(o.split("=", 1) for o in job)["framework"] for job in jobs}
    assert frameworks == {"tf", "torch"}
    if name == "cifar10_study":
        assert len(jobs) == 4
        assert (config.data.name, config.optimizer.name, config.optimizer.lr) == (
            "cifar10",
            "adam",
            0.001,
        )
        assert (config.batch_size, config.epochs, config.steps_per_epoch) == (64, 10, 0)
    else:
        assert len(jobs) == 16 and config.mode == "infer"
