"""A framework version's environment with the library its model needs (bench.envs.environments:
EXTRA_OF): which extra a trial takes, which packages at which versions its lock asks for
(torchvision paired with the torch, tensorflow-text of the TensorFlow minor, the extras'
releases kept to the host lock's date), the refusals before any trial (a package index
answered from a cache the test writes, uv's answer faked), that an environment without the
extra is never taken for one with it, and the import check of a finished one."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bench.core.config import BenchConfig, FrameworkConfig, LauncherConfig, ModelConfig
from bench.envs import environments, interpreters

REPO = Path(__file__).resolve().parents[2]
TV = "torchvision-{v}-cp311-cp311-manylinux_2_28_x86_64.whl"
TT = "tensorflow_text-{v}-cp311-cp311-manylinux_2_27_x86_64.whl"


def _cfg(framework: str, version: str, source: str, name: str = "x") -> BenchConfig:
    return BenchConfig(
        framework=FrameworkConfig(framework, version), model=ModelConfig(name=name, source=source)
    )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """bench's cache in a folder of the test's, with a package index that answers from it
    (torchvision up to 0.29, tensorflow-text 2.20 and 2.21; nothing answers on the network)."""
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("BENCH_PACKAGE_INDEX", "http://127.0.0.1:9")
    answers = {
        "torchvision": {v: [TV.format(v=v)] for v in ("0.27.1", "0.28.0", "0.29.0", "0.29.2")},
        "tensorflow-text": {v: [TT.format(v=v)] for v in ("2.20.1", "2.21.0", "2.21.1")},
    }
    answers["tensorflow-text"]["2.19.0"] = ["tensorflow_text-2.19.0-cp312-cp312-linux_x86_64.whl"]
    (tmp_path / "index").mkdir()
    for package, answer in answers.items():
        (tmp_path / "index" / f"{package}.json").write_text(json.dumps(answer))
    return tmp_path


needs_cp311_linux = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11) or not sys.platform.startswith("linux"),
    reason="the test index has wheels for CPython 3.11 on Linux",
)


def test_a_trial_takes_the_extra_its_model_needs_at_a_version_of_its_own() -> None:
    assert environments.extra_of(_cfg("torch", "2.14.0", "timm")) == "timm"
    assert environments.extra_of(_cfg("torch", "2.14.0", "torchvision")) == "timm"
    assert environments.extra_of(_cfg("torch", "2.14.0", "hf", "llama")) == "hf"
    assert environments.extra_of(_cfg("tf", "2.20.0", "hf", "llama")) == "keras-hub"
    # the zoo, a builder, keras.applications: nothing beside the framework
    for source in ("bench", "py", "stock"):
        assert environments.extra_of(_cfg("torch", "2.14.0", source)) == ""
    assert environments.extra_of(_cfg("tf", "2.20.0", "keras")) == ""
    # the pinned and the installed version run an interpreter that has what it has
    assert environments.extra_of(_cfg("torch", "", "timm")) == ""
    assert environments.extra_of(_cfg("torch", "installed", "timm")) == ""
    # launcher=docker: the version's image installs no extra
    docker = _cfg("torch", "2.14.0", "hf", "llama")
    docker = dataclasses.replace(docker, launcher=LauncherConfig(name="docker"))
    assert environments.extra_of(docker) == ""


@pytest.mark.parametrize(
    ("torch", "series"),
    [("2.13.0", "0.28"), ("2.14.0", "0.29"), ("2.14.1", "0.29"), ("2.15.0", "0.30")],
)
def test_torchvision_is_the_series_built_for_the_torch(torch: str, series: str) -> None:
    assert environments.paired_torchvision(torch) == series


def test_a_torch_outside_2_x_has_no_pair() -> None:
    with pytest.raises(environments.EnvironmentError_, match="torch 2.x only, not 3.0.0"):
        environments.paired_torchvision("3.0.0")


def test_the_lock_asks_for_the_extras_packages_resolved_for_the_version() -> None:
    pins = environments.host_pins()
    timm = environments.requirements("torch", "2.14.0", gpu=False, pinned=True, extra="timm")
    assert timm[0] == "torch==2.14.0"
    assert "torchvision==0.29.*" in timm  # the pair of 2.14, never whatever resolves
    assert "timm>=1.0.20,<2" in timm  # the host lock has no timm: pyproject's range
    assert f"numpy=={pins['numpy']}" in timm  # the trial side as before

    hf = environments.requirements("torch", "2.15.0", gpu=False, pinned=True, extra="hf")
    assert f"transformers=={pins['transformers']}" in hf  # the host's, where it fits
    loose = environments.requirements("torch", "2.15.0", gpu=False, pinned=False, extra="hf")
    assert "transformers>=5.20,<6" in loose

    keras_hub = environments.requirements("tf", "2.20.0", gpu=False, pinned=True, extra="keras-hub")
    # tensorflow-text requires tensorflow itself: tensorflow-cpu beside it would be two copies
    assert keras_hub[0] == "tensorflow==2.20.0"
    assert "tensorflow-text==2.20.*" in keras_hub
    assert f"keras-hub=={pins['keras-hub']}" in keras_hub
    assert f"keras=={pins['keras']}" in keras_hub
    # without an extra nothing changes: TensorFlow's CPU package, no library
    plain = environments.requirements("tf", "2.20.0", gpu=False, pinned=True)
    assert plain == environments.requirements("tf", "2.20.0", gpu=False, pinned=True, extra="")
    assert plain[0] == "tensorflow-cpu==2.20.0"
    assert not any(line.startswith(("keras-hub", "tensorflow-text")) for line in plain)


def test_the_extras_ranges_are_pyprojects() -> None:
    """EXTRA_RANGES repeats pyproject.toml's extras (bench installed from a wheel has no
    pyproject to read); torchvision and tensorflow-text are per version instead."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    for extra, ranges in environments.EXTRA_RANGES.items():
        declared = {r.name: str(r.specifier) for r in map(Requirement, extras[extra])}
        for name, spec in ranges.items():
            assert str(SpecifierSet(spec)) == declared.pop(name), (extra, name)
        assert set(declared) <= {"torchvision", "tensorflow-text"}, extra


