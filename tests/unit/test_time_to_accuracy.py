"""goal=accuracy: training to a target (bench.trial.loop._to_target), driven by a scripted
session on a scripted clock, and the one scoring arithmetic (bench.trial.data.score)."""

from __future__ import annotations

import math
import time
import types

import numpy as np
import pytest

from bench.checks.rules import check
from bench.core.config import BenchConfig, DataConfig, GoalConfig
from bench.trial import loop as trial
from bench.trial.data import score
from bench.trial.loop import _to_target


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


CLOCK = Clock()
STEP_S, EVAL_S = 0.5, 2.0


@pytest.fixture(autouse=True)
def _scripted_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    CLOCK.now = 100.0
    shim = types.SimpleNamespace(perf_counter=CLOCK, time=time.time, sleep=time.sleep)
    monkeypatch.setattr(trial, "time", shim)


class Learner:
    """A session whose held-out accuracy after each evaluation is scripted: its logits put
    the right class first for that share of the labels."""

    num_parameters = 1
    device = "cpu"

    def __init__(self, accuracies: list[float], per_pass: int = 10, loss: float = 1.0) -> None:
        self.accuracies = iter(accuracies)
        self.steps_per_pass = per_pass
        self.steps = 0
        self.evaluated_at: list[int] = []
        self.loss = loss

    def next_batch(self) -> None:
        return None

    def step(self, batch: None) -> None:
        CLOCK.now += STEP_S
        self.steps += 1

    def sync(self) -> None:
        pass

    def take_mean_loss(self) -> float:
        return self.loss

    def evaluate(self) -> None:
        return None

    def peak_device_memory_mb(self) -> None:
        return None

    def test_logits(self) -> np.ndarray:
        CLOCK.now += EVAL_S
        self.evaluated_at.append(self.steps)
        right = round(next(self.accuracies) * len(LABELS))
        logits = np.zeros((len(LABELS), 3), np.float32)
        logits[np.arange(len(LABELS)), LABELS] = 1.0
        logits[right:, :] = 0.0
        logits[np.arange(right, len(LABELS)), (LABELS[right:] + 1) % 3] = 1.0
        return logits


LABELS = np.arange(100) % 3


def goal_cfg(**goal: float) -> BenchConfig:
    return BenchConfig(
        data=DataConfig(name="digits"), goal=GoalConfig(name="accuracy", **goal), batch_size=4
    )


def test_stops_at_the_first_evaluation_that_reaches_the_target() -> None:
    session = Learner([0.5, 0.9, 0.96, 0.99])
    records, steps, out = _to_target(session, goal_cfg(target=0.95), LABELS, 0, None)
    assert [r.extra["test_accuracy"] for r in records] == [0.5, 0.9, 0.96]
    assert session.evaluated_at == [10, 20, 30]
    assert out["target_reached"] == 1.0 and out["epochs_to_target"] == 3.0
    # three passes of 10 steps and three evaluations, all on the clock
    assert out["time_to_target_s"] == pytest.approx(3 * (10 * STEP_S + EVAL_S))
    assert out["train_time_to_target_s"] == pytest.approx(30 * STEP_S)
    assert out["eval_time_to_target_s"] == pytest.approx(3 * EVAL_S)
    assert len(steps) == 30
    assert [r.extra["eval_epoch"] for r in records] == [1.0, 2.0, 3.0]
    assert records[-1].extra["eval_elapsed_s"] == pytest.approx(out["time_to_target_s"])


def test_not_reached_is_a_result_with_the_best_accuracy() -> None:
    session = Learner([0.5, 0.7, 0.6])
    records, _, out = _to_target(session, goal_cfg(target=0.95, max_epochs=3), LABELS, 0, None)
    assert len(records) == 3
    assert out["target_reached"] == 0.0 and "time_to_target_s" not in out
    assert out["best_test_accuracy"] == 0.7 and out["epochs_trained"] == 3.0


def test_eval_every_a_fraction_of_a_pass_counting_the_warm_up_steps() -> None:
    session = Learner([0.1, 0.2, 0.97])
    _, _, out = _to_target(session, goal_cfg(eval_every=0.5), LABELS, 2, None)
    # evaluations every 5 steps counted from the first: the warm-up's 2 are in the first
    assert session.evaluated_at == [3, 8, 13]
    assert out["epochs_to_target"] == 1.5


def test_evaluations_do_not_drift_off_the_passes() -> None:
    """Half of a 15-step pass is 7.5 steps: the evaluations fall at 8, 15, 22 and 30 steps
    (every whole pass exactly), not every 8 (16, 24, 32: 2.13 passes at the fourth)."""
    session = Learner([0.1, 0.2, 0.3, 0.97], per_pass=15)
    records, _, out = _to_target(session, goal_cfg(eval_every=0.5), LABELS, 0, None)
    assert session.evaluated_at == [8, 15, 22, 30]
    assert [r.extra["eval_epoch"] for r in records][1::2] == [1.0, 2.0]
    assert out["epochs_to_target"] == 2.0


def test_a_diverged_run_stops() -> None:
    session = Learner([0.1, 0.2, 0.3], loss=math.nan)
    records, _, out = _to_target(session, goal_cfg(), LABELS, 0, None)
    assert len(records) == 1 and out["target_reached"] == 0.0


def test_score_is_top1_and_mean_cross_entropy() -> None:
    logits = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    labels = np.array([0, 0, 1])
    accuracy, loss = score(logits, labels)
    assert accuracy == pytest.approx(1 / 3)  # the tie counts the first class, as argmax does
    expected = np.mean([math.log(1 + math.exp(-2)), math.log(1 + math.exp(2)), math.log(2)])
    assert loss == pytest.approx(expected)
    with pytest.raises(ValueError, match="do not match"):
        score(logits, labels[:2])


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"goal": GoalConfig(name="accuracy", target=1.5)}, "goal.target"),
        ({"goal": GoalConfig(name="accuracy", target=0.0)}, "goal.target"),
        ({"goal": GoalConfig(name="accuracy", eval_every=0.0)}, "goal.eval_every"),
        ({"goal": GoalConfig(name="accuracy", metric="top5")}, "goal.metric"),
        ({"goal": GoalConfig(name="accuracy"), "mode": "infer"}, "goal:"),
        ({"goal": GoalConfig(name="accuracy"), "data": DataConfig()}, "goal:"),
        (
            {"goal": GoalConfig(name="accuracy"), "data": DataConfig("digits", evaluate=False)},
            "data.evaluate",
        ),
    ],
)
def test_bad_goals_name_their_key(change: dict[str, object], key: str) -> None:
    base = {"data": DataConfig(name="digits")}
    problems = check(BenchConfig(**{**base, **change}))  # type: ignore[arg-type]
    assert len(problems) == 1 and problems[0].startswith(key), problems
