"""What every launcher shares: the watch-and-stop loop (:class:`WatchedLauncher`), what an
interrupt means, and the partial result of a trial that did not finish.

A launcher runs one trial in isolation and hands back its result; it never raises for a
failing trial.  :class:`WatchedLauncher` owns the loop: it starts the trial (:meth:`Launcher.start`,
the one thing each launcher does its own way), streams the epochs the child appends to
``events.jsonl`` (:mod:`bench.trial.runtime.protocol`), stops the child at ``timeout_s`` (status
``timeout``) or on an interrupt, and reads ``result.json``, or says why there is none.  The
same statuses come from every launcher: Ctrl-C or SIGTERM is ``killed``, a scheduler's
time-limit warning (Slurm's SIGUSR2, :class:`TimeLimitReached`) is ``timeout``.
"""

from __future__ import annotations

import signal
import time
from abc import ABC, abstractmethod
from pathlib import Path

from bench.core.config import BenchConfig, trial_timeout_s
from bench.core.result import ERROR, KILLED, TIMEOUT, EpochCallback, EpochRecord, TrialResult
from bench.trial.runtime.hooks import TrialHooks
from bench.trial.runtime.processes import shielded
from bench.trial.runtime.protocol import EVENTS, LOG, RESULT, EventReader, clear, read_result

POLL_S = 0.2


class TimeLimitReached(KeyboardInterrupt):
    """A scheduler's warning that the job's time limit is near (Slurm's SIGUSR2)."""


def on_time_limit_warning() -> None:
    """From now on, Slurm's warning before the time limit (SIGUSR2) raises
    :class:`TimeLimitReached` in this process's main thread."""

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


def interrupted(exc: KeyboardInterrupt) -> tuple[str, str]:
    """The status and message of a trial stopped by ``exc``."""
    if isinstance(exc, TimeLimitReached):
        return TIMEOUT, "stopped at the scheduler's time limit (its warning signal arrived)"
    return KILLED, "interrupted (Ctrl-C or SIGTERM)"


def timed_out(cfg: BenchConfig) -> str:
    limit = trial_timeout_s(cfg)
    if limit != cfg.timeout_s:
        return (
            f"timed out after {limit:g} s (timeout_s {cfg.timeout_s:g} + tuning.budget_s "
            f"{cfg.tuning.budget_s:g} + the search's grace)"
        )
    return f"timed out after {cfg.timeout_s:g} s (timeout_s)"


def partial(
    cfg: BenchConfig,
    epochs: list[EpochRecord],
    status: str,
    error: str,
    environment: dict[str, str] | None = None,
) -> TrialResult:
    """The result of a trial that ended without its own: the epochs it finished, and why."""
    return TrialResult(
        status=status,
        framework=cfg.framework.name,
        model=cfg.model.name,
        mode=cfg.mode,
        epochs=list(epochs),
        environment=dict(environment or {}),
        error=error,
    )


class LaunchError(Exception):
    """The trial could not be started; recorded as an ``error`` result with this message."""


class Child(ABC):
    """A started trial, as its launcher sees it."""

    # time.time() when the trial was handed to the process or container (for overhead marks).
    launched: float = 0.0

    @abstractmethod
    def done(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` seconds; True once the trial has ended."""

    @abstractmethod
    def stop(self, grace_s: float) -> None:
        """Stop it (SIGTERM, SIGKILL after ``grace_s``) and everything it started."""

    def finished(self) -> None:  # noqa: B027 - optional: most children leave nothing
        """After it ended by itself: collect its exit state, reap what it left."""

    @abstractmethod
    def died(self) -> tuple[str, str]:
        """Status and message for a trial that ended without writing its result."""

    def close(self) -> None:  # noqa: B027 - optional: most launchers hold nothing
        """Release what the launcher held for it (always called, last)."""


class Launcher(ABC):
    @abstractmethod
    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        """Run the trial to completion, failure or ``cfg.timeout_s``; never raise for a
        failing trial.  Raise :class:`TrialInterrupted` on an interrupt, after stopping it."""


class WatchedLauncher(Launcher):
    """A launcher whose trial runs in a child (a process, a container) that it watches."""

    poll_s = POLL_S

    @abstractmethod
    def start(self, cfg: BenchConfig, workdir: Path, environment: dict[str, str]) -> Child:
        """Start the trial in ``workdir`` (``config.json`` is the launcher's to write); add
        what the result should record about where it runs to ``environment``.  Raise
        :class:`LaunchError` if it cannot start."""

    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        clear(workdir, EVENTS, RESULT, LOG)
        events = EventReader(workdir / EVENTS, on_epoch)
        environment: dict[str, str] = {}
        try:  # the hooks a check harness asked for, named in any result (bench.hooks)
            environment.update(TrialHooks.read(workdir).environment())
        except ValueError as exc:
            return partial(cfg, [], ERROR, str(exc), environment)
        try:
            child = self.start(cfg, workdir, environment)
        except LaunchError as exc:
            return partial(cfg, events.epochs, ERROR, str(exc), environment)
        try:
            return self._watch(cfg, workdir, child, events, environment)
        finally:
            child.close()

    def _watch(
        self,
        cfg: BenchConfig,
        workdir: Path,
        child: Child,
        events: EventReader,
        environment: dict[str, str],
    ) -> TrialResult:
        grace = cfg.launcher.kill_grace_s
        deadline = time.monotonic() + trial_timeout_s(cfg)
        try:
            while not child.done(self.poll_s):
                events.poll()
                if time.monotonic() > deadline:
                    child.stop(grace)
                    events.poll()
                    return partial(cfg, events.epochs, TIMEOUT, timed_out(cfg), environment)
        except KeyboardInterrupt as exc:
            with shielded():  # a second Ctrl-C does not cut the clean-up short
                child.stop(grace)
                events.poll()
            stopped = partial(cfg, events.epochs, *interrupted(exc), environment)
            raise TrialInterrupted(stopped) from exc
        except BaseException:  # whatever stops the host, the trial's processes go too
            child.stop(grace)
            raise
        child.finished()
        events.poll()
        result = read_result(workdir / RESULT)
        if result is None:
            return partial(cfg, events.epochs, *child.died(), environment)
        result.environment.update(environment)
        result.marks["launched"] = child.launched
        return result
