"""mode=serve's preflight for LoadGen outside bench's own interpreter, with fakes: a version's
cached environment whose lock predates LoadGen is one line before any trial; MXNet's own
environment gets LoadGen on first use (its set-up script, whose stamp changed), and a named
interpreter without it is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks import host
from bench.core.config import BenchConfig, FrameworkConfig
from bench.envs import environments


def serving(version: str) -> BenchConfig:
    return BenchConfig(mode="serve", framework=FrameworkConfig(name="tf", version=version))


def test_a_version_s_cached_environment_without_loadgen_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    cfg = serving("2.20.0")
    assert host._version_loadgen(cfg) == []  # not made yet: made with LoadGen (TRIAL_SIDE)
    env = environments.env_for("tf", "2.20.0")
    env.root.mkdir(parents=True)
    env.lock.write_text("numpy==2.1.0 \\\n    --hash=sha256:00\ntensorflow==2.20.0\n")
    (problem,) = host._version_loadgen(cfg)
    assert problem.startswith("framework.version: mode=serve needs MLPerf's LoadGen")
    assert str(env.root) in problem and "\n" not in problem
    env.lock.write_text("mlcommons-loadgen==6.0.17 \\\n    --hash=sha256:00\n")
    assert host._version_loadgen(cfg) == []
    assert "mlcommons-loadgen" in environments.TRIAL_SIDE


class FakeSetup:
    def __init__(self, installs: bool) -> None:
        self.installs, self.runs, self.present = installs, 0, False

    def has(self, python: str, module: str) -> bool:
        assert module == "mlperf_loadgen"
        return self.present

    def run(self, name: str, quiet: bool = False) -> None:
        assert name == "mxnet"
        self.runs += 1
        self.present = self.installs


@pytest.mark.parametrize("installs", [True, False])
def test_mxnet_s_environment_gets_loadgen_on_first_use(
    installs: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench.envs import interpreters, setup

    fake = FakeSetup(installs)
    monkeypatch.setattr(host, "_has_module", fake.has)
    monkeypatch.setattr(setup, "run", fake.run)
    monkeypatch.setattr(interpreters, "overridden", lambda name: False)
    problems = host._own_environment_loadgen()
    assert fake.runs == 1
    assert problems == [] if installs else "pip install mlcommons-loadgen" in problems[0]


def test_a_named_mxnet_interpreter_without_loadgen_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench.envs import interpreters, setup

    fake = FakeSetup(installs=True)
    monkeypatch.setattr(host, "_has_module", fake.has)
    monkeypatch.setattr(setup, "run", fake.run)
    monkeypatch.setattr(interpreters, "overridden", lambda name: True)
    (problem,) = host._own_environment_loadgen()
    assert fake.runs == 0  # bench never installs into an interpreter the user named
    assert problem.startswith("framework: mxnet: mode=serve needs MLPerf's LoadGen")
