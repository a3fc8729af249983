"""A new sqlite store is made whole or not at all: Ctrl-C at any moment of MLflow's schema
set-up leaves no store (so the next sweep makes it), never half of one; and a half-built
store left by an older bench is named, with the fix, in one line."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bench.core.config import BenchConfig, TrackingConfig
from bench.sweep.jobs import BenchExit
from bench.sweep.session import Sweep, SweepContext
from bench.tracking import MlflowStore
from bench.tracking.reach import HalfBuiltStore


@pytest.mark.slow
def test_ctrl_c_at_any_moment_of_creation_leaves_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    db = tmp_path / "mlruns" / "mlflow.db"
    uri = f"sqlite:///{db}"
    # MLflow's own build (no cache to keep an empty store in: bench.tracking.template).
    (tmp_path / "no-cache").write_text("")
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "no-cache"))
    # Ctrl-C as the n-th SQL statement starts: in the first tables, in the migrations
    # (about 1,700 statements in all with MLflow 3.17).
    for moment in (20, 300):
        count = [0]

        def interrupt(*args: Any, moment: int = moment, count: list[int] = count) -> None:
            count[0] += 1
            if count[0] == moment:
                raise KeyboardInterrupt

        event.listen(Engine, "before_cursor_execute", interrupt)
        try:
            with pytest.raises(KeyboardInterrupt):
                MlflowStore(uri, "bench")
        finally:
            event.remove(Engine, "before_cursor_execute", interrupt)
        assert count[0] == moment  # it was interrupted there, not before
        assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db.lock"], moment

    def link(*args: Any) -> None:  # the schema is whole, not yet in place
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "link", link)
    with pytest.raises(KeyboardInterrupt):
        MlflowStore(uri, "bench")
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db.lock"]
    monkeypatch.undo()

    store = MlflowStore(uri, "bench")  # the next sweep makes it, whole
    assert store.client.get_experiment(store.experiment_id).name == "bench"
    assert MlflowStore(uri, "bench").experiment_id == store.experiment_id

    # A copy of the cached empty store, stopped half way (the copy, then its Default
    # experiment's update): no store either.
    from bench.tracking import template
    from bench.tracking.store import _build_store

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    assert template.template(_build_store)  # the empty store to copy is there first
    other = tmp_path / "copied" / "mlflow.db"
    for target in ("copyfile", "connect"):
        owner = template.shutil if target == "copyfile" else template.sqlite3
        real = getattr(owner, target)

        def stop(*args: Any, real: Any = real, target: str = target, **kwargs: Any) -> Any:
            if target == "connect" and "mode=ro" in str(args[0]):
                return real(*args, **kwargs)  # the template's check, not the copy's update
            raise KeyboardInterrupt

        monkeypatch.setattr(owner, target, stop)
        with pytest.raises(KeyboardInterrupt):
            MlflowStore(f"sqlite:///{other}", "bench")
        monkeypatch.undo()
        monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
        assert sorted(p.name for p in other.parent.iterdir()) == ["mlflow.db.lock"], target
    assert MlflowStore(f"sqlite:///{other}", "bench").experiment_id


def half_built_store(path: Path) -> Path:
    """What an interrupted in-place creation leaves: some tables, no experiment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        con.execute("INSERT INTO alembic_version VALUES ('bda7b8c39065')")
        con.execute("CREATE TABLE experiments (experiment_id INTEGER, name VARCHAR(256))")
        con.execute("CREATE TABLE runs (run_uuid VARCHAR(32))")
    con.close()
    return path


def test_a_half_built_store_is_named_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = half_built_store(tmp_path / "mlflow.db")
    before = db.read_bytes()
    with pytest.raises(HalfBuiltStore, match="half-built .* holds no runs.*remove it"):
        MlflowStore(f"sqlite:///{db}", "bench")
    cfg = BenchConfig(tracking=TrackingConfig(uri=f"sqlite:///{db}"))
    with pytest.raises(BenchExit) as stop:
        Sweep.open(cfg, 1, "sweep", [], SweepContext())
    assert stop.value.code == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{db} is half-built" in line and "remove it and run again" in line
    assert db.read_bytes() == before  # looked at, not touched

    from bench.tracking import load_runs

    with pytest.raises(LookupError, match="half-built"):
        load_runs(f"sqlite:///{db}")


def test_another_applications_database_is_named_as_such(tmp_path: Path) -> None:
    """Issue 51: it was called half-built, with the advice to remove it."""
    db = tmp_path / "notes.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
        con.execute("INSERT INTO notes VALUES (1, 'keep me')")
    before = db.read_bytes()
    with pytest.raises(HalfBuiltStore, match="another application's SQLite database .* notes"):
        MlflowStore(f"sqlite:///{db}", "bench")
    assert db.read_bytes() == before