def test_an_environment_without_the_extra_is_never_taken_for_one_with_it(cache: Path) -> None:
    plain = environments.env_for("torch", "2.14.0")
    extra = environments.env_for("torch", "2.14.0", "timm")
    assert plain.root.name == "torch-2.14.0" and extra.root.name == "torch-2.14.0+timm"
    # the plain environment is made and stamped; the one with timm is not, and is not it
    plain.lock.parent.mkdir(parents=True)
    plain.lock.write_text("torch==2.14.0\n")
    (plain.root / "venv").mkdir()
    (plain.root / "venv" / f".bench-{plain.lock_hash()}").touch()
    assert plain.ready and not extra.ready
    timm = _cfg("torch", "2.14.0", "timm")
    python = interpreters.python_for("torch", "2.14.0", environments.extra_of(timm))
    assert python == str(extra.python) != str(plain.python)
    assert environments.lock_of("torch", "2.14.0", extra="timm") is None  # not made yet
    assert environments.lock_of("torch", "2.14.0") == plain.lock


def _fake_uv(monkeypatch: pytest.MonkeyPatch, code: int = 0, stderr: str = "") -> list[list[str]]:
    asked: list[list[str]] = []

    def run_uv(*args: str) -> subprocess.CompletedProcess[str]:
        asked.append(list(args))
        if code == 0:
            Path(args[args.index("-o") + 1]).write_text("# a lock\n")
        return subprocess.CompletedProcess(list(args), code, "", stderr)

    monkeypatch.setattr(environments, "run_uv", run_uv)
    return asked


