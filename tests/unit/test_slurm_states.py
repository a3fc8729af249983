"""How a Slurm job that returned no result is recorded (no cluster needed)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from bench.launchers.slurm import JobTimeLimit, PendingWatch, ended_state, never_starts, status_for


def submitit_error(trace: str) -> str:
    """The text of submitit's error for a job whose function raised (its FailedJobError)."""
    return (
        "Job (task=0) failed during processing with trace:\n----------------------\n"
        f"{trace}\n----------------------\n"
        "You can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:\n"
        "  - /sweep/.submitit/7/7_0_log.err\n  - /sweep/.submitit/7/7_0_log.out"
    )


def test_a_job_stopped_by_the_time_limit_warning_as_it_started_is_a_timeout() -> None:
    trace = (
        'Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
        "bench.launchers.slurm.JobTimeLimit: Slurm's warning before the job's time limit came "
        "as the "
        "job started"
    )
    state, why = ended_state("FAILED", submitit_error(trace))  # its exit code said FAILED
    assert state == "TIMEOUT" and status_for(state) == "timeout"
    assert why.startswith(str(JobTimeLimit()))
    assert "/sweep/.submitit/7/7_0_log.err" in why


def test_other_ends_keep_slurms_state_and_the_last_line_of_the_trace() -> None:
    trace = 'Traceback (most recent call last):\n  File "x.py"\nRuntimeError: disk full'
    state, why = ended_state("FAILED", submitit_error(trace))
    assert (state, status_for(state)) == ("FAILED", "error")
    assert why.startswith("RuntimeError: disk full (job logs: /sweep/.submitit/7/7_0_log.err")
    assert ended_state("", "Job 9 has not produced any output (state: NODE_FAIL)") == (
        "UNKNOWN",
        "Job 9 has not produced any output (state: NODE_FAIL)",
    )
    assert ended_state("PREEMPTED", "x")[0] == "PREEMPTED"


def test_the_warning_while_a_job_still_starts_raises_job_time_limit(monkeypatch) -> None:  # noqa: ANN001
    from hydra_plugins.bench_slurm_launcher import bench_slurm_launcher as launcher

    def starting(self, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        os.kill(os.getpid(), signal.SIGUSR2)  # Slurm's warning, while Hydra composes
        time.sleep(5)

    monkeypatch.setattr(launcher._PluginSlurmLauncher, "__call__", starting)
    previous = signal.getsignal(signal.SIGUSR2)
    try:
        with pytest.raises(JobTimeLimit):
            launcher.SlurmLauncher()()
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_only_reasons_that_never_clear_count_as_unsatisfiable() -> None:
    for reason in ("PartitionTimeLimit", "DependencyNeverSatisfied", "QOSMaxGRESPerJob"):
        assert never_starts(reason), reason
    for reason in ("Resources", "Priority", "QOSMaxJobsPerUserLimit", "BeginTime", "None"):
        assert not never_starts(reason), reason


def test_a_job_pending_for_a_reason_that_never_clears_is_cancelled_after_the_grace() -> None:
    pending = {"7_0": "PartitionTimeLimit", "7_1": "Resources", "8": "DependencyNeverSatisfied"}
    cancelled: list[str] = []
    watch = PendingWatch(
        ["7_0", "7_1"],
        after_s=60,
        reasons=lambda ids: {j: pending[j] for j in ids if j in pending},
        cancel=cancelled.append,
    )
    watch.add(["8", ""])
    watch.check(now=0.0)
    watch.check(now=59.0)
    assert cancelled == []  # not yet: a reason must hold for the whole grace
    pending["8"] = "Dependency"  # its dependency may still succeed: the clock restarts
    watch.check(now=61.0)
    assert cancelled == ["7_0"] and watch.cancelled == {"7_0": "PartitionTimeLimit"}
    pending["8"] = "DependencyNeverSatisfied"
    watch.check(now=62.0)
    watch.check(now=121.0)
    assert cancelled == ["7_0"]
    watch.check(now=122.0)
    assert cancelled == ["7_0", "8"]  # 7_1 waits for resources: never cancelled
    watch.check(now=500.0)
    assert cancelled == ["7_0", "8"]  # each job is cancelled once


def test_a_negative_grace_never_starts_the_watch() -> None:
    with PendingWatch(["1"], after_s=-1, reasons=lambda ids: {"1": "BadConstraints"}) as watch:
        time.sleep(0.1)
    assert watch.cancelled == {}
