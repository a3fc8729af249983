"""`bench setup` and the environments made on first use (bench.envs.setup), below the CLI:
the set-up scripts are replaced by small fakes in a folder of their own, so what is checked
is what bench hands them and how it reads their outcome.  The real scripts run in
tests/e2e/test_installed.py (MXNet, from a wheel) and in scripts/test.sh (Horovod)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bench.checks import host
from bench.cli import setup as setup_cli
from bench.core import paths
from bench.core.config import BenchConfig
from bench.envs import interpreters
from bench.envs import setup as setup_envs


@pytest.fixture
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data folder whose set-up scripts record their environment and make a fake
    interpreter where MXNet's would go."""
    folder = tmp_path / "data" / "scripts"
    folder.mkdir(parents=True)
    for name in ("mxnet", "horovod"):
        (folder / f"setup_{name}.sh").write_text(
            f'env > "{tmp_path}/{name}.env"\n'
            'if [ -n "${FAIL:-}" ]; then echo "step one"; echo "it broke" >&2; exit 3; fi\n'
            'if [ -n "${BENCH_MXNET_VENV:-}" ]; then mkdir -p "$BENCH_MXNET_VENV/bin"; '
            f'ln -s "{sys.executable}" "$BENCH_MXNET_VENV/bin/python"; fi\n'
        )
    real = paths.data
    monkeypatch.setattr(paths, "data", lambda name: folder if name == "scripts" else real(name))
    monkeypatch.setattr(interpreters, "own_venv", lambda framework: tmp_path / "venv")
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BENCH_MXNET_PYTHON", raising=False)
    return tmp_path


def recorded(where: Path, name: str) -> dict[str, str]:
    lines = (where / f"{name}.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_mxnet_is_made_on_first_use_where_bench_keeps_it(scripts: Path) -> None:
    assert interpreters.problem("mxnet")
    assert setup_envs.ensure_mxnet() == ""
    env = recorded(scripts, "mxnet")
    assert env["BENCH_MXNET_VENV"] == str(scripts / "venv")
    assert env["BENCH_SOURCE_ROOT"] == str(paths.source_root())
    assert env["BENCH_CACHE"] == str(scripts / "cache")
    assert env["BENCH_VARIANT"] in ("cpu", "cuda")
    assert not interpreters.problem("mxnet")
    (scripts / "mxnet.env").unlink()
    assert setup_envs.ensure_mxnet() == ""  # ready: the script is not run again
    assert not (scripts / "mxnet.env").exists()


def test_a_named_interpreter_is_never_made(scripts: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCH_MXNET_PYTHON", str(scripts / "nowhere" / "python"))
    problem = setup_envs.ensure_mxnet()
    assert problem.startswith("framework: mxnet runs in its own environment")
    assert "BENCH_MXNET_PYTHON" in problem
    assert not (scripts / "mxnet.env").exists()


def test_a_failed_set_up_is_a_problem_with_its_output(
    scripts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAIL", "1")
    problem = setup_envs.ensure_mxnet()
    assert problem.startswith("framework: mxnet: its environment could not be made: ")
    assert "setup_mxnet.sh failed (exit 3)" in problem
    assert "step one" in problem and "it broke" in problem
    assert setup_cli.main(["mxnet"]) == 1


def test_horovod_is_built_into_bench_s_own_environment(scripts: Path) -> None:
    assert setup_cli.main(["horovod"]) == 0
    env = recorded(scripts, "horovod")
    assert env["BENCH_PYTHON"] == sys.executable
    assert env["BENCH_HOROVOD"] == "1"  # a BENCH_HOROVOD=0 around `bench setup` is overruled


def test_bad_names_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        setup_cli.main(["mxnt"])
    assert exited.value.code == 2
    assert "invalid choice: 'mxnt'" in capsys.readouterr().err


def mx(launcher: str = "process", version: str = "") -> BenchConfig:
    cfg = BenchConfig()
    cfg.framework.name, cfg.framework.version, cfg.model.name = "mxnet", version, "lenet5"
    cfg.launcher.name = launcher
    return cfg


def test_only_a_sweep_running_mxnet_here_makes_its_environment(scripts: Path) -> None:
    torch = BenchConfig()
    assert host.prepare([torch, mx("docker"), mx(version="1.8.0")]) == []
    assert not (scripts / "mxnet.env").exists()
    assert host.prepare([torch, mx()]) == []
    assert (scripts / "mxnet.env").exists()


def test_a_wheel_s_source_root_holds_only_bench(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paths, "checkout", lambda: False)
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path))
    root = paths.source_root()
    assert root == tmp_path / "source"
    assert [p.name for p in root.iterdir()] == ["bench"]
    assert (root / "bench").resolve() == paths.PACKAGE
    assert paths.source_root() == root  # a second call keeps the link
    assert interpreters.own_venv("mxnet") == tmp_path / "mxnet" / "venv"


def test_a_version_of_mxnet_never_asks_for_mxnet_s_own_environment(scripts: Path) -> None:
    """framework.version runs in that version's environment (bench.envs.environments): the
    pinned MXNet environment, missing here, is neither made nor asked for."""
    from bench.checks import config

    cfg = mx(version="1.9.1")
    problems: list[str] = []
    config._check_framework(problems, cfg)
    assert problems == []
    assert interpreters.problem("mxnet", "1.9.1") == ""
    assert "bench setup mxnet" in interpreters.problem("mxnet")
    assert interpreters.problem("torch") == ""