def test_the_extras_packages_are_releases_before_the_host_locks_date(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _fake_uv(monkeypatch)
    date = environments.lock_date()
    assert date  # the checkout's requirements.lock says it
    environments.generate_lock(environments.env_for("tf", "2.20.0", "keras-hub"), gpu=False)
    (args,) = asked
    windows = [args[i + 1] for i, a in enumerate(args) if a == "--exclude-newer-package"]
    assert sorted(windows) == [f"keras-hub={date}", f"tensorflow-text={date}"]
    source = Path(args[args.index("-o") - 1]).read_text().splitlines()
    assert "tensorflow-text==2.20.*" in source and source[0] == "tensorflow==2.20.0"
    # the framework and the trial side are resolved as before, without a window
    asked.clear()
    environments.generate_lock(environments.env_for("tf", "2.20.0"), gpu=False)
    assert "--exclude-newer-package" not in asked[0]


def test_an_extra_that_does_not_resolve_is_refused_naming_the_version(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = (
        "Because keras-hub==0.32.0 depends on tensorflow-text>=2.20.1 and you require "
        "tensorflow-text==2.19.*, we can conclude that your requirements are unsatisfiable."
    )
    asked = _fake_uv(monkeypatch, code=1, stderr=said)
    with pytest.raises(environments.EnvironmentError_) as refused:
        environments.generate_lock(environments.env_for("tf", "2.19.0", "keras-hub"), gpu=False)
    message = str(refused.value)
    assert message.startswith("framework.version: tf 2.19.0 with the keras-hub extra")
    assert "keras-hub>=0.32,<0.33, tensorflow-text==2.19.*" in message
    assert f"released before {environments.lock_date()}" in message
    assert message.endswith(said)
    assert len(asked) == 2  # the host's pins first, then the ranges


@needs_cp311_linux
def test_a_version_without_its_paired_build_is_refused_before_any_trial(cache: Path) -> None:
    assert environments.extra_problems("torch", "2.14.1", "timm", cached=False) == []
    assert environments.extra_problems("tf", "2.21.0", "keras-hub", cached=False) == []
    assert environments.extra_problems("torch", "2.15.0", "hf", cached=False) == []  # unbound
    (torch,) = environments.extra_problems("torch", "2.15.0", "timm", cached=False)
    assert torch == (
        "framework.version: model=timm and model=torchvision need torchvision 0.30.x, the "
        "series built for torch 2.15.0, which has no release with a wheel for this Python and "
        "platform (the newest: 0.29.2); run a torch version it has a release for, or the "
        "pinned one"
    )
    (tf,) = environments.extra_problems("tf", "2.19.0", "keras-hub", cached=False)
    assert tf.startswith(
        "framework.version: model=hf under framework=tf needs keras-hub and tensorflow-text "
        "2.19.x, the series built for tf 2.19.0, which has no release with a wheel"
    )


def test_an_unreachable_index_refuses_only_an_uncached_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("BENCH_PACKAGE_INDEX", "http://127.0.0.1:9")
    (problem,) = environments.extra_problems("torch", "2.14.0", "timm", cached=False)
    assert problem.startswith("framework.version: torch 2.14.0 with the timm extra: the package")
    assert environments.extra_problems("torch", "2.14.0", "timm", cached=True) == []


@needs_cp311_linux
def test_the_preflight_refuses_the_version_of_a_model_whose_library_has_no_build(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.checks import host

    torch = {v: [f"torch-{v}-cp311-cp311-manylinux_2_28_x86_64.whl"] for v in ("2.14.0", "2.15.0")}
    (cache / "index" / "torch.json").write_text(json.dumps(torch))
    monkeypatch.setattr(host, "gpu_visible", lambda: False)
    (problem,) = host._version_problems(_cfg("torch", "2.15.0", "timm", "resnet18"))
    assert problem.startswith("framework.version: model=timm and model=torchvision need ")
    assert host._version_problems(_cfg("torch", "2.15.0", "bench", "lenet5")) == []  # no extra
    assert host._version_problems(_cfg("torch", "2.14.0", "torchvision", "resnet18")) == []


def test_the_sweep_makes_each_version_with_the_extra_of_its_trials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench.checks import host

    made: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        environments,
        "ensure",
        lambda fw, v, gpu=False, say=True, extra="": made.append((fw, v, extra)),
    )
    monkeypatch.setattr(host, "gpu_visible", lambda: False)
    configs = [
        _cfg("torch", "2.14.0", "timm", "resnet18"),
        _cfg("torch", "2.14.0", "torchvision", "resnet18"),
        _cfg("torch", "2.14.0", "bench", "lenet5"),
        _cfg("tf", "2.20.0", "hf", "llama"),
        _cfg("torch", "", "hf", "llama"),  # pinned: bench's own environment
    ]
    assert host.environments(configs) == []
    assert made == [
        ("torch", "2.14.0", "timm"),
        ("torch", "2.14.0", ""),
        ("tf", "2.20.0", "keras-hub"),
    ]


def _fake_python(tmp_path: Path, printed: str) -> environments.Env:
    env = environments.env_for("torch", "2.14.0", "timm")
    env.python.parent.mkdir(parents=True)
    env.python.write_text(f"#!/bin/sh\necho '{printed}'\n")
    env.python.chmod(0o755)
    return env


def test_a_finished_environment_must_import_the_extra_at_its_pair(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before the stamp: torch at the version, timm, and torchvision of the series
    built for that torch (a torchvision of another series would load against the wrong ABI)."""
    environments._check_imports(_fake_python(cache, "2.14.0+cu130 1.0.31 0.29.2+cu132"))
    import shutil

    shutil.rmtree(cache / "envs")
    with pytest.raises(environments.EnvironmentError_, match="torchvision 0.28.0, not the 0.29.x"):
        environments._check_imports(_fake_python(cache, "2.14.0+cu130 1.0.31 0.28.0"))
    shutil.rmtree(cache / "envs")
    with pytest.raises(environments.EnvironmentError_, match="does not import it"):
        environments._check_imports(_fake_python(cache, "2.13.0 1.0.31 0.29.2"))


def test_model_hf_under_a_tf_version_is_no_longer_refused_by_its_rules() -> None:
    """Its environment with the keras-hub extra has keras-hub and tensorflow-text; under
    launcher=docker the version's image has neither, and stays refused."""
    from bench.checks.own_models import rules

    llama = _cfg("tf", "2.20.0", "hf", "llama")
    assert rules(llama) == []
    llama.launcher.name = "docker"
    (problem,) = rules(llama)
    assert problem.startswith("framework.version: model=hf under launcher=docker needs keras-hub")
