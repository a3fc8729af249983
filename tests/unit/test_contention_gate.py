"""The contention gate (contention=wait, bench.trial.monitors.contention), on replayed /proc
readings: a machine whose /proc/stat and whose trial's CPU time move only as the test moves
its clock, so waiting costs no real time."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from bench.core.config import BenchConfig
from bench.core.strategies.ddp import DDPConfig
from bench.trial import loop as trial
from bench.trial.loop import _timed_epochs
from bench.trial.monitors import contention
from bench.trial.monitors.contention import Gate, Share
from bench.trial.monitors.cpu import _TICK, CpuBusy


class Machine:
    """Two CPUs whose /proc/stat (a file, read by the real CpuBusy) and whose trial's own CPU
    seconds grow at set rates as :meth:`advance` moves the clock; ``others`` (cores held by
    other processes) follows a script of (until_s, cores)."""

    def __init__(self, stat: Path, others: list[tuple[float, float]]) -> None:
        self.stat, self.script = stat, others
        self.now, self.own_s, self.busy_ticks = 0.0, 0.0, 0.0
        self.sleeps: list[float] = []
        self._write()

    def others_at(self, t: float, own: float) -> float:
        return next((cores for until, cores in self.script if t < until), self.script[-1][1])

    def advance(self, seconds: float, own: float) -> None:
        """``seconds`` pass; the trial uses ``own`` cores, others what the script says."""
        for _ in range(int(round(seconds * 10))):  # in tenths, so a script's edges land
            busy = min(2.0, own + self.others_at(self.now, own))
            self.own_s += own * 0.1
            self.busy_ticks += busy * 0.1 * _TICK
            self.now = round(self.now + 0.1, 6)
        self._write()

    def _write(self) -> None:
        half = int(self.busy_ticks / 2)
        idle = 100000
        self.stat.write_text(
            f"cpu  {2 * half} 0 0 {2 * idle} 0 0 0 0 0 0\n"
            f"cpu0 {half} 0 0 {idle} 0 0 0 0 0 0\n"
            f"cpu1 {half} 0 0 {idle} 0 0 0 0 0 0\n"
        )

    def sleep(self, seconds: float) -> None:  # the gate's wait: the trial is idle
        self.sleeps.append(seconds)
        self.advance(seconds, own=0.0)

    def gate(self, mode: str = "wait", **bounds: float) -> Gate:
        share = Share(CpuBusy({0, 1}, self.stat).read, lambda: self.own_s, 2, lambda: self.now)
        return Gate(mode, share, self.sleep, **bounds)  # type: ignore[arg-type]


def window(machine: Machine, gate: Gate, seconds: float = 2.0, own: float = 1.0) -> bool:
    gate.before()
    machine.advance(seconds, own)
    return gate.again()


def test_a_quiet_window_is_kept_and_nothing_waits(tmp_path: Path) -> None:
    machine = Machine(tmp_path / "stat", [(1e9, 0.1)])
    gate = machine.gate()
    assert not window(machine, gate, own=1.9)
    found = gate.findings()
    assert found.summary == {"trial_windows_discarded": 0.0, "trial_contention_wait_s": 0.0}
    assert not found.tags and not machine.sleeps


def test_others_with_room_to_spare_do_not_count(tmp_path: Path) -> None:
    """Others held 0.7 of a core while a core stayed idle: the trial lost nothing."""
    machine = Machine(tmp_path / "stat", [(1e9, 0.7)])
    assert not window(machine, machine.gate(), own=0.5)


def test_a_shared_window_is_measured_again_once_the_load_lets_go(tmp_path: Path) -> None:
    machine = Machine(tmp_path / "stat", [(5.0, 1.0), (1e9, 0.0)])  # a 5 s burst of load
    gate = machine.gate()
    assert window(machine, gate)  # 0-2 s shared: discarded
    assert machine.now == pytest.approx(6.0)  # waited until a whole second was quiet
    assert not window(machine, gate)  # measured again on a quiet machine: kept
    found = gate.findings()
    assert found.summary["trial_windows_discarded"] == 1.0
    assert found.summary["trial_contention_wait_s"] == pytest.approx(4.0)
    assert not found.tags  # no shared window was kept


def test_load_that_never_lets_go_is_waited_on_once_then_kept_and_tagged(tmp_path: Path) -> None:
    machine = Machine(tmp_path / "stat", [(1e9, 1.0)])
    gate = machine.gate(max_wait_s=6.0)
    assert not window(machine, gate)  # waited its 6 s, in vain: the window is kept
    assert sum(machine.sleeps) == pytest.approx(6.0)
    assert not window(machine, gate)  # the gate has given up: no more waiting this trial
    assert sum(machine.sleeps) == pytest.approx(6.0)
    found = gate.findings()
    assert found.summary["trial_windows_discarded"] == 0.0
    assert found.summary["trial_contention_wait_s"] == pytest.approx(6.0)
    assert found.tags["contention_gate"].startswith(
        "bound hit (the load did not let go in 6 s of waiting; at most 3 windows measured "
        "again, 6 s of waiting): 2 timed windows kept shared, other processes held 1.0 of its "
        "2 CPUs"
    )


def test_a_give_up_is_noted_and_shortens_the_machines_next_trials_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steady load would cost every trial of a sweep its whole MAX_WAIT_S: a trial whose gate
    gave up notes it, and a trial within RECENT_S waits at most SHORT_WAIT_S."""
    import os
    import time

    monkeypatch.setenv("BENCH_CACHE", str(tmp_path / "cache"))
    assert not contention.gave_up_recently()
    machine = Machine(tmp_path / "stat", [(1e9, 1.0)])
    noted: list[bool] = []
    gate = Gate("wait", machine.gate().share, machine.sleep, max_wait_s=6.0,
                on_give_up=lambda: noted.append(True))  # fmt: skip
    assert not window(machine, gate) and noted == [True]  # gave up once, noted once
    assert not window(machine, gate) and noted == [True]
    contention.note_gave_up()  # what gate() hands a trial's Gate
    memory = tmp_path / "cache" / "contention" / "gave_up"
    assert oct(memory.stat().st_mode & 0o777) == "0o600"
    assert contention.gave_up_recently()
    assert not contention.gave_up_recently(now=time.time() + contention.RECENT_S + 1)
    if Path("/proc/stat").exists():
        assert contention.gate(BenchConfig(contention="wait")).max_wait_s == contention.SHORT_WAIT_S  # type: ignore[union-attr]
    # What the file says is believed only as a time, and only from the user's own file.
    for planted in (b"nan", b"not a time", b"1e400"):
        memory.write_bytes(planted)
        assert not contention.gave_up_recently()
    memory.write_text(f"{time.time():.3f}")
    os.chmod(memory, 0o666)
    assert not contention.gave_up_recently()


