"""Spooled records are not trusted when synced (docs/security.md): a record whose file names
leave their folder, whose fields are not what bench writes, that is a link, or that names
another tracking URI than its folder's is refused in one line and left in place, and nothing
is written, logged or uploaded from it.  What bench spools is its owner's only: records 0600
in 0700 folders."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from bench import tracking
from bench.cli import sync as sync_cli
from bench.core.config import BenchConfig
from bench.core.result import OK, TrialResult

URI = "http://127.0.0.1:9"


def spool_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A genuine spooled trial record (with one artifact); its path."""
    monkeypatch.setenv("BENCH_STATE_DIR", str(tmp_path / "state"))
    spool = tracking.Spool(URI, "bench", "unreachable in this test")
    artifact = tmp_path / "worker.log"
    artifact.write_text("the log\n")
    run = spool.start_trial(spool.start_sweep("sweep", {}), BenchConfig(), "trial", {})
    run.finish(TrialResult(OK, "torch", "lenet5", "train"), [artifact])
    (path,) = tracking.spooled()
    return path


def craft(path: Path, name: str, change: dict[str, Any]) -> Path:
    """A copy of the record at ``path`` named ``name``, with ``change`` applied."""
    record = json.loads(path.read_text())
    record.update(change)
    crafted = path.with_name(name)
    crafted.write_text(json.dumps(record))
    return crafted


def test_crafted_records_are_refused_and_nothing_outside_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    genuine = spool_one(tmp_path, monkeypatch)
    planted = tmp_path / "outside" / "planted"
    planted.parent.mkdir()
    host = tmp_path / "outside" / "host-secret"
    host.write_text("HOST SECRET")
    folder = genuine.parent
    crafted = [
        craft(genuine, "1-absolute.json", {"files": {str(planted): "written outside"}}),
        craft(genuine, "2-dotdot.json", {"files": {"../../../outside/planted": "x"}}),
        craft(genuine, "3-root.json", {"files": {"/": "x"}}),
        craft(genuine, "4-types.json", {"files": {"a.txt": 7}}),
        craft(genuine, "5-base64.json", {"files": {"a.bin": {"base64": "!!!"}}}),
        craft(genuine, "6-uri.json", {"tracking_uri": f"sqlite:///{tmp_path}/outside/x.db"}),
        craft(genuine, "7-nested.json", {"files": {"a": "x", "a/b": "y"}}),
        craft(genuine, "8-config.json", {"config": {"no_such_key": 1}}),
    ]
    (folder / "9-link.json").symlink_to(host)
    crafted.append(folder / "9-link.json")
    (folder / "0-end.sweep-end").write_text(json.dumps({"sweep_id": 1}))
    crafted.append(folder / "0-end.sweep-end")
    genuine.unlink()  # only crafted records: no store is even opened

    refused: list[Path] = []
    assert tracking.sync_spool(None, None, refused) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert sorted(refused) == sorted(crafted)
    assert len(err) == len(crafted)  # one line each
    assert all("refused, left in place" in line for line in err)
    assert all(path.is_symlink() or path.is_file() for path in crafted)  # all still there
    assert not planted.exists() and not (tmp_path / "outside" / "x.db").exists()
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["host-secret"]
    assert "HOST SECRET" not in "\n".join(err)


def test_a_refused_record_leaves_the_good_ones_synced_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    genuine = spool_one(tmp_path, monkeypatch)
    bad = craft(genuine, "0-bad.json", {"files": {"/etc/x": "y"}})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert sync_cli.main(["--uri", uri]) == 1
    out, err = capsys.readouterr()
    assert "synced 1 trial record(s)" in out
    assert f"{bad}: refused, left in place: file name '/etc/x' is not relative" in err
    assert "1 record(s) refused" in err
    assert tracking.spooled() == [bad]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("bench").experiment_id])
    assert len([r for r in runs if "mlflow.parentRunId" in r.data.tags]) == 1


def test_spooled_records_are_their_owners_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = spool_one(tmp_path, monkeypatch)
    spool = tracking.Spool(URI, "bench", "again")
    spool.end_sweep(spool.start_sweep("sweep", {}), True, False, "table")
    (end,) = tracking.spooled_ends()
    for folder in (tracking.spool_root(), path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for file in (path, end, path.parent / "uri"):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    record = json.loads(path.read_text())
    assert record["files"] == {"worker.log": "the log\n"}
