"""Tier 3: real sweeps through ``python -m bench`` with real torch, TensorFlow and MLflow."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import REPO, TINY

pytestmark = pytest.mark.e2e


def workers_under(root) -> list[psutil.Process]:  # noqa: ANN001
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "bench.trial.worker" in cmd and str(root) in cmd:
            found.append(proc)
    return found


def wait_for_workers(root, timeout_s: float = 120) -> list[psutil.Process]:  # noqa: ANN001
    """The trial processes under ``root`` once one has started."""
    deadline = time.time() + timeout_s
    workers: list[psutil.Process] = []
    while time.time() < deadline and not workers:
        time.sleep(0.5)
        workers = workers_under(root)
    assert workers, "the trial process never started"
    return workers


def test_two_by_two_matrix_logs_every_trial(bench) -> None:  # noqa: ANN001
    """The README's main job.  That the same sweep again runs none of its finished trials is
    checked on cheaper sweeps: raised repeats in tests/e2e/test_report.py ('8 trials: 6
    skipped, 2 ok') and the resume after a sync in tests/e2e/test_disk_full.py ('2 trials: 2
    skipped'); that it runs a killed one again, after kill -9 below."""
    first = bench.run("-m", "model=vgg16,resnet50", "framework=tf,torch", *TINY)
    assert first.returncode == 0, first.output
    parents, children = bench.parents(), bench.children()
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    pairs = {(c.data.tags["bench.framework"], c.data.tags["bench.model"]) for c in children}
    assert pairs == {("tf", "vgg16"), ("tf", "resnet50"), ("torch", "vgg16"), ("torch", "resnet50")}
    client = bench.client()
    for child in children:
        assert child.data.tags["bench.status"] == "ok"
        assert child.info.status == "FINISHED"
        for key in ("epoch_time_s", "samples_per_s", "step_time_p50_ms", "loss"):
            history = client.get_metric_history(child.info.run_id, key)
            assert sorted(m.step for m in history) == [1, 2], key
        assert child.data.metrics["trial_samples_per_s"] > 0
        assert child.data.params["batch_size"] == "4"
        assert int(child.data.params["num_parameters"]) > 1_000_000
        for tag in (
            "bench.config_hash",
            "bench.python_version",
            "bench.os",
            "bench.cpu_model",
            "mlflow.source.git.commit",  # MLflow's own tag, not a bench.git_commit copy
            "bench.git_dirty",
        ):
            assert child.data.tags.get(tag), tag
        assert "bench.git_commit" not in child.data.tags
        version_tag = (
            "bench.torch_version"
            if child.data.tags["bench.framework"] == "torch"
            else "bench.tensorflow_version"
        )
        assert child.data.tags.get(version_tag)
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"config.json", "result.json", "worker.log"} <= artifacts
    # Same parameter count for the same model in both frameworks.
    for model in ("vgg16", "resnet50"):
        counts = {
            c.data.params["num_parameters"] for c in children if c.data.tags["bench.model"] == model
        }
        assert len(counts) == 1, (model, counts)
    assert "4 trials: 4 ok" in first.stdout
    for word in ("trial", "status", "samples/s"):
        assert word in first.stdout


def test_oom_is_a_result_and_the_sweep_goes_on(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "-m",
        "batch_size=2,512",
        "framework=torch",
        "model=resnet50",
        "image_size=64",
        "launcher.memory_limit_mb=2000",
        "epochs=1",
        "steps_per_epoch=1",
        "warmup_steps=1",
    )
    assert result.returncode == 1, result.output
    by_batch = {c.data.params["batch_size"]: c for c in bench.children()}
    assert by_batch["2"].data.tags["bench.status"] == "ok"
    oom = by_batch["512"]
    assert oom.data.tags["bench.status"] == "oom"
    assert "allocate" in oom.data.tags["bench.error"]
    assert oom.info.status == "FAILED"
    assert bench.parents()[0].info.status == "FAILED"
    assert "1 ok, 1 oom" in result.stdout
    assert workers_under(bench.root) == []


def test_timeout_kills_the_trial_and_the_sweep_goes_on(bench) -> None:  # noqa: ANN001
    result = bench.run(
        "-m",
        "steps_per_epoch=2,10000000",  # the second trial runs for hours unless stopped
        "framework=torch",
        "model=lenet5",  # the first trial ends within seconds even on a loaded machine
        "batch_size=2",
        "epochs=1",
        "warmup_steps=1",
        "timeout_s=25",
    )
    assert result.returncode == 1, result.output
    by_steps = {c.data.params["steps_per_epoch"]: c for c in bench.children()}
    assert by_steps["2"].data.tags["bench.status"] == "ok"
    slow = by_steps["10000000"]
    assert slow.data.tags["bench.status"] == "timeout"
    assert "timed out after 25 s" in slow.data.tags["bench.error"]
    assert workers_under(bench.root) == []


