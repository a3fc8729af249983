"""Issue 29, finding 12: `bench parity` with MXNet makes MXNet's own environment on first
use, as a sweep does (it refused, naming the missing interpreter); Ctrl-C in `bench sync` is
one line."""

from __future__ import annotations

import pytest

from bench.cli import parity as parity_cli
from bench.envs import interpreters


def test_a_missing_mxnet_environment_is_made_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    missing = {"mxnet"}
    monkeypatch.setattr(
        interpreters, "problem", lambda fw, version="": "no interpreter" if fw in missing else ""
    )
    monkeypatch.setattr(interpreters, "overridden", lambda fw: False)

    def make(framework: str) -> str:
        made.append(framework)
        missing.discard(framework)
        return ""

    monkeypatch.setattr(parity_cli, "_make_environment", make)
    args = parity_cli._parser().parse_args(["--frameworks", "torch,mxnet", "--model", "lenet5"])
    assert parity_cli.problems(args) == [] and made == ["mxnet"]


def test_a_named_interpreter_is_never_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interpreters, "problem", lambda fw, version="": "BENCH_MXNET_PYTHON gone")
    monkeypatch.setattr(interpreters, "overridden", lambda fw: True)
    monkeypatch.setattr(parity_cli, "_make_environment", lambda fw: pytest.fail("made"))
    args = parity_cli._parser().parse_args(["--frameworks", "mxnet", "--model", "lenet5"])
    assert any("BENCH_MXNET_PYTHON gone" in p for p in parity_cli.problems(args))


def test_a_model_without_a_framework_s_build_is_refused_naming_its_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(interpreters, "problem", lambda fw, version="": "")
    args = parity_cli._parser().parse_args(
        ["--frameworks", "torch,mxnet", "--model", "mobilenet_v2"]
    )
    (problem,) = parity_cli.problems(args)
    assert problem.startswith("--model: mobilenet_v2 has no MXNet build (those: alexnet, lenet5,")


def test_ctrl_c_in_bench_sync_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29, finding 12: Ctrl-C in bench sync printed an 86-line traceback."""
    from bench.cli import sync

    def interrupted(*args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(sync, "_main", interrupted)
    assert sync.main([]) == 130
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bench.cli.sync: interrupted; every record not yet synced stays")
