"""Run the trial in this process: for debugging, since frameworks then share the process."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import FrameType

from bench.config import BenchConfig
from bench.launchers.base import TimeLimitReached, TrialInterrupted
from bench.result import KILLED, TIMEOUT, EpochRecord, TrialResult
from bench.trial import EpochCallback, run_trial


class _TrialTimeout(BaseException):
    """Raised by SIGALRM; a BaseException so that the trial's own handler lets it through."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _TrialTimeout


class Launcher:
    def launch(self, cfg: BenchConfig, workdir: Path, on_epoch: EpochCallback) -> TrialResult:
        done: list[EpochRecord] = []

        def record(epoch: EpochRecord) -> None:
            done.append(epoch)
            on_epoch(epoch)

        def partial(status: str, error: str) -> TrialResult:
            return TrialResult(
                status=status,
                framework=cfg.framework.name,
                model=cfg.model.name,
                mode=cfg.mode,
                epochs=done,
                error=error,
            )

        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, cfg.timeout_s)
        start = time.time()
        try:
            result = run_trial(cfg, record, workdir)
        except _TrialTimeout:
            return partial(TIMEOUT, f"timed out after {cfg.timeout_s:g} s (timeout_s)")
        except KeyboardInterrupt as exc:
            if isinstance(exc, TimeLimitReached):
                raise TrialInterrupted(
                    partial(TIMEOUT, "stopped at the scheduler's time limit")
                ) from exc
            killed = partial(KILLED, f"interrupted after {time.time() - start:.1f} s")
            raise TrialInterrupted(killed) from exc
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return result
