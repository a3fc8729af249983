"""`bench report` imports the build's heavy modules in a thread while it reads the runs
(bench.report.warm_imports); the build must start only once that thread is done, or two
threads importing one package can hand the build a half-initialized module (seen with
matplotlib: ``cannot import name 'Transform' from partially initialized module``)."""

from __future__ import annotations

import sys
import threading
import types
from pathlib import Path

import pytest

import bench.report as report
from bench import tracking
from bench.cli import report as report_cli


def slow_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A module that takes 0.5 s to import, as the only module the thread warms."""
    (tmp_path / f"{name}.py").write_text("import time\ntime.sleep(0.5)\nLOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(report, "_BUILD_MODULES", (name,))
    monkeypatch.delitem(sys.modules, name, raising=False)


def warming() -> bool:
    return any(t.name == report.WARM_THREAD and t.is_alive() for t in threading.enumerate())


def test_the_returned_call_waits_for_the_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_module(tmp_path, monkeypatch, "bench_warm_probe_a")
    imported = report.warm_imports()
    assert warming()  # still sleeping in its import
    imported()
    assert not warming()
    assert sys.modules["bench_warm_probe_a"].LOADED


def test_the_build_starts_after_the_warm_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_module(tmp_path, monkeypatch, "bench_warm_probe_b")
    uri = f"sqlite:///{tmp_path}/m.db"  # never opened: the read is the fake below
    runs = types.SimpleNamespace(records=[], sweep_id=None, uri=uri)
    monkeypatch.setattr(tracking, "load_runs", lambda *a, **k: runs)  # a read faster than 0.5 s
    seen: list[bool] = []

    class Built(Exception):
        pass

    def build(*args: object, **kwargs: object) -> None:
        seen.append(warming())
        raise Built

    monkeypatch.setattr(report_cli, "build", build)
    with pytest.raises(Built):
        report_cli.main(["--uri", uri, "--out", str(tmp_path / "r")])
    assert seen == [False]
