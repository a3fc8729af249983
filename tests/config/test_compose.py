"""Tier 1: the config tree composes, and bad input is refused before any trial starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from bench.checks.preflight import validate
from bench.cli import CONF_DIR
from bench.core.config import BenchConfig, ConfigError
from bench.sweep.compose import to_bench_config
from bench.trial.data import CIFAR
from bench.trial.models import stock
from tests.cifar_fixture import write_cifar_archive
from tests.config.test_bad_input_table import run_cli
from tests.unit.test_folder_data import make_folder

# Groups that pick one option each (presets: experiment/, slurm/ are tested on their own).
GROUPS = ["data", "framework", "launcher", "model"]


# The options of docs/your-model.md take the model's builder or its name.
YOUR_MODEL = {
    ("model", "py"): ["model.builder=examples.custom_cnn:build"],
    ("model", "keras"): ["model.name=MobileNetV3Small", "framework=tf"],
    ("model", "torchvision"): ["model.name=resnet18"],
    ("model", "timm"): ["model.name=resnet50d"],
    ("model", "hf"): ["model.name=gpt2"],
}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml"))


# model=keras and model=hf validate through Keras' and transformers' own classes (5-8 s of
# importing them): the slow tier's.
HEAVY = {("model", "keras"), ("model", "hf")}


@pytest.mark.parametrize(
    ("group", "option"),
    [
        pytest.param(g, o, marks=[pytest.mark.slow] if (g, o) in HEAVY else [])
        for g in GROUPS
        for o in options(g)
    ],
    ids=lambda v: str(v),
)
def test_every_group_option_composes_and_validates(group: str, option: str, tmp_path) -> None:  # noqa: ANN001
    overrides = [f"{group}={option}", *YOUR_MODEL.get((group, option), [])]
    if option in CIFAR:  # a real-format archive, so that validation finds one
        write_cifar_archive(tmp_path, option, per_member=2)
        overrides.append(f"data.root={tmp_path}")
    if (group, option) == ("data", "folder"):  # a folder of two classes' images
        make_folder(tmp_path / "images", classes=2, per_class=6)
        overrides += [f"data.root={tmp_path / 'images'}", "num_classes=2"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = to_bench_config(compose("config", overrides=overrides))
    assert isinstance(cfg, BenchConfig)
    if (group, option) in YOUR_MODEL:  # a library's model is named by model.name
        assert cfg.model.source == option
    else:
        assert getattr(cfg, group).name == option
    if (group, option) == ("model", "torchvision") and not stock.torchvision_available():
        with pytest.raises(ConfigError, match=r"^model.source: torchvision is not importable"):
            validate(cfg)
        return
    if (group, option) == ("model", "timm") and stock.timm_missing():
        with pytest.raises(ConfigError, match=r"^model.source: timm needs timm and torchvision"):
            validate(cfg)
        return
    if option != "docker":
        validate(cfg)
        return
    try:
        validate(cfg)
    except ConfigError as exc:  # no registry here: the default base can be had only if built
        assert all(p.startswith("launcher.docker.base_image: ") for p in exc.problems), exc


def test_a_data_option_sets_its_number_of_classes() -> None:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        assert compose("config", overrides=["data=cifar100"]).num_classes == 100
        assert compose("config", overrides=["data=digits"]).num_classes == 10


def test_groups_cover_the_documented_choices() -> None:
    assert {"framework", "model", "data", "launcher"} <= set(GROUPS)
    assert options("framework") == ["jax", "mxnet", "tf", "torch"]
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
        (["model=vgg61"], ["model has no option 'vgg61'", "model=vgg16", "resnet50"]),
        (["framework=pytorch"], ["framework has no option 'pytorch'", "framework=torch", "tf"]),
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
def test_bad_input_names_the_field_and_starts_nothing(
    overrides: list[str],
    expected: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    """Through the CLI's own entry point in this process, as the bad-input table does (a
    `python -m bench` each cost 5 s on 2 busy cores); the test below and
    tests/e2e/test_telemetry.py refuse bad input through `python -m bench` itself."""
    code = run_cli(overrides, tmp_path, monkeypatch)
    err = capsys.readouterr().err
    assert code != 0, err
    for text in expected:
        assert text in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "mlflow.db").exists(), "no MLflow store (and so no run) may be created"
    assert not (tmp_path / "multirun").exists() or not any(
        (tmp_path / "multirun").rglob("config.json")
    )


def test_unwritable_tracking_path_under_a_file(bench) -> None:  # noqa: ANN001
    blocker = bench.root / "afile"
    blocker.write_text("x")
    result = bench.run(f"tracking.uri=sqlite:///{blocker}/m.db", timeout=120)
    assert result.returncode == 2
    assert "tracking.uri" in result.stderr and "Not a directory" in result.stderr


@pytest.mark.parametrize("name", ["cifar10_study", "inference_batch_sweep"])
def test_experiment_presets_compose(name: str) -> None:
    from tests.sweeper_fixture import sweeper_jobs as jobs_of

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


def _hydra(job: list[str]) -> Any:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=job)


@pytest.fixture
def plain_hydra() -> Iterator[None]:
    """Hydra's own composition, without the suite's memory of it (tests/hydra_memo.py)."""
    from tests import hydra_memo

    hydra_memo.uninstall()
    try:
        yield
    finally:
        hydra_memo.install()


@pytest.mark.parametrize(
    "preset",
    [
        "seed003_distributed_cpu",
        pytest.param("seed004_cifar10_strategies", marks=pytest.mark.slow),  # 8-10 s: CI's
    ],
)
@pytest.mark.usefixtures("plain_hydra")
def test_the_fast_composer_equals_hydra_job_by_job(preset: str, tmp_path: Path) -> None:
    """Composer composes once per set of group choices and applies the plain overrides to
    copies; every job of a preset (whose scales use ${bench_cifar_if_present:}), with and
    without CIFAR on disk, plus plain sweeps, comes out as Hydra's full composition (Hydra's
    own, not the suite's memory of it)."""
    from bench.sweep.compose import Composer
    from tests.sweeper_fixture import sweeper_jobs as jobs_of

    fixed = [f"+experiment={preset}", "scale=smoke"]
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        jobs = jobs_of(compose("config", overrides=fixed, return_hydra_config=True))
    assert all(set(fixed) <= set(job) for job in jobs)  # the command line's own overrides
    jobs += [
        ["model=lenet5", "batch_size=7", "optimizer.lr=1e-3", "repeat=2"],
        ["model=resnet18", "distributed=ddp", "workers=2", "distributed.backend=gloo"],
        ["framework=tf", "model=lenet5", "+experiment=seed001_frameworks", "scale=smoke"],
        ["model=lenet5", "hydra.sweep.dir=/tmp/x", "tracking.experiment=other"],
    ]
    for root in (tmp_path / "none", tmp_path / "data"):
        if root.name == "data":
            write_cifar_archive(root, "cifar10", per_member=4)
        composer = Composer(_hydra)
        for job in jobs:
            job = [*job, f"data.root={root}"]
            assert composer(job) == to_bench_config(_hydra(job)), job
        assert len(composer.bases) < len(jobs)  # Hydra composed once per group choice