def test_ctrl_c_records_killed_and_leaves_nothing_running(bench) -> None:  # noqa: ANN001
    proc = bench.popen(
        "framework=torch",
        "model=resnet50",
        "batch_size=2",
        "epochs=1",
        "steps_per_epoch=100000",
        "warmup_steps=1",
    )
    workers = wait_for_workers(bench.root)
    time.sleep(4)  # let it get into its epochs
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    time.sleep(0.5)
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    assert workers_under(bench.root) == []
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "killed"
    assert child.info.status == "KILLED"
    assert bench.parents()[0].info.status == "KILLED"
    assert not [r for r in bench.runs() if r.info.status == "RUNNING"]


def test_unreachable_server_spools_results_and_sync_logs_them(bench) -> None:  # noqa: ANN001
    with socket.socket() as sock:  # a port with nothing listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = bench.run(
        "framework=torch", "model=lenet5", *TINY, f"tracking.uri=http://127.0.0.1:{port}"
    )
    assert result.returncode == 0, result.output
    assert len(bench.spooled()) == 1
    assert "out of reach" in result.stderr
    assert f"Results: {bench.spooled()[0].parent} (a spool" in result.stdout
    elsewhere = bench.root / "elsewhere"
    elsewhere.mkdir()
    down = subprocess.run(  # the server is still down: one line, the record stays
        [sys.executable, "-m", "bench.cli.sync"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
        env=bench.env,
    )
    assert down.returncode == 1 and len(down.stderr.strip().splitlines()) == 1, down.stderr
    assert "out of reach" in down.stderr and "its records stay" in down.stderr
    assert len(bench.spooled()) == 1
    sync = subprocess.run(  # from another directory: the spool is found all the same
        [sys.executable, "-m", "bench.cli.sync", "--uri", bench.uri],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "", "BENCH_STATE_DIR": str(bench.state)},
    )
    assert sync.returncode == 0, sync.stderr
    assert "synced 1" in sync.stdout
    (child,) = bench.children()
    assert child.data.tags["bench.status"] == "ok"
    assert len(bench.client().get_metric_history(child.info.run_id, "samples_per_s")) == 2
    assert not bench.spooled()
    (parent,) = bench.parents()  # closed with the summary the sweep printed
    assert parent.info.status == "FINISHED"
    assert "lenet5" in parent.data.tags["mlflow.note.content"]


def test_sigkill_of_the_sweep_is_cleaned_up_by_the_next_sweep(bench) -> None:  # noqa: ANN001
    """``kill -9`` of bench itself: its worker dies with it (PR_SET_PDEATHSIG); the runs it
    left RUNNING are marked KILLED by the next sweep on the store, which reruns the trial."""
    args = ["framework=torch", "model=lenet5", "batch_size=2", "epochs=1", "warmup_steps=1"]
    args += ["steps_per_epoch=1000"]  # seconds: killed in the middle, then run to the end
    proc = bench.popen(*args)
    workers = wait_for_workers(bench.root)
    time.sleep(2)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    psutil.wait_procs(workers, timeout=15)
    assert workers_under(bench.root) == []  # the worker died with its parent
    assert {r.info.status for r in bench.runs()} == {"RUNNING"}  # what kill -9 leaves

    again = bench.run(*args)
    assert again.returncode == 0, again.output
    assert "marked KILLED" in again.stderr
    runs = bench.runs()
    assert not [r for r in runs if r.info.status == "RUNNING"]
    killed = [r for r in bench.children() if r.info.status == "KILLED"]
    assert len(killed) == 1 and killed[0].data.tags["bench.status"] == "killed"
    assert [
        r.data.tags["bench.status"] for r in bench.children() if r.info.status == "FINISHED"
    ] == ["ok"]


def test_ctrl_c_twice_still_records_killed_and_leaves_nothing(bench) -> None:  # noqa: ANN001
    """A second Ctrl-C while the first one's clean-up runs does not cut it short."""
    proc = bench.popen(
        "-m",
        "batch_size=2,3",
        "framework=torch",
        "model=lenet5",
        "epochs=1",
        "steps_per_epoch=100000",
        "warmup_steps=1",
    )
    workers = wait_for_workers(bench.root)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err, err
    psutil.wait_procs(workers, timeout=15)
    assert workers_under(bench.root) == []
    (child,) = bench.children()  # the second configuration never started
    assert (child.data.tags["bench.status"], child.info.status) == ("killed", "KILLED")
    assert bench.parents()[0].info.status == "KILLED"
    assert not [r for r in bench.runs() if r.info.status == "RUNNING"]
    assert "1 trial: 1 killed" in out
