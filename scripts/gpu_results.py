"""Unpack a store that ``scripts/gpu_check.py --out`` packed on another machine (its
``gpu_store.tar.gz``: an MLflow sqlite database and its artifacts) into a folder here, so
that ``bench report`` and the MLflow UI read it.

The archive came from another machine and is not trusted: only regular files and folders
named ``mlflow.db`` or under ``artifacts/`` are taken (no links, devices, absolute names or
``..``), within limits on count and size; the database must be an SQLite file with MLflow's
tables.  Its artifact locations name the folder the store had there
(``file:///tmp/gstore/artifacts``); they are moved to the folder here, and a run whose
artifacts are outside that folder is refused rather than followed.

    python scripts/gpu_results.py gpu_store.tar.gz --into gpu-results/
    bench report --uri sqlite:///gpu-results/mlflow.db --out gpu-results/report
    mlflow ui --backend-store-uri sqlite:///gpu-results/mlflow.db
"""

from __future__ import annotations

import argparse
import posixpath
import sqlite3
import sys
import tarfile
from pathlib import Path, PurePosixPath

MAX_MEMBERS = 20_000
MAX_BYTES = 2 * 2**30  # unpacked, all together
SQLITE_HEADER = b"SQLite format 3\x00"


class Refused(ValueError):
    """The archive, or the database in it, is not what gpu_check packs."""


def _member_ok(member: tarfile.TarInfo) -> str:
    """Why a member is refused ('' if it is taken)."""
    name = PurePosixPath(member.name)
    if name.is_absolute() or ".." in name.parts:
        return f"{member.name!r}: a name outside the archive's folder"
    if not (member.isfile() or member.isdir()):
        return f"{member.name!r}: not a regular file or folder (a link or device)"
    top = name.parts[0] if name.parts else ""
    if top not in ("mlflow.db", "artifacts"):
        return f"{member.name!r}: neither mlflow.db nor under artifacts/"
    return ""


def unpack(archive: Path, into: Path) -> Path:
    """Check and unpack ``archive`` into the empty (or new) folder ``into``; the database."""
    if into.exists() and any(into.iterdir()):
        raise Refused(f"{into} is not empty")
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "r:gz") as tar:
        members = []
        total = 0
        for member in tar:
            if len(members) >= MAX_MEMBERS:
                raise Refused(f"more than {MAX_MEMBERS} members")
            why = _member_ok(member)
            if why:
                raise Refused(why)
            total += member.size
            if total > MAX_BYTES:
                raise Refused(f"more than {MAX_BYTES / 2**30:.0f} GiB unpacked")
            members.append(member)
        tar.extractall(into, members=members, filter="data")
    db = into / "mlflow.db"
    if not db.is_file() or db.read_bytes()[:16] != SQLITE_HEADER:
        raise Refused("mlflow.db is missing or not an SQLite database")
    relocate(db, into)
    return db


def _normal(path: str) -> bool:
    """Whether ``path`` is absolute and already in normal form (``posixpath.normpath``)."""
    return path.startswith("/") and posixpath.normpath(path) == path.rstrip("/")


def relocate(db: Path, into: Path) -> int:
    """Point the database's artifact locations at ``into``; the rows changed.  The store's
    old folder is the one its experiments' ``.../artifacts`` locations share; a location
    elsewhere is refused."""
    here = into.resolve()
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"experiments", "runs"} <= tables:
            raise Refused("mlflow.db has no MLflow tables (experiments, runs)")
        locations = [r[0] for r in conn.execute("SELECT artifact_location FROM experiments")]
        roots = {
            str(PurePosixPath(loc.removeprefix("file://")).parent)
            for loc in locations
            if loc.startswith("file:///")
            and loc.rstrip("/").endswith("/artifacts")
            and _normal(loc.removeprefix("file://"))
        }
        if len(roots) > 1:
            raise Refused(f"the experiments' artifacts are in several folders: {sorted(roots)}")
        if not roots:
            return 0
        (old,) = roots
        changed = 0

        def moved(value: str) -> str:
            plain = value.removeprefix("file://")
            return (
                ("file://" if value.startswith("file://") else "") + str(here) + plain[len(old) :]
            )

        def inside(value: str) -> bool:
            """Under the old folder once normalised (no ``..``, ``.`` or ``//`` that would
            take ``artifacts/../..`` out of it), and still under the new one when moved."""
            plain = value.removeprefix("file://")
            if not _normal(plain) or not (plain == old or plain.startswith(old + "/")):
                return False
            return Path(moved(value).removeprefix("file://")).resolve().is_relative_to(here)

        # An experiment MLflow made itself (Default, id 0) has its folder beside where its
        # process ran, not in the store; no run of bench's is there: it gets one here.
        for experiment_id, value in conn.execute(
            "SELECT experiment_id, artifact_location FROM experiments"
        ).fetchall():
            value = str(value or "")
            new = moved(value) if inside(value) else str(here / "mlruns" / str(int(experiment_id)))
            conn.execute(
                "UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                (new, experiment_id),
            )
            changed += 1
        for (value,) in conn.execute("SELECT DISTINCT artifact_uri FROM runs").fetchall():
            value = str(value or "")
            if not inside(value):
                raise Refused(f"runs.artifact_uri {value!r} is outside the store ({old})")
            cursor = conn.execute(
                "UPDATE runs SET artifact_uri = ? WHERE artifact_uri = ?", (moved(value), value)
            )
            changed += cursor.rowcount
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("archive", type=Path)
    parser.add_argument("--into", type=Path, required=True, help="an empty or new folder")
    args = parser.parse_args(argv)
    try:
        db = unpack(args.archive, args.into)
    except (Refused, tarfile.TarError, OSError, sqlite3.Error) as exc:
        print(f"gpu_results: {args.archive} refused: {exc}", file=sys.stderr)
        return 2
    print(f"gpu_results: the store is at sqlite:///{db.resolve()}")
    print(f"  bench report --uri sqlite:///{db.resolve()} --out {args.into / 'report'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
