"""A new sqlite store is a copy of this MLflow version's empty store (bench.tracking.template):
the same as MLflow's own, table by table, but for the Default experiment's time and place."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from bench.tracking import template
from bench.tracking.store import _build_store, create_store


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _lines(sql: str | None) -> list[str]:
    """A CREATE statement's clauses in order of text: MLflow's migrations write a table's
    constraints in an order that differs from one build of the same version to the next."""
    return sorted(line.strip().rstrip(",") for line in (sql or "").splitlines())


def _dump(db: Path) -> dict[str, object]:
    with sqlite3.connect(db) as con:
        schema = sorted(
            (kind, name, table, _lines(sql))
            for kind, name, table, sql in con.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master"
            )
        )
        tables = [name for kind, name, _, _ in schema if kind == "table"]
        rows = {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}"))) for t in tables}
        default = con.execute(
            "SELECT artifact_location, creation_time, last_update_time FROM experiments"
        ).fetchall()
    rows["experiments"] = [r.split(",")[:2] for r in rows["experiments"]]  # id and name only
    return {"schema": schema, "rows": rows, "default": default}


@pytest.mark.slow  # builds MLflow's store twice: 5-13 s on 2 cores
def test_a_new_store_is_mlflows_own_but_for_the_default_experiments_time_and_place(
    tmp_path: Path, cache: Path
) -> None:
    (tmp_path / "mlflow").mkdir()
    _build_store(tmp_path / "mlflow" / "m.db")  # MLflow's own, from its migrations
    create_store(tmp_path / "first.db")  # makes the template, then copies it
    create_store(tmp_path / "second.db")  # copies it
    assert (
        template.template_path().is_file() and template.template_path().parent == cache / "stores"
    )
    mlflows, first, second = (
        _dump(p)
        for p in (tmp_path / "mlflow" / "m.db", tmp_path / "first.db", tmp_path / "second.db")
    )
    assert first["schema"] == second["schema"] == mlflows["schema"]
    assert first["rows"] == second["rows"] == mlflows["rows"]
    assert mlflows["default"][0][0].endswith("/mlruns/0")  # MLflow's: under the command's folder
    ((location, created, updated),) = second["default"]
    assert location == (tmp_path / "artifacts" / "0").as_uri() and created == updated > 0
    assert oct(os.stat(cache / "stores").st_mode & 0o777) == "0o700"


def test_a_copied_store_takes_runs(tmp_path: Path, cache: Path) -> None:
    from mlflow.tracking import MlflowClient

    create_store(tmp_path / "m.db")
    create_store(tmp_path / "n.db")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'n.db'}")
    experiment = client.create_experiment("bench", (tmp_path / "artifacts").as_uri())
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "samples_per_s", 12.5, step=1)
    assert client.get_run(run.info.run_id).data.metrics == {"samples_per_s": 12.5}
    assert [e.name for e in client.search_experiments()] == ["bench", "Default"]


@pytest.mark.slow  # each builds MLflow's store twice (5 s a case on 2 cores)
@pytest.mark.parametrize(
    "plant",
    [
        "INSERT INTO experiments (experiment_id, name, lifecycle_stage) VALUES (7, 'x', 'active')",
        "DELETE FROM alembic_version",
        "chmod 666",  # another user could have planted it
        "garbage",
    ],
)
def test_a_tampered_template_is_not_used(tmp_path: Path, cache: Path, plant: str) -> None:
    create_store(tmp_path / "first.db")
    path = template.template_path()
    if plant.startswith("chmod"):
        os.chmod(path, 0o666)
    elif plant == "garbage":
        path.write_bytes(b"not a database" * 100)
    else:
        with sqlite3.connect(path) as con:
            con.execute(plant)
    before = path.read_bytes()
    create_store(tmp_path / "second.db")  # made afresh, and the template with it
    assert _dump(tmp_path / "second.db")["schema"] == _dump(tmp_path / "first.db")["schema"]
    assert path.read_bytes() != before
    with sqlite3.connect(tmp_path / "second.db") as con:
        assert con.execute("SELECT COUNT(*) FROM experiments").fetchone()[0] == 1


@pytest.mark.slow  # MLflow builds the store: 3-5 s on 2 cores
def test_without_a_cache_mlflow_builds_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("BENCH_CACHE", str(blocker))  # the cache cannot be made
    create_store(tmp_path / "m.db")
    assert _dump(tmp_path / "m.db")["default"][0][0].endswith("/mlruns/0")  # MLflow's own
