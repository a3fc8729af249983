"""Runs that look native in MLflow's UI (bench.tracking.native), on a real sqlite store: the
User and Source columns, the Dataset column, and the sampled telemetry in the System
metrics tab; the trial's params and tags still all arrive (the client splits the batch)."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import pytest

from bench.core.config import BenchConfig, flatten, to_dict
from bench.core.identity import logged_params
from bench.core.result import OK, TrialResult
from bench.tracking.store import MlflowStore


@pytest.mark.slow
def test_a_trial_run_has_a_user_a_source_a_dataset_and_system_metrics(tmp_path: Path) -> None:
    store = MlflowStore(f"sqlite:///{tmp_path / 'mlflow.db'}", "bench")
    sweep = store.start_sweep("sweep", {})
    cfg = BenchConfig()
    run = store.start_trial(sweep, cfg, "trial", {})
    host = tmp_path / "telemetry_host.csv"
    host.write_text("time_s,epoch,cpu_time_s,rss_mb\n0.0,,0.0,300.0\n1.0,,1.0,310.0\n")
    result = TrialResult(OK, "torch", "resnet50", "train")
    result.marks["trial_start"] = 1_700_000_000.0
    run.finish(result, [host])

    got = store.client.get_run(run.run_id)
    assert got.info.user_id == getpass.getuser()
    assert got.data.tags["mlflow.source.type"] == "LOCAL"
    assert got.data.tags["mlflow.source.name"] == "bench"
    assert store.client.get_run(sweep).info.user_id == getpass.getuser()
    (logged,) = got.inputs.dataset_inputs
    assert logged.dataset.name == "synthetic-32px-10c"
    assert logged.dataset.source_type == "code"
    assert json.loads(logged.dataset.source)["generator"] == "bench.trial.data.synthetic"
    assert [(t.key, t.value) for t in logged.tags] == [("mlflow.data.context", "train")]
    history = store.client.get_metric_history(run.run_id, "system/process_memory_rss_megabytes")
    assert [(m.value, m.step, m.timestamp) for m in history] == [
        (300.0, 0, 1_700_000_000_000), (310.0, 1, 1_700_000_001_000)]  # fmt: skip
    logged = set(logged_params(flatten(to_dict(cfg))))
    assert set(got.data.params) == logged | {"num_parameters"}
    # resnet50 under the process launcher with SGD on synthetic data:
    assert not any(k.startswith(("launcher.docker.", "model.seq_len")) for k in logged)
    assert {"optimizer.momentum", "model.name", "launcher.name", "batch_size"} <= logged
    assert "data.root" not in logged and len(logged) < len(flatten(to_dict(cfg))) - 10


def test_the_report_groups_runs_logged_with_every_key_and_with_the_relevant_ones() -> None:
    """Runs logged before the pruning (every key) and after it are one configuration."""
    import dataclasses

    from bench.report.trials import to_trial
    from bench.tracking import RunRecord

    cfg = dataclasses.replace(
        BenchConfig(), model=dataclasses.replace(BenchConfig().model, name="vgg16")
    )
    every = {k: str(v) for k, v in flatten(to_dict(cfg)).items()}
    old = RunRecord("1" * 32, "old", 0, every, {"bench.status": "ok"}, {})
    new = RunRecord("2" * 32, "new", 0, logged_params(every), {"bench.status": "ok"}, {})
    assert to_trial(old).config == to_trial(new).config
    adam = logged_params({**every, "optimizer.name": "adam", "launcher.name": "docker"})
    assert "optimizer.momentum" not in adam and "launcher.docker.image" in adam


def test_the_experiment_opens_as_model_training_in_the_ui(tmp_path: Path) -> None:
    """MLflow 3's UI opens an experiment by its ``mlflow.experimentKind`` tag; bench's is
    a model-training one (its runs table), also when an older bench made it untagged."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    store = MlflowStore(uri, "bench")
    tags = store.client.get_experiment(store.experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"

    old = store.client.create_experiment("made-before", artifact_location=str(tmp_path / "a"))
    assert "mlflow.experimentKind" not in store.client.get_experiment(old).tags
    again = MlflowStore(uri, "made-before")
    assert again.experiment_id == old
    assert again.client.get_experiment(old).tags["mlflow.experimentKind"] == (
        "custom_model_development"
    )
