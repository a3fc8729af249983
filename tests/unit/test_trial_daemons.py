"""A trial's processes die with it: a daemon it leaves (fork, setsid, fork, SIGTERM ignored)
is outside the process group the launcher stops, but carries the trial's mark in its
environment, and is killed when the trial is over (issue 51)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.core.config import BenchConfig
from bench.core.result import ERROR
from bench.launchers import process

# The "interpreter" of the trial: starts a daemon that leaves its session and ignores
# SIGTERM, writes the daemon's pid into the trial folder (its last argument), and exits
# without a result.
DAEMON = """
import os, signal, sys, time
pid_file = os.path.join(sys.argv[-1], "daemon.pid")
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(pid_file + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        time.sleep(120)
    os._exit(0)
os.wait()
while not os.path.exists(pid_file):
    time.sleep(0.01)
"""


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_a_double_forked_daemon_ignoring_sigterm_is_gone_when_the_trial_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\nexec {sys.executable} -c "$BENCH_TEST_DAEMON" "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("BENCH_TEST_DAEMON", DAEMON)
    monkeypatch.setattr(process, "python_for", lambda *args: str(fake))
    cfg = BenchConfig(timeout_s=60)
    cfg.model.name = "lenet5"
    pid = 0
    try:
        result = process.Launcher().launch(cfg, tmp_path / "trial", lambda e: None)
        pid = int((tmp_path / "trial" / "daemon.pid").read_text())
        assert result.status == ERROR  # it wrote no result
        assert not _running(pid), "the daemon outlived its trial"
        said = capsys.readouterr().err
        assert (
            f"killed 1 process(es) the trial left running outside its process group (pids {pid};"
            in said
        )
    finally:
        if pid and _running(pid):
            os.kill(pid, signal.SIGKILL)


def test_only_the_trials_own_mark_is_killed() -> None:
    import subprocess

    from bench.trial.runtime.processes import ENV_TRIAL_MARK, stop_marked

    other = subprocess.Popen(["sleep", "30"], env=dict(os.environ, **{ENV_TRIAL_MARK: "other"}))
    try:
        started = time.monotonic()
        assert stop_marked("mine") == [] and other.poll() is None
        assert time.monotonic() - started < 2  # a look at every process, once per trial
        assert stop_marked("other") == [other.pid]
        assert not _running(other.pid)
    finally:
        other.kill()
