"""A new sqlite store opened by several processes at once (two sweeps started together, a
Slurm job and its submitter): every one of them opens it, and the schema is made once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Each process imports MLflow, says it is ready, and waits for the parent's go (a file) so
# that all of them open the store within a millisecond or two of each other.
OPEN = """
import os, sys, time
from bench.tracking import MlflowStore
ready, go = sys.argv[2], sys.argv[3]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
store = MlflowStore(sys.argv[1], "bench")
print(store.experiment_id)
"""


@pytest.mark.slow
def test_processes_opening_a_new_store_together_all_get_it(tmp_path: Path) -> None:
    import time

    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{i}" for i in range(4)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, uri, str(r), str(go)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in ready
    ]
    deadline = time.monotonic() + 120
    while not all(r.exists() for r in ready):
        assert all(p.poll() is None for p in procs), "a process ended before opening the store"
        assert time.monotonic() < deadline, "the processes did not import MLflow in 120 s"
        time.sleep(0.01)
    go.touch()
    outs = [p.communicate(timeout=120) for p in procs]
    failed = [err[-2000:] for p, (_, err) in zip(procs, outs, strict=True) if p.returncode]
    assert not failed, failed[0]
    assert len({out.strip() for out, _ in outs}) == 1  # one experiment, found by all
