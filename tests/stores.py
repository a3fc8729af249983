"""An empty sqlite store for a test, made as bench makes one (``bench.tracking.store.
create_store``: a copy of this MLflow version's empty store, built once per cache), not by
MLflow's migrations on first use (2-5 s a store on 2 cores)."""

from __future__ import annotations

from pathlib import Path


def new_store(db: Path) -> str:
    """Make the empty store ``db``; its URI."""
    from bench.tracking.store import create_store

    db.parent.mkdir(parents=True, exist_ok=True)
    create_store(db)
    return f"sqlite:///{db}"
