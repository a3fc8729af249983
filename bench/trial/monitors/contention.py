"""The contention gate (``contention=wait``): a timed window that other processes shared is
discarded and measured again once they let go of the trial's CPUs, within bounds.

A shared machine (a laptop, a VM, a CI runner, other sweeps) takes CPU time from a trial
while it is timed, and its rates are then the machine's, not the framework's.  Around each
timed window of a one-process trial, the gate reads the busy time of the trial's CPUs
(``/proc/stat``) and the CPU time of the trial's own process tree: others' share is the
difference.  Where the window was contended (:func:`bench.trial.monitors.cpu.contended`: others
held at least half a core while those CPUs were saturated), the gate waits until others'
share over a second falls below that half core (polling every ``QUIET_S``), and the loop
measures the window again.  Bounds, per trial: at most ``MAX_REMEASURED`` windows measured
again, at most ``MAX_WAIT_S`` seconds of waiting.  Where a bound is reached, or the load
never lets go within the waiting left, the window is kept and the gate stops gating the
trial: its rates are tagged as the shared machine's, and the load, not the window length,
is what a verdict blames (docs/measuring.md, "A shared machine").

Recorded per trial (:meth:`Gate.findings`): ``trial_windows_discarded`` and
``trial_contention_wait_s`` (metrics), and the tag ``contention_gate`` where windows kept
were shared (the bound hit under ``wait``; under ``tag`` every shared window is kept).
``contention=off`` makes no gate.  No reading is taken inside a timed window: one before it
starts and one after it ends, on the trial's thread.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.core import metrics, paths
from bench.core.config import BenchConfig
from bench.trial.monitors.base import Findings
from bench.trial.monitors.cpu import CONTENDED_PCT, CpuBusy, ProcessTree, contended

MAX_REMEASURED = 3  # windows measured again per trial
MAX_WAIT_S = 30.0  # seconds of waiting per trial
# Steady load (a daemon, another user's job) would cost every trial of a sweep its whole
# MAX_WAIT_S: where a trial on this machine gave up this recently, a trial waits at most
# SHORT_WAIT_S (enough to see load that has let go since).
RECENT_S = 120.0
SHORT_WAIT_S = 5.0
QUIET_S = 1.0  # the load has let go when others held under CONTENDED_PCT over this long


@dataclass(frozen=True)
class Reading:
    at: float  # the clock's seconds
    busy_s: float  # cumulative busy CPU seconds of the trial's CPUs
    own_s: float  # cumulative CPU seconds of the trial's process tree


class Share:
    """Readings of the trial's CPUs and of its own process tree, and others' share between
    two of them.  ``busy`` and ``own`` are cumulative CPU seconds (CpuBusy's and
    ProcessTree's reads in a trial; replayed readings in a test)."""

    def __init__(
        self,
        busy: Callable[[], float],
        own: Callable[[], float],
        cpus: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.busy, self.own, self.cpus, self.clock = busy, own, cpus, clock

    def read(self) -> Reading:
        return Reading(self.clock(), self.busy(), self.own())

    @staticmethod
    def between(a: Reading, b: Reading) -> tuple[float, float]:
        """(others', the trial's own) CPU from ``a`` to ``b``, in percent of one core."""
        seconds = b.at - a.at
        if seconds <= 0:
            return 0.0, 0.0
        own = max(0.0, b.own_s - a.own_s)
        others = max(0.0, (b.busy_s - a.busy_s) - own)
        return 100.0 * others / seconds, 100.0 * own / seconds

    @classmethod
    def of_this_process(cls) -> Share | None:
        """This process's CPUs and tree, or None where /proc/stat cannot be read."""
        busy = CpuBusy.open()
        if busy is None:
            return None
        tree = ProcessTree()
        return cls(busy.read, lambda: tree.read()[0], len(busy.cpus))


class Gate:
    """Judges each timed window of a trial; under ``wait``, has a shared one measured again
    after the load lets go (see the module's docstring).  ``sleep`` and the share's clock
    are injected: a test replays readings without sleeping."""

    def __init__(
        self,
        mode: str,
        share: Share,
        sleep: Callable[[float], None] = time.sleep,
        max_remeasured: int = MAX_REMEASURED,
        max_wait_s: float = MAX_WAIT_S,
        on_give_up: Callable[[], None] | None = None,
    ) -> None:
        self.mode, self.share, self.sleep = mode, share, sleep
        self.on_give_up = on_give_up
        self.max_remeasured, self.max_wait_s = max_remeasured, max_wait_s
        self.discarded = 0  # windows measured again
        self.waited_s = 0.0
        self.kept_shared = 0  # windows kept although shared
        self.others_pct = 0.0  # others' share in the last shared window kept (or waited on)
        self.gave_up = ""  # why a shared window was kept under ``wait``
        self._start: Reading | None = None

    def before(self) -> None:
        """Just before a timed window starts."""
        self._start = self.share.read()

    def again(self) -> bool:
        """Just after the window ended: whether to discard it and measure it again (having
        waited for the load to let go)."""
        if self._start is None:
            return False
        others, own = self.share.between(self._start, self.share.read())
        self._start = None
        if not contended(others, own, self.share.cpus):
            return False
        self.others_pct = others
        if self.mode != "wait" or self.gave_up:
            self.kept_shared += 1
            return False
        left = self.max_wait_s - self.waited_s
        if self.discarded >= self.max_remeasured or left <= 0:
            self._give_up(
                f"{self.discarded} windows measured again"
                if self.discarded >= self.max_remeasured
                else f"{self.waited_s:.0f} s waited"
            )
            return False
        if not self._wait(left):
            self._give_up(f"the load did not let go in {self.waited_s:.0f} s of waiting")
            return False
        self.discarded += 1
        return True

    def _give_up(self, why: str) -> None:
        """Keep the shared window and gate this trial no more; tell the machine's next trials."""
        self.gave_up = why
        self.kept_shared += 1
        if self.on_give_up is not None:
            self.on_give_up()

    def _wait(self, left: float) -> bool:
        """Wait until others held under CONTENDED_PCT of a core over QUIET_S, at most
        ``left`` seconds; whether they did."""
        waited = 0.0
        last = self.share.read()
        while waited < left:
            asked = min(QUIET_S, left - waited)
            self.sleep(asked)
            now = self.share.read()
            step = now.at - last.at if now.at > last.at else asked  # a clock that stood still
            waited += step
            self.waited_s += step
            others, _ = self.share.between(last, now)
            if step >= QUIET_S and others < CONTENDED_PCT:
                return True
            self.others_pct, last = others, now
        return False

    def findings(self) -> Findings:
        """The trial's metrics (``wait``) and, where shared windows were kept, the tag."""
        out = Findings()
        if self.mode == "wait":
            out.summary[metrics.TRIAL_WINDOWS_DISCARDED] = float(self.discarded)
            out.summary[metrics.TRIAL_CONTENTION_WAIT_S] = self.waited_s
        if self.kept_shared:
            held = f"other processes held {self.others_pct / 100:.1f} of its {self.share.cpus} CPUs"
            kept = (
                f"{self.kept_shared} timed window{'s' if self.kept_shared > 1 else ''} kept shared"
            )
            out.tags["contention_gate"] = (
                f"bound hit ({self.gave_up}; at most {self.max_remeasured} windows measured "
                f"again, {self.max_wait_s:.0f} s of waiting): {kept}, {held}"
                if self.mode == "wait"
                else f"contention=tag: {kept}, {held}"
            )
        return out


def gate(cfg: BenchConfig) -> Gate | None:
    """The gate of a one-process trial of ``cfg``; None under ``contention=off``, for a
    distributed trial (its ranks are each other's "others", and must time their windows
    together) or where /proc/stat cannot be read."""
    if cfg.contention == "off" or cfg.distributed.runner != "local":
        return None
    share = Share.of_this_process()
    if share is None:
        return None
    wait_s = min(MAX_WAIT_S, SHORT_WAIT_S) if gave_up_recently() else MAX_WAIT_S
    return Gate(
        cfg.contention, share, max_remeasured=MAX_REMEASURED, max_wait_s=wait_s,
        on_give_up=note_gave_up,
    )  # fmt: skip


def _memory() -> Path:
    """Where a trial notes when its gate last gave up on this machine (bench's cache)."""
    return paths.cache_dir() / "contention" / "gave_up"


CLOCK_SLACK_S = 1.0


def gave_up_recently(now: float | None = None) -> bool:
    """Whether a trial's gate on this machine gave up within RECENT_S: read only from the
    user's own private file, as a time and nothing else."""
    path = _memory()
    if not paths.owned_private(path):
        return False
    try:
        at = float(path.read_bytes()[:32].decode("ascii"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    age = (time.time() if now is None else now) - at
    # A second of the clock stepping back (NTP, a VM's clock) still counts as recent.
    return math.isfinite(age) and -CLOCK_SLACK_S <= age <= RECENT_S


def note_gave_up() -> None:
    """Note that this trial's gate gave up now (best effort: a read-only cache notes nothing)."""
    try:
        memory = _memory()
        at = math.floor(time.time() * 1000) / 1000  # never a moment ahead of the clock
        paths.write_private(paths.private_dir(memory.parent) / memory.name, f"{at:.3f}")
    except OSError:
        pass
