"""A store packed on the GPU machine (scripts/gpu_check.py --out) and unpacked here
(scripts/gpu_results.py): a real MLflow store round-trips with its artifacts moved to the
new folder; an archive that is not what gpu_check packs is refused, never followed."""

from __future__ import annotations

import io
import sqlite3
import sys
import tarfile
from pathlib import Path

import pytest

from tests.stores import new_store

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gpu_check  # noqa: E402
import gpu_results  # noqa: E402


def _store(root: Path) -> str:
    """A real MLflow store as bench makes one: sqlite beside its artifacts; a run with a
    file artifact.  Its run id."""
    import mlflow

    uri = new_store(root / "mlflow.db")
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("gpu-matrix", (root / "artifacts").as_uri())
    run = client.create_run(experiment)
    note = root / "note.txt"
    note.write_text("telemetry")
    client.log_artifact(run.info.run_id, str(note))
    client.log_metric(run.info.run_id, "power_w", 556.0)
    return run.info.run_id


@pytest.mark.slow
def test_a_packed_store_unpacks_elsewhere_with_its_artifacts(tmp_path: Path) -> None:
    import mlflow

    there, here = tmp_path / "gstore", tmp_path / "results"
    there.mkdir()
    run_id = _store(there)
    out = tmp_path / "out"
    out.mkdir()
    gpu_check.Check(there, out, 60, 60, "gpu").pack()
    db = gpu_results.unpack(out / "gpu_store.tar.gz", here)
    client = mlflow.MlflowClient(f"sqlite:///{db}")
    run = client.get_run(run_id)
    assert run.info.artifact_uri.startswith(here.resolve().as_uri())
    assert run.data.metrics["power_w"] == 556.0
    got = Path(client.download_artifacts(run_id, "note.txt", str(tmp_path)))
    assert got.read_text() == "telemetry"


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, b""


@pytest.mark.parametrize(
    ("members", "why"),
    [
        ([_link("artifacts/r/worker.log", "/etc/shadow")], "not a regular file or folder"),
        ([_file("../outside.txt")], "a name outside the archive's folder"),
        ([_file("/etc/cron.d/job")], "a name outside the archive's folder"),
        ([_file("artifacts/../../x")], "a name outside the archive's folder"),
        ([_file("run.sh")], "neither mlflow.db nor under artifacts/"),
        ([_file("mlflow.db", b"#!/bin/sh\nrm -rf /\n")], "not an SQLite database"),
    ],
)
def test_an_archive_that_is_not_a_packed_store_is_refused(
    tmp_path: Path, members: list[tuple[tarfile.TarInfo, bytes]], why: str
) -> None:
    archive = _archive(tmp_path / "evil.tar.gz", members)
    with pytest.raises(gpu_results.Refused, match=why):
        gpu_results.unpack(archive, tmp_path / "into")
    assert not (tmp_path / "outside.txt").exists()


@pytest.mark.parametrize("where", ["file:///root/.ssh", "STORE/artifacts/../../../etc"])
def test_an_artifact_location_outside_the_store_is_refused(tmp_path: Path, where: str) -> None:
    """Also one that reaches out through ``artifacts/..`` (issue 51: it was moved, not
    refused, and a report read a host file into a run)."""
    there = tmp_path / "gstore"
    there.mkdir()
    _store(there)
    where = where.replace("STORE", there.as_uri())
    with sqlite3.connect(there / "mlflow.db") as conn:
        conn.execute("UPDATE runs SET artifact_uri = ?", (where,))
    out = tmp_path / "out"
    out.mkdir()
    gpu_check.Check(there, out, 60, 60, "gpu").pack()
    with pytest.raises(gpu_results.Refused, match="outside the store"):
        gpu_results.unpack(out / "gpu_store.tar.gz", tmp_path / "results")


def test_the_command_exits_2_naming_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = _archive(tmp_path / "evil.tar.gz", [_file("run.sh")])
    assert gpu_results.main([str(archive), "--into", str(tmp_path / "into")]) == 2
    assert "refused: 'run.sh': neither mlflow.db nor under artifacts/" in capsys.readouterr().err
