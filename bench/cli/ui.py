"""``bench ui``: MLflow's UI on the store bench used last (or ``--uri``), opened on the
latest sweep's runs table in the model-training view.

MLflow 3.17's UI picks its GenAI or model-training view per browser, not per experiment:
the experiment page reads the ``workflowType`` query parameter, else the browser's local
storage (``mlflow.workflowType``), else ``genai``; its feature flag that makes the global
switch win is on in that build, so the experiment's ``mlflow.experimentKind`` tag does not
decide (mlflow/server/js, ``workflowType`` in main.*.js).  No setting a store can hold
chooses it, so the link bench prints carries ``?workflowType=machine_learning``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from bench.core.config import TrackingConfig

TRAINING_VIEW = "machine_learning"  # MLflow's workflowType for the model-training view
WAIT_S = 180.0  # MLflow's UI took about 50 s to answer on a shared 2-core machine


def runs_link(base: str, experiment_id: str, sweep_id: str = "", view: str = "") -> str:
    """The runs table of an experiment in the training view; with ``sweep_id``, its
    parent run's children only (MLflow's search filter on the parent's tag); with ``view``,
    opened on that saved view (bench's columns: :mod:`bench.tracking.views`)."""
    query = {"workflowType": TRAINING_VIEW}
    if view:  # the view holds the sweep's filter; one in the link too would override it
        query["viewStateShareKey"] = view
    elif sweep_id:
        query["searchFilter"] = f"tags.mlflow.parentRunId = '{sweep_id}'"
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?" + urllib.parse.urlencode(
        query, quote_via=urllib.parse.quote
    )


def wait_until_up(url: str, limit_s: float = WAIT_S, sleep: float = 1.0) -> bool:
    """Whether ``url`` answered within ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - our own server
                if answer.status < 500:
                    return True
        except OSError:
            pass
        time.sleep(sleep)
    return False


def latest(uri: str, experiment: str | None) -> tuple[str, str, str]:
    """The experiment's id, its latest sweep's parent run id ('' without one) and the id of
    bench's saved view of that sweep's runs, written to the experiment ('' where the store
    refused it: the link then shows MLflow's own columns)."""
    from bench.tracking.records import _read_client
    from bench.tracking.views import save_runs_view

    client = _read_client(uri)
    found = client.get_experiment_by_name(experiment or TrackingConfig.experiment)
    if found is None:
        raise LookupError(f"no experiment {experiment or TrackingConfig.experiment!r} in {uri}")
    parents = client.search_runs(
        [found.experiment_id],
        filter_string="tags.`bench.overrides` != ''",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    sweep_id = parents[0].info.run_id if parents else ""
    label = (parents[0].info.run_name or sweep_id) if parents else "every run"
    try:
        view = save_runs_view(client, found.experiment_id, sweep_id, label)
    except Exception:  # noqa: BLE001 - a read-only store still gets its link
        view = ""
    return found.experiment_id, sweep_id, view


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    from bench.tracking.recent import store_or_last

    parser = argparse.ArgumentParser(
        prog="bench ui",
        description="MLflow's UI on bench's store, opened on the latest sweep's runs table in "
        "the model-training view.",
    )
    parser.add_argument("--uri", default=None, help="the store (default: the last sweep's)")
    parser.add_argument("--experiment", default=None, help="default: bench")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--no-open", action="store_true", help="print the link only")
    args = parser.parse_args(argv)
    uri, why = store_or_last(args.uri, TrackingConfig.uri)
    why = "--uri" if args.uri else why
    try:
        experiment_id, sweep_id, view = latest(uri, args.experiment)
    except LookupError as exc:
        print(f"bench ui: {exc}", file=sys.stderr)
        return 2
    base = f"http://127.0.0.1:{args.port}"
    signal.signal(signal.SIGTERM, _stop)  # the server is stopped with bench ui, never left
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
         "--host", "127.0.0.1", "--port", str(args.port)],
        # Without MLflow's job runner (huey consumers for GenAI jobs bench never submits):
        # they cost the UI's start seconds of CPU.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )  # fmt: skip
    try:
        print(f"bench ui: starting MLflow's UI on {uri} ({why})", file=sys.stderr)
        if not wait_until_up(base):
            print(
                f"bench ui: MLflow's UI did not answer at {base} in {WAIT_S:.0f} s", file=sys.stderr
            )
            return 1
        link = runs_link(base, experiment_id, sweep_id, view)
        print(link)
        if not args.no_open and (os.environ.get("DISPLAY") or sys.platform == "darwin"):
            import webbrowser

            webbrowser.open(link)
        return server.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
