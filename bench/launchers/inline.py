"""Run the trial in this process: for debugging, since frameworks then share the process.

There is no child to watch: the timeout is a SIGALRM, and an interrupt arrives in the trial
itself.  The statuses and the partial result are the other launchers' (:mod:`.base`).
"""

from __future__ import annotations

import signal
from pathlib import Path
from types import FrameType

from bench.core.config import BenchConfig
from bench.core.result import ERROR, TIMEOUT, EpochCallback, EpochRecord, TrialResult
from bench.launchers import base
from bench.trial.runtime.hooks import TrialHooks
from bench.trial.worker import execute


class _TrialTimeout(BaseException):
    """Raised by SIGALRM; a BaseException so that the trial's own handler lets it through."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _TrialTimeout


class Launcher(base.Launcher):
    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        done: list[EpochRecord] = []
        try:  # the hooks a check harness asked for (bench.trial.runtime.hooks)
            hooks = TrialHooks.read(workdir)
        except ValueError as exc:
            return base.partial(cfg, [], ERROR, str(exc))

        def record(epoch: EpochRecord) -> None:
            done.append(epoch)
            on_epoch(epoch)

        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, cfg.timeout_s)
        try:
            return execute(cfg, record, workdir, hooks)
        except _TrialTimeout:
            return base.partial(cfg, done, TIMEOUT, base.timed_out(cfg), hooks.environment())
        except KeyboardInterrupt as exc:
            stopped = base.partial(cfg, done, *base.interrupted(exc), hooks.environment())
            raise base.TrialInterrupted(stopped) from exc
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
