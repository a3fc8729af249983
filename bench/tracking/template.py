"""An empty sqlite store of this MLflow version, made once and copied for every new store.

MLflow builds a new sqlite store's schema through its whole chain of migrations, seconds of
work (2 to 5 on 2 cores) paid by every new store: the first sweep into a new file, every
test's store.  The result depends on MLflow's version only, so bench makes it once per
version in its cache (``stores/``, a folder only its owner can enter) and a new store starts
as a copy of it.  The copy differs from what MLflow would have made in two things, both
about the Default experiment that MLflow adds and bench never uses: its creation time is the
copy's, and its artifact location is the new store's own ``artifacts/0`` (MLflow's would be
``mlruns/0`` under whatever folder the command ran from).  tests/unit/test_store_template.py
holds a copy to MLflow's own store, table by table.

A template that is not a regular file of this user that no one else can write (another
user's may be planted in a shared cache), that sqlite cannot read, or that holds anything but
one migration version and the Default experiment, is made again; where the cache cannot hold
one, MLflow builds the store itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.core import paths

DEFAULT_EXPERIMENT_ID = 0


def template_path() -> Path:
    import mlflow
    import sqlalchemy

    name = f"mlflow-{mlflow.__version__}-sqlalchemy-{sqlalchemy.__version__}.db"
    return paths.cache_dir() / "stores" / name


def _sound(db: Path) -> bool:
    """Whether ``db`` is this user's own empty store: one migration version, the Default
    experiment alone, no run."""
    if not paths.owned_private(db):
        return False
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        versions = con.execute("SELECT version_num FROM alembic_version").fetchall()
        experiments = con.execute("SELECT experiment_id, name FROM experiments").fetchall()
        runs = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return False
    finally:
        con.close()
    return len(versions) == 1 and experiments == [(DEFAULT_EXPERIMENT_ID, "Default")] and runs == 0


def template(build: Callable[[Path], None]) -> Path | None:
    """This MLflow version's empty store, made with ``build`` (which makes a store at the
    path it is given) where the cache has none; None where it cannot be had."""
    path = template_path()
    if _sound(path):
        return path
    try:
        paths.private_dir(path.parent)
        spare = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            build(spare)
            os.chmod(spare, 0o600)
            os.replace(spare, path)  # whole or not at all; a concurrent maker's is as good
        finally:
            for leftover in (spare, spare.with_name(spare.name + "-journal")):
                leftover.unlink(missing_ok=True)
    except OSError:
        return None
    return path if _sound(path) else None


def copy_into(db: Path, build: Callable[[Path], None], artifacts: str) -> bool:
    """Make ``db`` (a path that does not exist yet) a new store as a copy of the template,
    its Default experiment's artifacts under ``artifacts`` (the store's artifact root, a
    URI); False, with nothing at ``db``, where there is no sound template (the caller then
    builds the store itself)."""
    source = template(build)
    if source is None:
        return False
    try:
        shutil.copyfile(source, db)
        now = int(time.time() * 1000)
        location = f"{artifacts.rstrip('/')}/{DEFAULT_EXPERIMENT_ID}"
        with contextlib.closing(sqlite3.connect(db)) as con, con:
            con.execute(
                "UPDATE experiments SET artifact_location = ?, creation_time = ?, "
                "last_update_time = ? WHERE experiment_id = ?",
                (location, now, now, DEFAULT_EXPERIMENT_ID),
            )
    except (OSError, sqlite3.Error):
        db.unlink(missing_ok=True)
        return False
    return True
