"""The launcher protocol."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from bench.config import BenchConfig
from bench.result import TrialResult
from bench.trial import EpochCallback


class TimeLimitReached(KeyboardInterrupt):
    """A scheduler's warning that the job's time limit is near (Slurm's SIGUSR2)."""


def on_time_limit_warning() -> None:
    """From now on, Slurm's warning before the time limit (SIGUSR2) raises
    :class:`TimeLimitReached` in this process's main thread."""
    import signal

    def raise_time_limit(signum: int, frame: object) -> None:
        raise TimeLimitReached

    signal.signal(signal.SIGUSR2, raise_time_limit)


class TrialInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) arrived during a trial; ``result`` holds what it had done.

    Its status is ``killed``, or ``timeout`` when the cause was :class:`TimeLimitReached`: a
    sweep records such a trial and goes on rather than stopping.
    """

    def __init__(self, result: TrialResult):
        super().__init__("trial interrupted")
        self.result = result


class Launcher(Protocol):
    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        """Run the trial to completion, failure or ``cfg.timeout_s``; never raise for a
        failing trial.  Raise :class:`TrialInterrupted` on Ctrl-C, after stopping it."""
