"""The drift check of a sweep's rounds: a short fixed reference step before each round.

Machines drift (5-7% between sweeps was measured on the 2-core development machine):
another tenant, a thermal limit, a frequency governor.  Before each round of a sweep with
repeats, the sweep's own process times a fixed amount of work (sorting a fixed array with
NumPy, on one thread: a BLAS product's threads spin and stall on a busy machine, which
measures the scheduler rather than the CPU; sized on the first round to take about
``TARGET_S``), outside every trial's window.  A
round whose reference moved more than ``THRESHOLD`` from the sweep's median is flagged:
its trials ran on a machine that was not the one the others ran on.

A reference taken before a round cannot see load that starts during it (lenet-auto: another
benchmark began in round 9, which its reference, taken before, missed; round 10's caught
it).  So the sweep also compares each round's reference with the one after it (the next
round's, and one more after the last round): a round whose before and after differ by more
than ``THRESHOLD`` changed while it ran (:func:`changed_within`).  Load that comes and goes
within a round is still unseen.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

TARGET_S = 0.2
THRESHOLD = 0.05
SIZE = 1 << 14


class Reference:
    """The reference step of one sweep: the same work every round."""

    def __init__(self, target_s: float = TARGET_S) -> None:
        self.values = np.random.default_rng(0).random(SIZE)
        self.target_s = target_s
        self.sorts = 0  # how many sorts a run does: sized on the first call

    def _run(self, sorts: int) -> float:
        start = time.perf_counter()
        for _ in range(sorts):
            np.sort(self.values)  # a fresh copy each time: the same work every time
        return time.perf_counter() - start

    def time(self) -> float:
        """Seconds of the reference work (the best of 3, to shed a stray interruption)."""
        if not self.sorts:  # as timeit's autorange: double until a run lasts long enough
            self._run(4)  # warm: the first sorts pay for the BLAS threads and caches
            sorts = 1
            # the best of 3 runs, so that one run stretched by a stray interruption stops nothing
            while min(self._run(sorts) for _ in range(3)) < self.target_s / 3:
                if sorts >= 1 << 20:
                    break
                sorts *= 2
            self.sorts = sorts
        return min(self._run(self.sorts) for _ in range(3))


def flagged(times: list[float], threshold: float = THRESHOLD) -> list[int]:
    """The rounds (0-based) whose reference is more than ``threshold`` from the median."""
    if len(times) < 3:
        return []
    middle = statistics.median(times)
    return [i for i, t in enumerate(times) if abs(t / middle - 1) > threshold]


def changed_within(before: list[float], after_last: float | None,
                   threshold: float = THRESHOLD) -> dict[int, float]:  # fmt: skip
    """The rounds (0-based) whose reference after them (the next round's, ``after_last``
    for the last round) differs by more than ``threshold`` from the one before them, each
    with the change (a fraction: +0.07 took 7% longer after the round)."""
    if not before:
        return {}
    after = [*before[1:], after_last]
    return {
        i: end / start - 1
        for i, (start, end) in enumerate(zip(before, after, strict=True))
        if end is not None and start > 0 and abs(end / start - 1) > threshold
    }


# repeats=auto stops asking for rounds the machine cannot give: where every ok run of this
# many rounds in a row was timed under load that contention=wait could not wait out (its
# gate's bound hit, tag bench.contention_gate), another round would measure the load again.
LOADED_ROUNDS = 2


def loaded_rounds(rounds: list[list[bool]]) -> int:
    """How many of the last ``rounds`` in a row had every ok run timed under load the gate
    gave up on; ``rounds``: per round in order, per ok run, whether it did (a round with no
    ok run ends the count)."""
    count = 0
    for runs in reversed(rounds):
        if not runs or not all(runs):
            break
        count += 1
    return count
