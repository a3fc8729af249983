"""The monitor protocol, and the window arithmetic every monitor shares.

A monitor samples something (a GPU, the host) in a background thread while a trial runs.
The trial's own thread only calls it outside timed windows: :meth:`Monitor.start` before
warm-up, :meth:`Monitor.window` after each timed epoch (to turn the samples that fall in
that epoch's window into per-epoch figures) and :meth:`Monitor.stop` at the end.  All
times are ``time.perf_counter()`` seconds, the clock the timing loop uses, so an epoch's
window boundaries can be compared with sample times directly.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass
class Findings:
    """What a monitor hands back when it stops."""

    # Whole-trial metrics, named with their units (e.g. gpu_idle_power_w).
    summary: dict[str, float] = field(default_factory=dict)
    # Logged as ``bench.<key>`` tags: how something was measured, or why it was not.
    tags: dict[str, str] = field(default_factory=dict)
    # Artifact files written into the trial's working directory, relative to it.
    files: list[str] = field(default_factory=list)


class Monitor(Protocol):
    def start(self) -> None:
        """Begin sampling in a background thread."""

    def window(self, start: float, end: float, samples: int) -> dict[str, float]:
        """Per-epoch figures over the timed window [start, end] in which ``samples``
        samples were processed; called after the window has closed."""

    def stop(self, workdir: Path | None) -> Findings:
        """Stop sampling (idempotent; also after a failure) and write artifacts to
        ``workdir`` (none if it is None)."""


@dataclass(frozen=True)
class Window:
    epoch: int
    start: float
    end: float


class Sampler:
    """Calls ``read()`` every ``interval_s`` seconds in a daemon thread until stopped.

    A ``read`` that raises ends the sampling (the trial goes on); the exception text is
    kept in :attr:`error`.  :meth:`sample_now` asks for an extra read at once and waits for
    it; :meth:`stop` is idempotent and returns once the thread is gone.
    """

    def __init__(self, name: str, read: Callable[[], None], interval_s: float) -> None:
        self.read, self.interval_s = read, interval_s
        self.error = ""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._begun = self._finished = 0  # reads started and finished
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        interval, clock = self.interval_s, time.perf_counter
        next_at = clock()
        while not self._stop.is_set():
            with self._done:
                self._begun += 1
            try:
                self.read()
            except Exception as exc:  # noqa: BLE001 - a broken reader must not break the trial
                self.error = f"{type(exc).__name__}: {exc}"
                break
            finally:
                with self._done:
                    self._finished += 1
                    self._done.notify_all()
            # Fixed rate without drift; after a stall, resume from now rather than catch up.
            next_at = max(next_at + interval, clock())
            self._wake.wait(next_at - clock())
            self._wake.clear()
        with self._done:
            self._done.notify_all()

    def sample_now(self, timeout_s: float = 5.0) -> None:
        """Have a read that starts after this call, and wait until it has finished."""
        with self._done:
            target = self._begun + 1
            self._wake.set()
            self._done.wait_for(
                lambda: self._finished >= target or not self._thread.is_alive(), timeout_s
            )

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


def interpolate(times: Sequence[float], values: Sequence[float], at: float) -> float:
    """``values`` (a cumulative counter) linearly interpolated at time ``at``.

    Outside the sampled span the nearest sample's value is used, so a window that starts
    before the first sample or ends after the last one is measured over the sampled part.
    """
    if not times:
        raise ValueError("no samples")
    i = bisect.bisect_left(times, at)
    if i == 0:
        return values[0]
    if i == len(times):
        return values[-1]
    t0, t1 = times[i - 1], times[i]
    if t1 == t0:
        return values[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (at - t0) / (t1 - t0)


def integrate(times: Sequence[float], values: Sequence[float], start: float, end: float) -> float:
    """Trapezoidal integral of a sampled rate (e.g. power in W) over [start, end]."""
    if not times or end <= start:
        return 0.0
    points = [start] + [t for t in times if start < t < end] + [end]
    rates = [interpolate(times, values, t) for t in points]
    return sum(
        (points[k + 1] - points[k]) * (rates[k + 1] + rates[k]) / 2 for k in range(len(points) - 1)
    )


def inside(times: Sequence[float], start: float, end: float) -> range:
    """Indices of the samples taken in [start, end]; if none, the one or two around it."""
    lo = bisect.bisect_left(times, start)
    hi = bisect.bisect_right(times, end)
    if hi > lo:
        return range(lo, hi)
    return range(max(lo - 1, 0), min(lo + 1, len(times)))


def epoch_of(time_s: float, windows: Sequence[Window]) -> int:
    """The epoch whose window contains ``time_s``; 0 outside every timed window."""
    for w in windows:
        if w.start <= time_s <= w.end:
            return w.epoch
    return 0
