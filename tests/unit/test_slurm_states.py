"""How a Slurm job that returned no result is recorded (no cluster needed)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from bench.slurm import JobTimeLimit, ended_state, status_for


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
        "bench.slurm.JobTimeLimit: Slurm's warning before the job's time limit came as the "
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
