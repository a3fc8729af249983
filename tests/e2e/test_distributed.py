"""Tier 3: distributed trials through ``python -m bench`` on CPU processes (2 workers)."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from tests.conftest import TINY

pytestmark = pytest.mark.e2e
SMALL = ["model=lenet5", *TINY]


def dist_processes(root) -> list[psutil.Process]:  # noqa: ANN001
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if (
            "bench.trial.distributed" in cmd
            and str(root) in cmd
            or "tf_server" in cmd
            and str(root) in cmd
        ):
            found.append(proc)
    return found


def only_trial(bench):  # noqa: ANN001, ANN201
    (child,) = bench.children()
    return child


def wait_for_rank(root, within_s: float, **env: str) -> psutil.Process | None:  # noqa: ANN001
    """The first rank process of the trial under ``root`` whose environment has ``env``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        for p in dist_processes(root):
            try:
                if "bench.trial.distributed.rank" in " ".join(p.cmdline()) and all(
                    p.environ().get(k) == v for k, v in env.items()
                ):
                    return p
            except psutil.Error:
                continue
        time.sleep(0.5)
    return None


def assert_global_and_per_worker(bench, run, workers: int = 2) -> None:  # noqa: ANN001
    assert run.data.tags["bench.status"] == "ok", run.data.tags.get("bench.error")
    client = bench.client()
    metrics = run.data.metrics
    rates = [metrics[f"worker{i}_samples_per_s"] for i in range(workers)]
    assert all(r > 0 for r in rates)
    assert metrics["global_samples_per_s"] == metrics["trial_samples_per_s"] > 0
    for i in range(workers):  # logged per epoch under the one run
        history = client.get_metric_history(run.info.run_id, f"worker{i}_samples_per_s")
        assert sorted(m.step for m in history) == [1, 2]
    # The global epoch counts every worker's samples, over the slowest worker's window.
    rate, window = (
        client.get_metric_history(run.info.run_id, key)[-1].value
        for key in ("samples_per_s", "epoch_time_s")
    )
    per_worker = int(run.data.params["batch_size"]) * int(run.data.params["steps_per_epoch"])
    assert rate * window == pytest.approx(workers * per_worker)
    assert all(per_worker / r <= window * (1 + 1e-9) for r in rates)


def test_ddp_two_workers_logs_global_per_worker_comm_and_scaling(bench) -> None:  # noqa: ANN001
    got = bench.run("-m", "distributed=ddp", "workers=1,2", "breakdown=true", *SMALL)
    assert got.returncode == 0, got.output
    runs = {r.data.params["workers"]: r for r in bench.children()}
    two = runs["2"]
    # The strategy's param is its name, as before it was a config group; its settings beside.
    assert two.data.params["distributed"] == "ddp"
    assert two.data.params["distributed.backend"] == "auto"
    assert_global_and_per_worker(bench, two)
    assert two.data.metrics["time_comm_ms"] >= 0
    assert two.data.metrics["time_step_ms"] > 0
    # Scaling efficiency against the one-worker ddp run of the same config.
    assert two.data.tags["bench.scaling_baseline_run"] == runs["1"].info.run_id
    one_rate = runs["1"].data.metrics["trial_samples_per_s"]
    assert two.data.metrics["scaling_efficiency"] == pytest.approx(
        two.data.metrics["trial_samples_per_s"] / (2 * one_rate)
    )
    assert not dist_processes(bench.root)


def test_mirrored_on_two_logical_cpu_devices(bench) -> None:  # noqa: ANN001
    got = bench.run(
        "framework=tf",
        "distributed=mirrored",
        "distributed.all_reduce=one_device",
        "workers=2",
        *SMALL,
    )
    assert got.returncode == 0, got.output
    run = only_trial(bench)
    assert_global_and_per_worker(bench, run)
    assert run.data.params["distributed.all_reduce"] == "one_device"


