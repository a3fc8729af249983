"""The timing loop, driven by a scripted session (no framework involved)."""

from __future__ import annotations

import time
import types

import pytest

from bench.core.config import BenchConfig
from bench.trial import loop as trial
from bench.trial.loop import _timed_epochs, _warm_up, auto_steps


class FakeClock:
    """The trial loop's clock (``time.perf_counter`` in :mod:`bench.trial.loop`), moved only by
    the scripted sessions: a step's time is its script's, whatever the machine's load (the
    loop's timing under a loaded or throttled CPU failed these tests with real sleeps)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += TICK  # every reading takes a little time, as a real clock's does
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


TICK = 1e-6
CLOCK = FakeClock()


@pytest.fixture(autouse=True)
def _scripted_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench.trial.loop's own ``time`` only: the real module stays as it is for everyone else."""
    shim = types.SimpleNamespace(perf_counter=CLOCK, time=time.time, sleep=time.sleep)
    monkeypatch.setattr(trial, "time", shim)


class ScriptedSession:
    """Steps take scripted durations; records the order of step() and sync() calls."""

    num_parameters = 1
    device = "cpu"
    steps_per_pass = 0

    def __init__(self, durations: list[float]) -> None:
        self.durations = iter(durations)
        self.calls: list[str] = []
        self.losses: list[float] = []

    def next_batch(self) -> None:
        self.calls.append("batch")

    def step(self, batch: None) -> None:
        CLOCK.advance(next(self.durations))
        self.calls.append("step")
        self.losses.append(1.0)

    def sync(self) -> None:
        self.calls.append("sync")

    def take_mean_loss(self) -> float | None:
        mean = sum(self.losses) / len(self.losses) if self.losses else None
        self.losses.clear()
        return mean

    def evaluate(self) -> None:
        return None

    def peak_device_memory_mb(self) -> None:
        return None


def test_warm_up_times_the_first_step_apart_and_keeps_it_out_of_epochs() -> None:
    cfg = BenchConfig(epochs=2, steps_per_epoch=3, warmup_steps=2, batch_size=10)
    session = ScriptedSession([0.30, 0.01] + [0.02] * 6)
    compile_s, warmup_s = _warm_up(session, cfg.warmup_steps)
    epochs, steps = _timed_epochs(session, cfg, None)
    assert compile_s == pytest.approx(0.30, abs=1e-4)
    assert warmup_s == pytest.approx(0.01, abs=1e-4)
    assert len(epochs) == 2 and len(steps) == 6
    for record in epochs:
        assert record.epoch_time_s == pytest.approx(0.06, abs=1e-4)
        assert record.step_time_p50_ms == pytest.approx(20, abs=0.1)
        assert record.samples == 30
        assert record.samples_per_s == pytest.approx(30 / record.epoch_time_s)
        assert record.loss == 1.0  # warm-up losses were discarded


def test_every_timed_window_is_bracketed_by_syncs() -> None:
    cfg = BenchConfig(epochs=1, steps_per_epoch=2, warmup_steps=0)
    session = ScriptedSession([0.0, 0.0])
    seen = []
    _timed_epochs(session, cfg, seen.append)
    assert session.calls == ["sync", "batch", "step", "sync", "batch", "step", "sync"]
    assert [r.epoch for r in seen] == [1]


class RankSession(ScriptedSession):
    """A rank among several: its peers hold it at the barrier for ``wait_s`` seconds."""

    def __init__(self, durations: list[float], wait_s: float) -> None:
        super().__init__(durations)
        self.wait_s = wait_s

    def barrier(self) -> None:
        CLOCK.advance(self.wait_s)
        self.calls.append("barrier")


def test_a_rank_starts_each_window_after_a_barrier_that_the_window_does_not_hold() -> None:
    cfg = BenchConfig(epochs=2, steps_per_epoch=1, warmup_steps=0)
    session = RankSession([0.01, 0.01], wait_s=0.2)
    epochs, _ = _timed_epochs(session, cfg, None)
    window = ["sync", "barrier", "batch", "step", "sync"]
    assert session.calls == window * 2
    assert all(r.epoch_time_s == pytest.approx(0.01, abs=1e-4) for r in epochs)  # wait: outside


