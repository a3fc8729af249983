"""Framework versions as an axis, below the CLI: which versions are refused and why (with a
package index answered from a cache the test writes), the lock a version's environment is
generated from, the trial's check of the version it imported, the report's version section
and the comparison with a baseline."""

from __future__ import annotations

import json
import random
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from bench.core import versions
from bench.core.config import BenchConfig, ConfigError, FrameworkConfig, distributed_config
from bench.core.identity import config_hash
from bench.envs import environments
from bench.report import baseline, build
from bench.report.trials import to_trial
from tests.report_data import record, runset
from tests.stores import new_store

WHEEL = "tensorflow_cpu-{v}-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package index answer for tensorflow-cpu, cached as bench caches the real one."""
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("BENCH_PACKAGE_INDEX", "http://127.0.0.1:9")  # nothing answers there
    answer = {v: [WHEEL.format(v=v)] for v in ("2.18.0", "2.19.0", "2.20.0", "2.21.0")}
    answer["2.19.1"] = ["tensorflow_cpu-2.19.1-cp312-cp312-manylinux_2_17_x86_64.whl"]
    answer["2.22.0rc0"] = [WHEEL.format(v="2.22.0rc0")]
    path = tmp_path / "index" / "tensorflow-cpu.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(answer))
    return path


needs_cp311_linux = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11) or not sys.platform.startswith("linux"),
    reason="the test index has wheels for CPython 3.11 on Linux",
)


@needs_cp311_linux
@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("2.20.7", "tensorflow-cpu has no release '2.20.7'; the nearest: 2.19.0, 2.20.0, 2.21.0"),
        ("2.18.0", "tf 2.18.0 is outside the supported range (2.19.x, 2.20.x, 2.21.x"),
        ("2.19.1", "tensorflow-cpu 2.19.1 has no wheel for Python 3.11"),
        ("2.22.0rc0", "has no release '2.22.0rc0'"),  # pre-releases are not offered
    ],
)
def test_a_version_bench_cannot_run_is_refused_naming_why(
    index: Path, version: str, message: str
) -> None:
    (problem,) = versions.problems("tf", version, gpu=False, cached=False)
    assert problem.startswith("framework.version: ") and message in problem


@needs_cp311_linux
def test_a_supported_release_passes(index: Path) -> None:
    assert versions.problems("tf", "2.20.0", gpu=False, cached=False) == []
    assert versions.problems("tf", "", gpu=False, cached=False) == []


def test_mxnet_has_one_release(index: Path) -> None:
    (problem,) = versions.problems("mxnet", "1.8.0", gpu=False, cached=False)
    assert "MXNet has one release bench runs, 1.9.1" in problem


def test_an_unreachable_index_refuses_an_uncached_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("BENCH_PACKAGE_INDEX", "http://127.0.0.1:9")
    (problem,) = versions.problems("tf", "2.20.0", gpu=False, cached=False)
    assert "has no environment here yet and the package index" in problem
    assert "cannot be reached" in problem
    assert versions.problems("tf", "2.20.0", gpu=False, cached=True) == []


def test_the_pinned_version_is_the_empty_one_and_hashes_as_before() -> None:
    pinned = versions.pinned("tf")
    assert pinned == "2.21.0"  # requirements.lock
    assert versions.normalize("tf", pinned) == "" and versions.normalize("tf", "2.20.0") == "2.20.0"
    plain = BenchConfig(framework=FrameworkConfig("tf"))
    assert config_hash(plain) == config_hash(BenchConfig(framework=FrameworkConfig("tf", "")))
    assert config_hash(plain) != config_hash(BenchConfig(framework=FrameworkConfig("tf", "2.20.0")))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"launcher": "inline"}, "launcher=inline runs the trial in bench's own process"),
        (
            {"distributed": "horovod"},
            "distributed=horovod (Horovod, horovodrun) is built for the pinned tf",
        ),
    ],
)
@needs_cp311_linux
def test_versions_do_not_run_inline_nor_with_horovod(
    index: Path, overrides: dict[str, str], message: str
) -> None:
    from bench.checks.preflight import validate

    cfg = BenchConfig(framework=FrameworkConfig("tf", "2.20.0"), model=_model("lenet5"))
    if "launcher" in overrides:
        cfg.launcher.name = overrides["launcher"]
    if "distributed" in overrides:
        cfg.distributed, cfg.workers = distributed_config(overrides["distributed"]), 2
    with pytest.raises(ConfigError) as refused:
        validate(cfg)
    assert any(p.startswith("framework.version:") and message in p for p in refused.value.problems)


def _model(name: str) -> Any:
    from bench.core.config import ModelConfig

    return ModelConfig(name=name)


