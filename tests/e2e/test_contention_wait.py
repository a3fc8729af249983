"""contention=wait on a real trial (the gate's arithmetic is tested on replayed readings in
tests/unit/test_contention_gate.py): lenet5 on torch, in this process, beside a busy loop
on every CPU it may use, so its window is shared and the load never lets go; the gate waits
its bound (shortened to 1 s), keeps the window, and says so.  The suite's other trials run
under contention=tag (tests/conftest.py): this is its one trial that waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from bench.core.config import BenchConfig, FrameworkConfig, ModelConfig, TelemetryConfig
from bench.core.result import OK
from bench.trial.loop import run_trial
from bench.trial.monitors import contention

pytestmark = pytest.mark.e2e


def _busy_loop() -> int:
    """A busy loop outside this process's tree (the shell that starts it exits at once): the
    trial's own tree, which the gate leaves out of "others", must not hold it."""
    started = subprocess.run(
        ["sh", "-c", f"'{sys.executable}' -c 'while 1: pass' >/dev/null 2>&1 & echo $!"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(started.stdout)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads /proc/stat")
def test_a_trial_waits_for_load_that_never_lets_go_then_keeps_and_tags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(contention, "MAX_WAIT_S", 1.0)
    cfg = BenchConfig(
        framework=FrameworkConfig(name="torch"),
        model=ModelConfig(name="lenet5"),
        device="cpu",
        batch_size=8,
        epochs=1,
        warmup_steps=1,
        min_window_s=0.3,
        contention="wait",
        telemetry=TelemetryConfig(enabled=False),  # the gate reads /proc on its own
    )
    busy = [_busy_loop() for _ in range(len(os.sched_getaffinity(0)))]
    try:
        result = run_trial(cfg)
    finally:
        for pid in busy:
            os.kill(pid, signal.SIGKILL)
    assert result.status == OK, result.error
    assert len(result.epochs) == 1
    assert 1.0 <= result.summary["trial_contention_wait_s"] < 3.0
    assert result.summary["trial_windows_discarded"] == 0
    assert result.environment["contention_gate"].startswith(
        "bound hit (the load did not let go in 1 s of waiting;"
    )
