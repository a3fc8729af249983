"""``framework.version=installed``, below the CLI: what the trial's interpreter has is read
without importing the framework, resolved at composition into ``framework.installed``,
part of the configuration's identity, refused where there is none, and checked again by
the trial; a pinned run whose interpreter has another version than the pin says so."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from bench.cli import CONF_DIR
from bench.core import versions
from bench.core.config import (
    BenchConfig,
    ConfigError,
    FrameworkConfig,
    flatten,
    to_dict,
)
from bench.core.identity import config_hash, identity, logged_params
from bench.envs import interpreters
from bench.sweep import compose as composing

TORCH_VERSION_PY = """
__version__ = '2.11.0+cu130'
git_version = 'abc'
cuda: Optional[str] = '13.0'
hip: Optional[str] = None
"""
TF_BUILD_INFO = """
import collections
build_info = collections.OrderedDict([('cpu_compiler', 'clang'), ('cuda_version', '12.5.1'),
  ('cudnn_version', '9'), ('is_cuda_build', True)])
"""


def _fake_package(root: Path, module: str, files: dict[str, str], dist: str, version: str) -> None:
    """An importable package whose ``__init__`` fails if it is ever imported, with its
    distribution's metadata (as pip leaves it)."""
    pkg = root / module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('imported')\n")
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site directory first on the path, with no framework in it yet."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("torch", "tensorflow"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path


def test_torchs_build_is_read_without_importing_it(site: Path) -> None:
    # PyPI's CUDA torch says 2.11.0 in its metadata and 2.11.0+cu130 in torch.__version__.
    _fake_package(site, "torch", {"version.py": TORCH_VERSION_PY}, "torch", "2.11.0")
    _fake_package(site, "nvidia_cudnn", {}, "nvidia-cudnn-cu13", "9.13.0.50")
    found = versions.describe("torch")
    assert found == {"version": "2.11.0+cu130", "cuda": "13.0", "cudnn": "9.13.0.50"}
    assert versions.build_text(found) == "2.11.0+cu130 cuda 13.0 cudnn 9.13.0.50"
    assert "torch" not in sys.modules


def test_tensorflows_build_info_is_read_as_text(site: Path) -> None:
    files = {"python/platform/build_info.py": TF_BUILD_INFO}
    _fake_package(site, "tensorflow", files, "tensorflow", "2.20.0")
    assert versions.describe("tf") == {"version": "2.20.0", "cuda": "12.5.1", "cudnn": "9"}


