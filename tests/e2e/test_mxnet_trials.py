"""framework=mxnet end to end: trials run by MXNet's own environment (.venv-mxnet), its
parameter-server kvstore with real scheduler, server and worker processes.  The sweep over
all three frameworks in one experiment is tests/e2e/test_data_trials.py's digits sweep."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

pytestmark = pytest.mark.e2e


def kvstore_processes(root) -> list[psutil.Process]:  # noqa: ANN001
    """bench's kvstore roles (and trial workers) started for the runs under ``root``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "bench.trial.distributed.kvstore" in cmd or (
                "bench.trial.worker" in cmd and str(root) in cmd
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_lenet5_learns_digits_with_mxnet(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "framework=mxnet",
        "model=lenet5",
        "data=digits",
        "optimizer.name=adam",
        "optimizer.lr=0.002",
        "batch_size=32",
        "epochs=4",
        "steps_per_epoch=0",
        "warmup_steps=1",
        "breakdown=true",
        "profile=true",
    )
    assert result.returncode == 0, result.output
    (child,) = bench.children()
    metrics = child.data.metrics
    for key in ("time_data_ms", "time_forward_ms", "time_backward_ms", "time_optimizer_ms"):
        assert metrics[key] > 0, key
    assert 50 < metrics["breakdown_sum_pct"] < 200
    assert metrics["op_convolution_ms"] > 0 and metrics["op_convolution_backward_ms"] > 0
    artifacts = {a.path for a in bench.client().list_artifacts(child.info.run_id)}
    assert {"mxnet_profile.json", "operators.csv", "operators.md"} <= artifacts
    assert child.data.tags["bench.status"] == "ok"
    assert child.data.tags["bench.mxnet_version"] == "1.9.1"
    history = bench.client().get_metric_history(child.info.run_id, "test_accuracy")
    assert [m.step for m in history] == [1, 2, 3, 4]
    final = max(history, key=lambda m: m.step).value
    assert final >= 0.90, [m.value for m in history]
    assert child.data.metrics["epochs_completed"] == 4
    assert child.data.params["num_parameters"] == "62006"


def test_two_worker_kvstore_sync_and_async(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "-m",
        "framework=mxnet",
        "model=lenet5",
        "distributed=kvstore_sync,kvstore_async",
        "workers=2",
        "ps=1",
        "batch_size=16",
        "epochs=2",
        "steps_per_epoch=3",
        "warmup_steps=1",
        "breakdown=true",
    )
    assert result.returncode == 0, result.output
    children = bench.children()
    assert {c.data.params["distributed"] for c in children} == {"kvstore_sync", "kvstore_async"}
    client = bench.client()
    for child in children:
        tags, metrics = child.data.tags, child.data.metrics
        assert tags["bench.status"] == "ok", tags.get("bench.error")
        assert (
            tags["bench.kvstore"]
            == {"kvstore_sync": "dist_sync", "kvstore_async": "dist_async"}[
                child.data.params["distributed"]
            ]
        )
        assert sorted(tags["bench.kvstore_ranks"].split(",")) == ["0", "1"]
        run = child.info.run_id
        for key in ("samples_per_s", "worker0_samples_per_s", "worker1_samples_per_s",
                    "time_comm_ms", "ps_push_ms", "ps_pull_ms"):  # fmt: skip
            epochs = [m.step for m in client.get_metric_history(run, key) if m.step > 0]
            assert sorted(epochs) == [1, 2], key  # (step 0: the breakdown's time_comm_ms)
        # Global throughput is every worker's: the sum of their rates.
        total = metrics["worker0_samples_per_s"] + metrics["worker1_samples_per_s"]
        assert metrics["samples_per_s"] == pytest.approx(total)
        assert metrics["worker0_samples_per_s"] > 0 and metrics["worker1_samples_per_s"] > 0
        assert metrics["global_samples_per_s"] == metrics["trial_samples_per_s"] > 0
        assert metrics["time_comm_ms"] == pytest.approx(
            metrics["ps_push_ms"] + metrics["ps_pull_ms"]
        )
        assert metrics["time_forward_ms"] > 0 and metrics["time_backward_ms"] > 0
        comm = client.get_metric_history(run, "time_comm_ms")
        assert [m.step for m in comm if m.step == 0], "the breakdown's communication time"
        artifacts = {a.path for a in client.list_artifacts(run, "kvstore")}
        logs = {f"kvstore/{n}.log" for n in ("scheduler", "server0", "worker0", "worker1")}
        assert logs <= artifacts, artifacts
    assert kvstore_processes(bench.root) == []


def test_ctrl_c_stops_every_kvstore_process(bench) -> None:  # noqa: ANN001
    proc = bench.popen(
        "framework=mxnet",
        "model=resnet18",
        "distributed=kvstore_sync",
        "workers=2",
        "ps=1",
        "batch_size=8",
        "epochs=50",
        "steps_per_epoch=20",
    )
    try:
        deadline = time.monotonic() + 120
        # scheduler + server + 2 workers, and the trial's own process
        while len(kvstore_processes(bench.root)) < 5 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(kvstore_processes(bench.root)) >= 5, "the kvstore job never started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    time.sleep(1)
    assert kvstore_processes(bench.root) == []
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "killed"
