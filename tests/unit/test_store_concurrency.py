"""A new sqlite store opened by several processes at once (two sweeps started together, a
Slurm job and its submitter): every one of them opens it, and the schema is made once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

OPEN = """
import sys, time
from bench.tracking import MlflowStore
start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
store = MlflowStore(sys.argv[1], "bench")
print(store.experiment_id)
"""


def test_processes_opening_a_new_store_together_all_get_it(tmp_path: Path) -> None:
    import time

    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    start = time.time() + 8  # after every process has imported MLflow
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPEN, uri, str(start)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    failed = [err[-2000:] for p, (_, err) in zip(procs, outs, strict=True) if p.returncode]
    assert not failed, failed[0]
    assert len({out.strip() for out, _ in outs}) == 1  # one experiment, found by all