def test_the_fast_composer_refuses_what_hydra_refuses() -> None:
    from bench.sweep.compose import Composer

    composer = Composer(_hydra)
    for job in (["batchsize=4"], ["model.name=${oc.env:BENCH_NO_SUCH_VARIABLE}"]):
        with pytest.raises(Exception) as ours:
            composer(job)
        with pytest.raises(Exception) as theirs:
            to_bench_config(_hydra(job))
        assert str(ours.value).splitlines()[0] == str(theirs.value).splitlines()[0]
    with pytest.raises(ConfigError, match="no such key"):
        composer(["+model.depth=4"])  # added past Hydra's own check: the schema's


def test_the_fast_composer_copies_no_base_and_changes_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 51: a 10,000-job plan spent two thirds of its time copying the whole base config
    for every job.  Only the top-level nodes a job's overrides reach are copied, and the base
    is the same after any job: a set, an add, a delete, one refused half way; the typed
    values converted once a base are copied to each job, never shared."""
    import copy

    from omegaconf import OmegaConf

    from bench.sweep.compose import Composer

    composer = Composer(_hydra)
    base = composer.base(())
    text, nodes = OmegaConf.to_yaml(base), dict(base.__dict__["_content"])
    copied: list[object] = []
    deepcopy = copy.deepcopy

    def spy(value: object, *args: Any, **kwargs: Any) -> Any:
        copied.append(value)
        return deepcopy(value, *args, **kwargs)

    monkeypatch.setattr(copy, "deepcopy", spy)
    jobs = [["seed=3", "optimizer.lr=0.5"], ["+tracking.extra=1"], ["~tracking.experiment"],
            ["batch_size=abc"], ["optimizer={name:sgd}", "seed=4"]]  # fmt: skip
    for job in jobs:
        try:
            composer(job)
        except Exception:  # noqa: BLE001, S110 - refused jobs must leave the base alone too
            pass
    monkeypatch.undo()
    assert copied and all(value is not base for value in copied)
    assert OmegaConf.to_yaml(base) == text and base.__dict__["_content"] == nodes
    assert all(base.__dict__["_content"][k] is v for k, v in nodes.items())
    for job in (["seed=3"], ["optimizer={name:sgd}", "seed=4"], ["num_classes=100"]):
        first = composer(job)
        assert first == to_bench_config(_hydra(job)), job
        first.optimizer.lr, first.tracking.uri = 9.0, "x"  # one job's objects are its own
        assert composer(job) == to_bench_config(_hydra(job)), job


def test_an_integer_override_is_read_as_hydras_parser_reads_it() -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from bench.sweep.compose import _plain_int

    parser = OverridesParser.create()
    read = ["seed=5", "seed=-5", "seed=0", "optimizer.max_lr_2=12", "repeat=10000"]
    left = ["seed=1_000", "seed=007", "seed=+5", "seed=5.0", "~seed=5", "+seed=5", "a@b=1"]
    for text in read:
        assert _plain_int(text) == parser.parse_overrides([text])[0], text
    assert [_plain_int(text) for text in left] == [None] * len(left)
