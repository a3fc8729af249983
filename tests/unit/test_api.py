"""bench's Python API (bench.api): ``import bench`` stays cheap, its keywords become the
command line's overrides, and its tables are built from the store's records."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench import api


def test_import_bench_does_not_import_the_api() -> None:
    code = "import sys, bench; print('bench.api' in sys.modules, 'pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_api_is_reached_from_the_package() -> None:
    import bench

    assert bench.run is api.run and bench.compare is api.compare
    with pytest.raises(AttributeError):
        bench.nothing  # noqa: B018


def test_keywords_are_overrides() -> None:
    args = api.overrides_of(
        ["model=lenet5"],
        {"framework": ["torch", "tf"], "compile": True, "optimizer__lr": 0.1, "tracking_uri": "x"},
    )
    assert args == ["model=lenet5", "framework=torch,tf", "compile=true", "optimizer.lr=0.1",
                    "tracking.uri=x"]  # fmt: skip
    assert api._store_of(args) == ("x", None)


def test_runs_is_a_table_of_records(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import tracking
    from bench.tracking.records import RunRecord, RunSet

    record = RunRecord("r1", "torch lenet5", 0, {"framework.name": "torch"},
                       {"bench.status": "ok"}, {"trial_samples_per_s": 10.0, "x": 1.0})  # fmt: skip
    found = RunSet([record], uri="u", experiment="bench")
    monkeypatch.setattr(tracking, "load_runs", lambda *a, **k: found)
    table = api.runs("u")
    assert list(table.columns[:4]) == ["run_id", "name", "status", "trial_samples_per_s"]
    assert table.loc[0, "framework.name"] == "torch" and table.attrs["tracking_uri"] == "u"