def test_the_lock_pins_the_trial_side_at_the_hosts_versions() -> None:
    pins = environments.host_pins()
    wanted = environments.requirements("tf", "2.20.0", gpu=False, pinned=True)
    assert wanted[0] == "tensorflow-cpu==2.20.0"
    assert f"numpy=={pins['numpy']}" in wanted and f"keras=={pins['keras']}" in wanted
    loose = environments.requirements("torch", "2.14.1", gpu=True, pinned=False)
    assert loose[0] == "torch==2.14.1" and "numpy" in loose
    assert f"psutil=={pins['psutil']}" in loose  # always at the host's pin


def test_uv_never_aims_at_benchs_own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m uv pip ...`` installs into the interpreter that started it; bench runs uv's
    own binary, without VIRTUAL_ENV, and names the target interpreter."""
    seen: dict[str, Any] = {}

    def fake_run(args: list[str], **kw: Any) -> Any:
        seen["args"], seen["env"] = args, kw["env"]
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    monkeypatch.setattr(environments.subprocess, "run", fake_run)
    environments.run_uv("pip", "sync", "--python", "/x/venv/bin/python", "lock.txt")
    assert Path(seen["args"][0]).name == "uv" and seen["args"][1:3] == ["pip", "sync"]
    assert "VIRTUAL_ENV" not in seen["env"]
    assert not any(k.startswith("UV_INTERNAL") for k in seen["env"])


def test_a_trial_on_the_wrong_version_does_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.trial.loop import _check_version

    monkeypatch.setitem(sys.modules, "tensorflow", types.SimpleNamespace(__version__="2.21.0"))
    _check_version(BenchConfig(framework=FrameworkConfig("tf", "")))  # the pinned one
    _check_version(BenchConfig(framework=FrameworkConfig("tf", "2.21.0")))
    with pytest.raises(RuntimeError, match="tf 2.20.0 was asked for, but .* imported 2.21.0"):
        _check_version(BenchConfig(framework=FrameworkConfig("tf", "2.20.0")))


def _runs(
    rate: float, n: int, seed: int, version: str = "", framework: str = "tf", **kw: Any
) -> list[Any]:
    rng = random.Random(seed)
    params = {"framework.version": version} if version else {}
    return [
        record(
            framework, "resnet50", rate=rng.gauss(rate, rate * 0.01), repeat=i, params=params, **kw
        )
        for i in range(n)
    ]


def test_the_report_compares_versions_of_a_framework() -> None:
    runs = _runs(100.0, 6, 1) + _runs(125.0, 6, 2, "2.20.0") + _runs(90.0, 6, 3, framework="torch")
    report = build(runset(runs))
    (section,) = [s for s in report.sections if s.anchor == "versions"]
    text = str(section.blocks)
    assert "tf 2.20.0 against tf 2.0 (pinned)" in text
    assert "tf 2.20.0 faster than tf 2.0 (pinned)" in text
    relative = [s for s in report.sections if s.anchor == "relative-training"]
    assert relative and "tf==2.20.0 vs tf" not in str(relative[0].blocks)


def _trials(records: list[Any]) -> list[Any]:
    return [to_trial(r) for r in records]


def test_a_baseline_says_regression_improvement_no_change_or_not_comparable() -> None:
    before = _trials(
        _runs(100.0, 8, 1) + _runs(100.0, 8, 2, batch=64) + _runs(100.0, 8, 3, batch=16)
    )
    now = _trials(
        _runs(80.0, 8, 4)  # 25% more time per sample: a regression
        + _runs(100.0, 8, 5, batch=64)  # unchanged
        + _runs(100.0, 8, 6, batch=16, tags={"bench.cpu_model": "Other CPU"})
        + _runs(100.0, 8, 7, batch=128)  # a configuration the baseline has not
    )
    changes = baseline.compare(now, before)
    kinds = [c.kind for c in changes]
    assert kinds[0] == baseline.REGRESSION and "regression of 2" in changes[0].text
    assert 20 < changes[0].pct < 30
    assert baseline.NO_CHANGE in kinds and baseline.MISSING in kinds
    (other,) = [c for c in changes if c.kind == baseline.NOT_COMPARABLE]
    assert "cpu_model differs" in other.text
    assert baseline.failing(changes, 5) == [changes[0]] and baseline.failing(changes, 30) == []
    faster = baseline.compare(_trials(_runs(125.0, 8, 8)), before)
    assert faster[0].kind == baseline.IMPROVEMENT and "improvement of " in faster[0].text


def test_the_report_command_fails_on_a_regression_above_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench report --baseline B --fail-on-regression PCT`` over a fake store: exit 1 on a
    significant regression above PCT, 0 below it and with no regression."""
    from bench import tracking
    from bench.cli.report import main as report_main
    from tests.report_data import runset

    sweeps = {
        "a" * 32: runset(_runs(100.0, 8, 1)),  # the baseline
        "b" * 32: runset(_runs(80.0, 8, 2)),  # 25% more time per sample
        "c" * 32: runset(_runs(100.0, 8, 3)),  # unchanged
    }
    monkeypatch.setattr(tracking, "load_runs", lambda uri, experiment=None, sweep=None,
                        history_keys=(), **_: sweeps[sweep])  # fmt: skip

    new_store(tmp_path / "x.db")  # an empty store

    def report(sweep: str, gate: str) -> int:
        uri = f"sqlite:///{tmp_path / 'x.db'}"
        argv = ["--uri", uri, "--no-log", "--out", str(tmp_path / sweep[:1])]
        return report_main([*argv, "--sweep", sweep, "--baseline", "a" * 32,
                            "--fail-on-regression", gate])  # fmt: skip

    assert report("b" * 32, "5") == 1
    out = capsys.readouterr()
    assert "regression of 2" in out.out and "regression(s) above 5%" in out.err
    assert "## Against the baseline" in (tmp_path / "b" / "report.md").read_text()
    assert report("b" * 32, "30") == 0
    assert report("c" * 32, "5") == 0