@pytest.mark.parametrize(
    ("step_s", "window_s", "cap", "expected"),
    [
        (0.01, 1.0, 10_000, 125),  # 1.25 x the window at the fastest step time
        (0.5, 1.0, 10_000, 3),  # a slow step: never fewer than 3
        (0.0001, 1.0, 500, 500),  # a very fast step: the cap
        (0.02, 0.1, 10_000, 7),
    ],
)
def test_auto_steps_make_a_window_of_at_least_min_window_s(
    step_s: float, window_s: float, cap: int, expected: int
) -> None:
    cfg = BenchConfig(min_window_s=window_s, max_steps_per_epoch=cap)
    assert auto_steps(cfg, [step_s * 3, step_s, step_s * 2]) == expected  # the fastest step


@pytest.mark.slow
def test_an_auto_trial_times_windows_of_at_least_min_window_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """steps_per_epoch=-1 in a real trial: the warm-up decides the count, logged as
    steps_per_epoch_used, and every timed window lasts at least min_window_s."""
    from bench.core.config import ModelConfig, TelemetryConfig
    from bench.trial.loop import run_trial

    monkeypatch.setattr(trial, "time", time)  # a real trial keeps the real clock

    cfg = BenchConfig(
        model=ModelConfig(name="lenet5"), batch_size=8, epochs=2, warmup_steps=3,
        min_window_s=0.3, telemetry=TelemetryConfig(enabled=False), device="cpu",
    )  # fmt: skip
    assert cfg.steps_per_epoch == -1
    result = run_trial(cfg)
    assert result.status == "ok", result.error
    used = int(result.summary["steps_per_epoch_used"])
    assert used >= 3
    for record in result.epochs:
        assert record.samples == used * 8
        assert record.epoch_time_s >= 0.3 * 0.8  # the probe is an estimate: a fifth to spare


def test_processes_agree_on_the_largest_proposal(tmp_path) -> None:  # noqa: ANN001
    from concurrent.futures import ThreadPoolExecutor

    from bench.trial.runtime.agree import agree_max

    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda n: agree_max(tmp_path / "a", 3, n, 10), [40, 70, 55]))
    assert got == [70, 70, 70]
    with pytest.raises(RuntimeError, match="1 of 2 processes"):
        agree_max(tmp_path / "b", 2, 5, 0.2)


class EventSession(ScriptedSession):
    """A device that runs behind the host: each step queues ``durations`` of device work
    and returns at once; events carry the device's clock, sync() waits for the queue."""

    device = "cuda:0"

    def __init__(self, durations: list[float]) -> None:
        super().__init__(durations)
        self.device_clock = 0.0  # device time of the work queued so far

    def step(self, batch: None) -> None:
        self.device_clock += next(self.durations)
        self.calls.append("step")
        self.losses.append(1.0)

    def sync(self) -> None:
        self.calls.append("sync")

    def mark(self) -> float:
        self.calls.append("mark")
        return self.device_clock

    def between_s(self, first: float, second: float) -> float:
        return second - first


def test_events_timing_syncs_only_at_the_window_edges_and_takes_the_devices_step_times() -> None:
    cfg = BenchConfig(epochs=1, steps_per_epoch=3, warmup_steps=0, timing="events")
    session = EventSession([0.010, 0.020, 0.030])
    (record,), steps = _timed_epochs(session, cfg, None)
    # the mark before the loop is timing_method's own check, then one per step and the start
    assert session.calls == ["mark", "sync", "mark", "batch", "step", "mark", "batch", "step",
                             "mark", "batch", "step", "mark", "sync"]  # fmt: skip
    assert steps == pytest.approx([0.010, 0.020, 0.030])
    assert record.step_time_p50_ms == pytest.approx(20.0)


@pytest.mark.parametrize("timing", ["auto", "step"])
def test_step_timing_and_the_default_sync_after_every_step(timing: str) -> None:
    cfg = BenchConfig(epochs=1, steps_per_epoch=2, warmup_steps=0, timing=timing)
    session = EventSession([0.0, 0.0])
    _timed_epochs(session, cfg, None)
    assert session.calls == ["sync", "batch", "step", "sync", "batch", "step", "sync"]


def test_events_timing_falls_back_to_step_timing_without_device_events() -> None:
    from bench.trial.loop import timing_method

    cfg = BenchConfig(timing="events")
    assert timing_method(ScriptedSession([]), cfg) == "step"  # no mark() at all

    class CpuTorch(EventSession):
        def mark(self) -> None:  # torch on the CPU: no events
            return None

    assert timing_method(CpuTorch([]), cfg) == "step"
    assert timing_method(EventSession([]), cfg) == "events"
