"""Sweeps started together on one store: 4 sweeps of 6 tiny trials each (in-process
trials, so the load is the store's), on a new sqlite store and on an MLflow server on
127.0.0.1.  Every run is recorded once: none lost, none duplicated, no parent left open."""

from __future__ import annotations

import socket
from collections import Counter
from typing import Any

import pytest

from tests.conftest import Bench
from tests.e2e.test_tracking_server import start_server, stop_server

pytestmark = pytest.mark.e2e

SWEEPS, TRIALS = 4, 6


def sweep_together(bench: Bench, uri: str) -> list[Any]:
    procs = [
        bench.popen(
            "-m",
            f"seed={i}",
            f"batch_size={','.join(str(b) for b in range(1, TRIALS + 1))}",
            "framework=torch",
            "model=lenet5",
            "launcher=inline",
            "telemetry.enabled=false",
            "epochs=1",
            "steps_per_epoch=1",
            "warmup_steps=0",
            f"tracking.uri={uri}",
            f"hydra.sweep.dir={bench.root}/multirun/{i}",
        )
        for i in range(SWEEPS)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, out + err
        assert f"{TRIALS} trials: {TRIALS} ok" in out
    return procs


def check_store(client: Any) -> None:
    exp = client.get_experiment_by_name("bench")
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("bench.sweep") == "true"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == SWEEPS and all(p.info.status == "FINISHED" for p in parents)
    assert len(children) == SWEEPS * TRIALS  # none lost
    hashes = Counter(c.data.tags["bench.config_hash"] for c in children)
    assert len(hashes) == SWEEPS * TRIALS and set(hashes.values()) == {1}  # none duplicated
    per_parent = Counter(c.data.tags["mlflow.parentRunId"] for c in children)
    assert set(per_parent.values()) == {TRIALS}
    assert all(c.data.tags["bench.status"] == "ok" for c in children)


def test_four_sweeps_on_one_new_sqlite_store(bench: Bench) -> None:
    sweep_together(bench, bench.uri)
    check_store(bench.client())


def test_four_sweeps_on_one_tracking_server(bench: Bench) -> None:
    from mlflow.tracking import MlflowClient

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = start_server(bench.root, port)
    try:
        sweep_together(bench, f"http://127.0.0.1:{port}")
        check_store(MlflowClient(tracking_uri=f"http://127.0.0.1:{port}"))
    finally:
        stop_server(server)