def test_a_versions_image_installs_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """launcher=docker: the version's hashed lock is part of the image's build context (and
    so of its content-hash tag); the pinned image has none."""
    from bench import images

    lock = tmp_path / "tf-2.20.0-cpu.txt"
    lock.write_text("tensorflow-cpu==2.20.0 --hash=sha256:00\n")
    monkeypatch.setattr(environments, "image_lock", lambda fw, version, variant: lock)
    cfg = BenchConfig(framework=FrameworkConfig("tf", "2.20.0"))
    cfg.launcher.name = "docker"
    spec = images.BuildSpec.from_config(cfg)
    assert spec.version == "2.20.0"
    files = images.context_files(spec)
    assert files["docker/version.lock"] == lock
    pinned = images.context_files(images.BuildSpec("tf", "cpu"))
    assert "docker/version.lock" not in pinned
    args = {"BASE_IMAGE": "x", "VARIANT": "cpu"}
    assert images.content_hash(files, args) != images.content_hash(pinned, args)
    dockerfile = (images.DOCKER / "tf.Dockerfile").read_text()
    assert "docker/version.loc[k]" in dockerfile and "--require-hashes" in dockerfile


def test_lock_pins_reads_locks_and_constraints_alike(tmp_path: Path) -> None:
    lock = tmp_path / "some.lock"
    lock.write_text(
        "# Generated: do not edit.\n"
        "--find-links /wheels\n"
        "Scikit_Learn==1.7.2 \\\n"
        "    --hash=sha256:00 \\\n"
        "    # via bench\n"
        "torch==2.13.0+cpu ; platform_machine == 'x86_64'\n"
        "uvicorn[standard]==0.38.0  # the server\n"
        "zope.interface==8.1\n"
    )
    assert environments.lock_pins(lock) == {
        "scikit-learn": "1.7.2",
        "torch": "2.13.0+cpu",
        "uvicorn": "0.38.0",
        "zope-interface": "8.1",
    }
    assert environments.lock_pins(environments.REPO / "requirements.lock")["torch"].endswith("+cpu")


def test_a_cached_index_answer_others_can_write_is_not_believed(index: Path) -> None:
    """A shared cache folder must not let another user decide which versions bench runs:
    a cached answer writable by others is ignored (the index is then asked; here it cannot
    be reached, so the version is refused with that reason)."""
    index.chmod(0o666)
    (problem,) = versions.problems("tf", "2.20.0", gpu=False, cached=False)
    assert "cannot be reached" in problem
    index.chmod(0o600)
    assert versions.releases("tensorflow-cpu")  # believed again


def test_the_index_answer_is_cached_for_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import stat

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    answer = {"releases": {"2.20.0": [{"filename": WHEEL.format(v="2.20.0")}]}}
    monkeypatch.setattr(
        versions.urllib.request, "urlopen",
        lambda url, timeout: io.BytesIO(json.dumps(answer).encode()),
    )  # fmt: skip
    assert "2.20.0" in versions.releases("tensorflow-cpu")
    cached = tmp_path / "index" / "tensorflow-cpu.json"
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600
    assert stat.S_IMODE(cached.parent.stat().st_mode) == 0o700


@needs_cp311_linux
def test_a_package_with_an_extra_is_asked_for_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jax installs as jax[cpu]: the index's JSON is at /jax/json (/jax[cpu]/json is a 404,
    which refused every jax framework.version)."""
    import io

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    asked: list[str] = []
    wheel = "jax-{v}-py3-none-any.whl"
    answer = {"releases": {v: [{"filename": wheel.format(v=v)}] for v in ("0.10.0", "0.10.2")}}

    def urlopen(url: str, timeout: float) -> io.BytesIO:
        asked.append(url)
        return io.BytesIO(json.dumps(answer).encode())

    monkeypatch.setattr(versions.urllib.request, "urlopen", urlopen)
    assert versions.problems("jax", "0.10.0", gpu=False, cached=False) == []
    assert asked and asked[0].endswith("/jax/json")
    assert (tmp_path / "index" / "jax.json").exists()
    (problem,) = versions.problems("jax", "0.9.0", gpu=False, cached=False)
    assert "has no release '0.9.0'" in problem
