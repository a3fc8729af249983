"""A real MLflow tracking server that goes away in the middle of a sweep loses no result."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.e2e


def start_server(root: Path, port: int, store: str = "") -> subprocess.Popen[bytes]:
    """``mlflow server`` on ``port``, over ``store`` (a new sqlite file under ``root`` if
    not given)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            store or f"sqlite:///{root}/server.db",
            "--artifacts-destination",
            str(root / "server-artifacts"),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "server.log", "ab"),  # noqa: SIM115
        start_new_session=True,
        # Without MLflow's job runner (8 huey consumer processes per server, for GenAI
        # jobs bench never submits): they cost a server's start a few CPU-seconds.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return proc
        except OSError:
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("mlflow server did not start: " + (root / "server.log").read_text()[-2000:])


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_server_lost_mid_sweep_then_synced(bench) -> None:  # noqa: ANN001
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    server = start_server(bench.root, port)
    try:
        sweep = bench.popen(
            "-m",
            "steps_per_epoch=2,3",
            "framework=torch",
            "model=resnet50",
            *[t for t in TINY if not t.startswith("steps")],
            f"tracking.uri={uri}",
        )
        assert sweep.stderr is not None
        for line in sweep.stderr:  # wait until the first trial is logged
            if "->" in line:
                break
        stop_server(server)
        out, err = sweep.communicate(timeout=300)
        assert sweep.returncode == 0, out + err
        assert f"logging failed; results are kept in {bench.state / 'spool'}" in err
        assert len(bench.spooled()) == 1
        server = start_server(bench.root, port)
        sync = subprocess.run(
            [sys.executable, "-m", "bench.sync"],
            cwd=bench.root,
            capture_output=True,
            text=True,
            timeout=120,
            env=bench.env,
        )
        assert sync.returncode == 0, sync.stderr
        assert "synced 1" in sync.stdout
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name("bench")
        runs = client.search_runs([exp.experiment_id])
        children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
        parents = [r for r in runs if r.data.tags.get("bench.sweep") == "true"]
        assert len(parents) == 1 and len(children) == 2
        assert {c.data.params["steps_per_epoch"] for c in children} == {"2", "3"}
        assert all(c.data.tags["bench.status"] == "ok" for c in children)
        assert all(r.info.status == "FINISHED" for r in runs), [r.info.status for r in runs]
        for child in children:
            history = client.get_metric_history(child.info.run_id, "samples_per_s")
            assert [m.step for m in history] == [1, 2]
    finally:
        stop_server(server)
