"""Ctrl-C at many points of a new store's creation, with real signals through ``python -m
bench`` (issue 51): every one ends the sweep with bench's one line and exit 130 (never -2,
never 0 with the interrupt swallowed, never a traceback), and leaves no store or the whole
one, which MLflow then opens."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from tests.conftest import TINY, Bench

pytestmark = pytest.mark.e2e

# Seconds after the store's temporary file appears (create_store's first write): while the
# template is copied and renamed, while MLflow's client opens it and the experiment is made,
# and as the sweep's parent run starts.
DELAYS_S = (0.0, 0.003, 0.01, 0.03, 0.1, 0.3)


def _interrupt_once_the_store_is_being_made(bench: Bench, delay_s: float) -> tuple[int, str]:
    proc = bench.popen("-m", "framework=torch", "model=lenet5", *TINY)
    try:
        deadline = time.monotonic() + 120
        while not any(p.name.startswith(".mlflow.db.creating-") for p in bench.root.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, "no store was begun"
            time.sleep(0.0005)
        time.sleep(delay_s)
        os.kill(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


@pytest.mark.parametrize("delay_s", DELAYS_S)
def test_ctrl_c_while_the_store_is_made_ends_130_and_leaves_it_whole_or_absent(
    tmp_path: Path, delay_s: float
) -> None:
    bench = Bench(tmp_path)
    code, err = _interrupt_once_the_store_is_being_made(bench, delay_s)
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    if bench.db.exists():  # the whole store: MLflow's tables, and MLflow opens it
        with sqlite3.connect(bench.db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master")}
        assert {"experiments", "runs", "alembic_version"} <= tables
        bench.client().search_experiments()
        # No trial ran; a parent run begun before the interrupt is closed, not left RUNNING.
        assert bench.children() == []
        assert all(p.info.status != "RUNNING" for p in bench.parents())
