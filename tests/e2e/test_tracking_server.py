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
from typing import Any

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
            # lenet5: the server goes down while the second trial's worker is still starting
            # (importing torch takes seconds), whatever the model; a bigger one only costs.
            "model=lenet5",
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
            [sys.executable, "-m", "bench.cli.sync"],
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


def _auth_proxy(upstream: int, user: str, password: str) -> Any:
    """A local proxy in front of an MLflow server that asks for basic auth, as a site's
    reverse proxy would (MLflow's own auth app needs mlflow[auth])."""
    import base64
    import http.server
    import threading
    import urllib.error

    want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Proxy(http.server.BaseHTTPRequestHandler):
        def _forward(self) -> None:
            if self.headers.get("Authorization") != want:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
                self.end_headers()
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() == "content-type"}
            request = urllib.request.Request(
                f"http://127.0.0.1:{upstream}{self.path}", body or None, headers,
                method=self.command,
            )  # fmt: skip
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    status, data, kind = answer.status, answer.read(), answer.headers
            except urllib.error.HTTPError as exc:
                status, data, kind = exc.code, exc.read(), exc.headers
            self.send_response(status)
            self.send_header("Content-Type", kind.get("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_credentials_in_the_tracking_uri_reach_the_server_and_nowhere_else(bench) -> None:  # noqa: ANN001
    """Issue 29, finding 4: bench said "Name or service not known" of a server that was up,
    spooled everything, and the password went to stderr, the spool files and, after sync,
    the tracking.uri param."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = start_server(bench.root, port)
    proxy = _auth_proxy(port, "bench-user", "s3cret-pw")
    try:
        front = proxy.server_address[1]
        uri = f"http://bench-user:s3cret-pw@127.0.0.1:{front}"
        done = bench.run(f"tracking.uri={uri}", "model=lenet5", "framework=torch", *TINY)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "s3cret-pw" not in done.stdout + done.stderr
        assert not bench.spooled()  # logged to the server, not spooled
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=f"http://127.0.0.1:{port}")  # behind the proxy
        (experiment,) = [e for e in client.search_experiments() if e.name == "bench"]
        runs = client.search_runs([experiment.experiment_id])
        assert len(runs) == 2  # the sweep and its trial
        for run in runs:
            logged = " ".join([*run.data.params.values(), *run.data.tags.values()])
            assert "s3cret-pw" not in logged
        trial = next(r for r in runs if "mlflow.parentRunId" in r.data.tags)
        assert trial.data.params["tracking.uri"] == f"http://127.0.0.1:{front}"
        # Without them, bench says what the server wants and keeps the results in the
        # spool; bench sync takes the credentials from the environment, or says they lack.
        plain = f"http://127.0.0.1:{front}"
        done = bench.run(f"tracking.uri={plain}", "model=lenet5", "framework=torch", *TINY)
        assert "asks for credentials (HTTP 401)" in done.stderr and bench.spooled()
        sync = [sys.executable, "-m", "bench.cli.sync"]
        refused = subprocess.run(sync, env=bench.env, capture_output=True, text=True)
        assert refused.returncode == 1 and "none were given" in refused.stderr
        env = {**bench.env, "MLFLOW_TRACKING_USERNAME": "bench-user",
               "MLFLOW_TRACKING_PASSWORD": "s3cret-pw"}  # fmt: skip
        synced = subprocess.run(sync, env=env, capture_output=True, text=True)
        assert synced.returncode == 0, synced.stderr[-2000:]
        assert not bench.spooled() and "s3cret-pw" not in synced.stdout + synced.stderr
    finally:
        proxy.shutdown()
        proxy.server_close()
        stop_server(server)
