"""Artifact files a trial writes (plots, traces, profile folders) reach MLflow, also by way
of the spool, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import tracking
from bench.core.config import BenchConfig
from bench.core.result import OK, TrialResult

FILES = {
    "telemetry_host.csv": b"time_s,epoch\n0.1000,1\n",
    "telemetry_host.png": bytes(range(256)) * 4,  # not text
    "tf_profile/plugins/profile/2026_01_01/host.xplane.pb": b"\x00\xff\x10binary",
}


@pytest.mark.slow
def test_files_and_folders_survive_the_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workdir = tmp_path / "trial"
    for name, data in FILES.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        (workdir / name).write_bytes(data)
    monkeypatch.setenv("BENCH_STATE_DIR", str(tmp_path / "state"))  # where the spool lives
    spool = tracking.Spool("http://127.0.0.1:9", "bench", "unreachable in this test")
    run = spool.start_trial(spool.start_sweep("sweep", {}), BenchConfig(), "trial", {})
    result = TrialResult(OK, "tf", "resnet50", "train")
    result.files = ["telemetry_host.csv", "telemetry_host.png", "tf_profile"]
    run.finish(result, [workdir / name for name in result.files])

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert tracking.spooled()[0].parent == tracking.spool_dir("http://127.0.0.1:9")
    assert tracking.sync_spool(None, uri) == 1
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("bench")
    (child,) = [
        r
        for r in client.search_runs([experiment.experiment_id])
        if "mlflow.parentRunId" in r.data.tags
    ]
    for name, data in FILES.items():
        local = client.download_artifacts(child.info.run_id, name, str(tmp_path / "back"))
        assert Path(local).read_bytes() == data, name


def test_a_spooled_sweep_gets_its_status_and_summary_once_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep's end (status and summary table) waits in the spool with its trials; the
    sync closes the sweep's run with them, after the trials, not before."""
    monkeypatch.setenv("BENCH_STATE_DIR", str(tmp_path / "state"))
    spool = tracking.Spool("http://127.0.0.1:9", "bench", "unreachable in this test")
    sweep = spool.start_sweep("sweep", {"bench.sweep_overrides": "model=lenet5"})
    spool.start_trial(sweep, BenchConfig(), "trial", {}).finish(
        TrialResult(OK, "torch", "lenet5", "train"), []
    )
    spool.end_sweep(sweep, ok=False, killed=True, summary="the summary table")
    assert len(tracking.spooled()) == 1 and len(tracking.spooled_ends()) == 1

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert tracking.sync_spool(None, uri) == 1
    assert not tracking.spooled() and not tracking.spooled_ends()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("bench").experiment_id])
    (parent,) = [r for r in runs if "bench.sweep" in r.data.tags]
    assert parent.info.status == "KILLED"
    assert "the summary table" in parent.data.tags["mlflow.note.content"]
    local = client.download_artifacts(parent.info.run_id, "summary.txt", str(tmp_path / "s"))
    assert Path(local).read_text() == "the summary table"
