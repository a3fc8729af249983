"""The timing loop, driven by a scripted session (no framework involved)."""

from __future__ import annotations

import time

import pytest

from bench.config import BenchConfig
from bench.trial import _timed_epochs, _warm_up


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
        time.sleep(next(self.durations))
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
    assert compile_s == pytest.approx(0.30, abs=0.05)
    assert warmup_s == pytest.approx(0.01, abs=0.02)
    assert len(epochs) == 2 and len(steps) == 6
    for record in epochs:
        assert record.epoch_time_s == pytest.approx(0.06, abs=0.03)
        assert record.step_time_p50_ms == pytest.approx(20, abs=10)
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
        time.sleep(self.wait_s)
        self.calls.append("barrier")


def test_a_rank_starts_each_window_after_a_barrier_that_the_window_does_not_hold() -> None:
    cfg = BenchConfig(epochs=2, steps_per_epoch=1, warmup_steps=0)
    session = RankSession([0.01, 0.01], wait_s=0.2)
    epochs, _ = _timed_epochs(session, cfg, None)
    window = ["sync", "barrier", "batch", "step", "sync"]
    assert session.calls == window * 2
    assert all(r.epoch_time_s < 0.1 for r in epochs)  # the wait for peers is outside
