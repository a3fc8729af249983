"""Runs left RUNNING by a bench process that died without closing them (``kill -9``) are
found by the next sweep on the store and marked KILLED, so that nothing stays RUNNING
forever and their trials run again; a live process's runs are left alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.config import BenchConfig
from bench.tracking import OWNER_TAG, MlflowStore
from bench.trial.runtime.processes import owner_label


def dead_owner() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    label = owner_label(proc.pid)
    proc.kill()
    proc.wait()
    return label


@pytest.mark.slow
def test_runs_of_a_dead_bench_process_are_marked_killed(tmp_path: Path) -> None:
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "bench")
    cfg = BenchConfig()
    sweep = store.start_sweep("sweep-dead", {})
    trial = store.start_trial(sweep, cfg, "trial", {})
    live_sweep = store.start_sweep("sweep-live", {})
    gone = dead_owner()
    for run_id in (sweep, trial.run_id):  # type: ignore[attr-defined]
        store.client.set_tag(run_id, OWNER_TAG, gone)
    assert store.reap_orphans() == 2
    client = store.client
    dead_trial = client.get_run(trial.run_id)  # type: ignore[attr-defined]
    assert dead_trial.info.status == "KILLED"
    assert dead_trial.data.tags["bench.status"] == "killed"
    assert "ended without closing it" in dead_trial.data.tags["bench.error"]
    assert client.get_run(sweep).info.status == "KILLED"
    assert client.get_run(live_sweep).info.status == "RUNNING"  # its owner (this test) lives
    assert store.find_ok_run(cfg) is None  # the killed trial is not done
    assert store.reap_orphans() == 0


def test_a_configuration_running_under_another_live_process_is_seen(tmp_path: Path) -> None:
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "bench")
    cfg = BenchConfig()
    sweep = store.start_sweep("sweep-other", {})
    trial = store.start_trial(sweep, cfg, "trial", {})
    assert store.running_elsewhere(cfg) == ""  # this process's own run
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        label = owner_label(other.pid)
        store.client.set_tag(trial.run_id, OWNER_TAG, label)  # type: ignore[attr-defined]
        assert store.running_elsewhere(cfg) == label
        assert store.running_elsewhere(BenchConfig(batch_size=7)) == ""  # another config
    finally:
        other.kill()
        other.wait()
    assert store.running_elsewhere(cfg) == ""  # its owner is gone: an orphan, not an owner