def test_jaxs_cuda_plugin_is_its_cuda_build(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The lent H200's image: jax 0.11.2 with jax-cuda13-plugin and NVIDIA's cuDNN wheel.
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    _fake_package(site, "jax", {"version.py": '_version = "0.11.2"\n'}, "jax", "0.11.2")
    _fake_package(site, "jax_cuda13_plugin", {}, "jax-cuda13-plugin", "0.11.2")
    _fake_package(site, "nvidia_cudnn", {}, "nvidia-cudnn-cu13", "9.19.0.56")
    found = versions.describe("jax")
    assert found == {"version": "0.11.2", "cuda": "13", "cudnn": "9.19.0.56"}
    assert "jax" not in sys.modules


def test_a_framework_that_is_not_there_has_no_description(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(versions.MODULES, "mxnet", "bench_no_such_framework")
    assert versions.describe("mxnet") == {}


def _composed(
    monkeypatch: pytest.MonkeyPatch, found: dict[str, str], *overrides: str
) -> BenchConfig:
    monkeypatch.setattr(interpreters, "installed", lambda framework: found)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return composing.to_bench_config(compose("config", overrides=list(overrides)))


SITE_TORCH = {"version": "2.11.0+cu130", "cuda": "13.0", "cudnn": "9.13.0.50"}


def test_installed_resolves_at_composition_and_is_part_of_the_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = _composed(monkeypatch, SITE_TORCH, "framework.version=installed", "model=lenet5")
    assert cfg.framework.version == "installed"
    assert cfg.framework.installed == "2.11.0+cu130 cuda 13.0 cudnn 9.13.0.50"
    other = _composed(
        monkeypatch, {**SITE_TORCH, "version": "2.10.0+cu128"}, "framework.version=installed",
        "model=lenet5",
    )  # fmt: skip
    assert config_hash(cfg) != config_hash(other)  # never one configuration
    params = logged_params(flatten(to_dict(cfg)))
    assert params["framework.installed"] == cfg.framework.installed
    assert identity(params)["framework.installed"] == cfg.framework.installed


def test_installed_is_refused_where_the_framework_is_not_importable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigError) as refused:
        _composed(monkeypatch, {}, "framework.version=installed", "framework=tf")
    (problem,) = refused.value.problems
    assert problem.startswith("framework.version: installed, but tensorflow is not importable")


def test_a_pinned_run_on_another_installed_version_does_not_pass_for_the_pin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pin = versions.locked("torch")
    assert pin  # requirements.lock
    same = _composed(
        monkeypatch, {"version": f"{pin}+cpu", "cuda": "", "cudnn": ""}, "model=lenet5"
    )
    assert same.framework.installed == ""  # the pin, as installed: hashes as it always did
    assert config_hash(same) == config_hash(_with_installed(same, ""))
    site = _composed(monkeypatch, SITE_TORCH, "model=lenet5")
    assert site.framework.version == "" and site.framework.installed.startswith("2.11.0+cu130")
    assert config_hash(site) != config_hash(same)


def _with_installed(cfg: BenchConfig, installed: str) -> BenchConfig:
    import copy

    out = copy.deepcopy(cfg)
    out.framework.installed = installed
    return out


def test_a_hash_from_before_the_field_is_kept() -> None:
    # Pinned: framework hashes without version and installed, as before either existed.
    cfg = BenchConfig(framework=FrameworkConfig("tf", ""))
    assert config_hash(cfg) == config_hash(BenchConfig(framework=FrameworkConfig("tf")))
    assert config_hash(_with_installed(cfg, "2.20.0")) != config_hash(cfg)


def test_installed_is_refused_in_a_container(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.checks.config import _check_version

    cfg = BenchConfig(framework=FrameworkConfig("torch", "installed"))
    cfg.launcher.name = "docker"
    problems: list[str] = []
    _check_version(problems, cfg)
    assert problems and "launcher=docker runs its image's build" in problems[0]
    cfg.launcher.name = "process"
    problems = []
    _check_version(problems, cfg)
    assert problems == []  # no release check, no environment


def test_installed_needs_no_environment_of_its_own() -> None:
    assert versions.own_release("installed") == "" and versions.own_release("2.20.0") == "2.20.0"
    assert interpreters.python_for("torch", "installed") == sys.executable
    assert not interpreters.own_environment("torch", "installed")
    assert interpreters.own_environment("mxnet", "installed")  # MXNet's own interpreter


def test_the_trial_refuses_a_framework_other_than_the_composed_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench.trial.loop import _check_version

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.11.0+cu130"))
    cfg = BenchConfig(framework=FrameworkConfig("torch", "installed", "2.11.0+cu130 cuda 13.0"))
    _check_version(cfg)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.12.0+cu130"))
    with pytest.raises(RuntimeError, match="composed with torch 2.11.0.*imported 2.12.0"):
        _check_version(cfg)


@pytest.mark.parametrize(
    "answer",
    [
        "not json",
        json.dumps({"version": "2.11.0", "path": "/etc/shadow"}),  # a key it may not add
        json.dumps({"version": "x" * 500}),
        json.dumps({"version": "2.11\n0"}),
        json.dumps(["2.11.0"]),
    ],
)
def test_a_childs_answer_is_checked_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ncat <<'EOF'\n{answer}\nEOF\n")
    python.chmod(0o755)
    monkeypatch.setenv("BENCH_MXNET_PYTHON", str(python))
    interpreters.installed.cache_clear()
    try:
        assert interpreters.installed("mxnet") == {}
    finally:
        interpreters.installed.cache_clear()


def test_a_childs_good_answer_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "python"
    answer = json.dumps({"version": "1.9.1", "cuda": "11.7", "cudnn": ""})
    python.write_text(f"#!/bin/sh\necho '{answer}'\n")
    python.chmod(0o755)
    monkeypatch.setenv("BENCH_MXNET_PYTHON", str(python))
    interpreters.installed.cache_clear()
    try:
        assert interpreters.installed("mxnet") == {"version": "1.9.1", "cuda": "11.7", "cudnn": ""}
    finally:
        interpreters.installed.cache_clear()
    assert os.access(python, os.X_OK)


def test_a_run_on_the_installed_framework_logs_no_lock_of_benchs() -> None:
    from bench.sweep.session import trial_lock

    pinned = BenchConfig(framework=FrameworkConfig("torch"))
    assert trial_lock(pinned) is not None  # requirements.lock installed it
    installed = BenchConfig(framework=FrameworkConfig("torch", "installed", "2.11.0+cu130"))
    assert trial_lock(installed) is None
    other = BenchConfig(framework=FrameworkConfig("torch", "", "2.11.0+cu130"))
    assert trial_lock(other) is None  # a pin the interpreter did not have