class Bursts(Machine):
    """Others load the machine whenever the trial runs, and leave whenever it waits: every
    window is shared, and every wait ends after a second."""

    def others_at(self, t: float, own: float) -> float:
        return 1.0 if own > 0 else 0.0


def test_at_most_max_remeasured_windows_are_measured_again(tmp_path: Path) -> None:
    machine = Bursts(tmp_path / "stat", [(1e9, 0.0)])
    gate = machine.gate(max_remeasured=2)
    assert [window(machine, gate) for _ in range(4)] == [True, True, False, False]
    assert machine.sleeps == [1.0, 1.0]
    found = gate.findings()
    assert found.summary["trial_windows_discarded"] == 2.0
    assert found.summary["trial_contention_wait_s"] == pytest.approx(2.0)
    assert found.tags["contention_gate"].startswith(
        "bound hit (2 windows measured again; at most 2 windows measured again, 30 s of "
        "waiting): 2 timed windows kept shared"
    )


def test_contention_tag_keeps_every_window_and_says_how_many_were_shared(tmp_path: Path) -> None:
    machine = Machine(tmp_path / "stat", [(1e9, 1.0)])
    gate = machine.gate("tag")
    assert not window(machine, gate) and not window(machine, gate)
    found = gate.findings()
    assert not machine.sleeps and not found.summary
    assert found.tags["contention_gate"] == (
        "contention=tag: 2 timed windows kept shared, other processes held 1.0 of its 2 CPUs"
    )


def test_which_trials_have_a_gate() -> None:
    assert contention.gate(BenchConfig(contention="off")) is None
    assert contention.gate(BenchConfig(contention="wait", distributed=DDPConfig())) is None
    made = contention.gate(BenchConfig(contention="wait"))
    if Path("/proc/stat").exists():
        assert made is not None and made.mode == "wait"


class Session:
    """Steps of 0.5 s on the machine's clock, the trial using one core."""

    num_parameters, device, steps_per_pass = 1, "cpu", 0

    def __init__(self, machine: Machine) -> None:
        self.machine, self.steps, self.losses = machine, 0, []  # type: ignore[var-annotated]

    def next_batch(self) -> None:
        return None

    def step(self, batch: None) -> None:
        self.machine.advance(0.5, own=1.0)
        self.steps += 1
        self.losses.append(float(self.steps))

    def sync(self) -> None:
        return None

    def take_mean_loss(self) -> float | None:
        mean = sum(self.losses) / len(self.losses) if self.losses else None
        self.losses.clear()
        return mean

    def evaluate(self) -> None:
        return None


def test_the_loop_measures_a_discarded_window_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = Machine(tmp_path / "stat", [(2.0, 1.0), (1e9, 0.0)])  # the first window shared
    clock = types.SimpleNamespace(perf_counter=lambda: machine.now)
    monkeypatch.setattr(trial, "time", clock)
    session = Session(machine)
    cfg = BenchConfig(epochs=2, steps_per_epoch=4, warmup_steps=0, batch_size=1)
    seen: list[object] = []
    records, steps = _timed_epochs(session, cfg, seen.append, gate=machine.gate())
    assert session.steps == 12  # two windows of 4 steps, and the discarded one again
    assert [r.epoch for r in records] == [1, 2] and len(seen) == 2 and len(steps) == 8
    assert records[0].loss == pytest.approx(6.5)  # steps 5-8: the discarded one's losses dropped
    assert all(r.epoch_time_s == pytest.approx(2.0) for r in records)