@pytest.mark.parametrize("strategy", ["jax_dp", "jax_distributed"])
def test_jax_on_two_host_devices(bench, strategy: str) -> None:  # noqa: ANN001
    """jax_dp: 2 host devices of one process; jax_distributed: 2 processes of one each.
    breakdown=true: the jax breakdown's phases and the exposed communication beside them."""
    got = bench.run(
        "framework=jax", f"distributed={strategy}", "workers=2", "breakdown=true", *SMALL
    )
    assert got.returncode == 0, got.output
    run = only_trial(bench)
    assert_global_and_per_worker(bench, run)
    assert run.data.params["distributed"] == strategy
    metrics = run.data.metrics
    assert metrics["time_comm_ms"] >= 0 and metrics["time_local_step_ms"] > 0
    assert metrics["time_forward_ms"] > 0 and "bench.breakdown_method" in run.data.tags
    assert not dist_processes(bench.root)


def test_multiworker_two_processes(bench) -> None:  # noqa: ANN001
    got = bench.run(
        "framework=tf", "distributed=multiworker", "workers=2", "breakdown=true", *SMALL
    )
    assert got.returncode == 0, got.output
    run = only_trial(bench)
    assert_global_and_per_worker(bench, run)
    assert run.data.metrics["time_comm_ms"] > 0


def test_tf_model_parallel_on_two_logical_cpu_devices(bench) -> None:  # noqa: ANN001
    alone = bench.run("framework=tf", *SMALL)
    assert alone.returncode == 0, alone.output
    got = bench.run("framework=tf", "distributed=model_parallel", "workers=2", *SMALL)
    assert got.returncode == 0, got.output
    run = next(r for r in bench.children() if r.data.params["distributed"] == "model_parallel")
    assert run.data.tags["bench.status"] == "ok", run.data.tags.get("bench.error")
    metrics = run.data.metrics
    stages = [metrics["stage0_parameters"], metrics["stage1_parameters"]]
    assert sum(stages) == int(run.data.params["num_parameters"]) and min(stages) > 0
    # Both stages see every sample: each stage's rate is the trial's rate.
    assert metrics["worker0_samples_per_s"] == metrics["worker1_samples_per_s"] > 0
    assert metrics["global_samples_per_s"] == metrics["trial_samples_per_s"] > 0
    # Against the same model on one device (1.0: the split costs nothing).
    assert run.data.tags["bench.scaling_baseline_run"] != run.info.run_id
    assert metrics["scaling_efficiency"] > 0


@pytest.mark.horovod
@pytest.mark.parametrize("framework", ["torch", "tf"])
@pytest.mark.usefixtures("horovod_ready")
def test_horovod_two_workers(bench, framework: str) -> None:  # noqa: ANN001
    got = bench.run(f"framework={framework}", "distributed=horovod", "workers=2", *SMALL)
    assert got.returncode == 0, got.output
    assert_global_and_per_worker(bench, only_trial(bench))
    assert not dist_processes(bench.root)


def test_killed_worker_is_a_dist_failure_and_leaves_nothing(bench) -> None:  # noqa: ANN001
    proc = bench.popen(
        "distributed=ddp", "workers=2", "model=lenet5", "batch_size=4", "epochs=1",
        "steps_per_epoch=100000", "warmup_steps=1", "timeout_s=120",
    )  # fmt: skip
    try:
        victim = wait_for_rank(bench.root, 90, RANK="1")
        assert victim is not None, "rank 1 never started"
        time.sleep(8)  # well into its steps
        victim.send_signal(signal.SIGKILL)
        started = time.monotonic()
        out, err = proc.communicate(timeout=100)
        assert time.monotonic() - started < 60  # long before timeout_s
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    run = only_trial(bench)
    assert run.data.tags["bench.status"] == "dist_failure"
    error = run.data.tags["bench.error"]
    assert "worker 1 (rank1): ended without a result" in error
    time.sleep(1)
    assert not dist_processes(bench.root)


def test_ps_async_one_ps_two_workers_logs_push_and_pull(bench) -> None:  # noqa: ANN001
    got = bench.run(
        "framework=tf", "distributed=ps_async", "workers=2", "ps=1", "breakdown=true", *SMALL
    )
    assert got.returncode == 0, got.output
    run = only_trial(bench)
    assert_global_and_per_worker(bench, run)
    metrics = run.data.metrics
    assert metrics["ps_pull_ms"] >= 0 and metrics["ps_push_ms"] >= 0
    assert metrics["time_comm_ms"] == pytest.approx(metrics["ps_pull_ms"] + metrics["ps_push_ms"])
    assert not dist_processes(bench.root)
