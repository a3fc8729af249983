"""The convergence check's verdict (bench.parity.convergence.compare) on constructed curves:
frameworks that converge alike pass; a framework that needs more epochs, whose training loss
stays high or that never reaches the target fails, naming what differs.  (Recorded real runs
with each fault injected are not here yet: issue 49's closing note.)"""

from __future__ import annotations

import pytest

from bench.core.config import GoalConfig
from bench.parity.convergence import Curve, base_config, compare

GOAL = GoalConfig(name="accuracy", target=0.95, max_epochs=12, eval_every=0.5)


def curve(name: str, seed: int, to_target: float | None, losses: list[float]) -> Curve:
    epochs = [0.5 * (i + 1) for i in range(len(losses))]
    return Curve(name, seed, epochs, losses, [0.5] * len(losses), to_target)


BASE = [1.9, 0.9, 0.45, 0.3, 0.2, 0.15]
A = [curve("torch", s, t, [v * f for v in BASE]) for s, (t, f) in
     enumerate([(2.5, 1.0), (3.0, 1.1), (2.5, 0.9), (3.0, 1.05), (2.5, 0.95)])]  # fmt: skip


def test_alike_passes() -> None:
    b = [curve("tf", s, t, [v * f for v in BASE]) for s, (t, f) in
         enumerate([(3.0, 1.02), (2.5, 0.97), (2.5, 1.0), (3.0, 1.08), (2.5, 0.93)])]  # fmt: skip
    verdict = compare(A, b, GOAL)
    assert verdict.passed, verdict.reasons


def test_more_epochs_to_target_fails() -> None:
    b = [curve("tf", s, t, BASE) for s, t in enumerate([4.5, 5.0, 5.0, 5.5, 4.5])]
    verdict = compare(A, b, GOAL)
    assert not verdict.passed
    assert any(r.startswith("epochs to target: tf's median 5") for r in verdict.reasons)


def test_a_training_loss_that_stays_high_fails() -> None:
    smoothed = [v + 0.5 for v in BASE]
    b = [curve("tf", s, t, smoothed) for s, t in enumerate([2.5, 3.0, 2.5, 3.0, 2.5])]
    verdict = compare(A, b, GOAL)
    assert not verdict.passed
    assert [r for r in verdict.reasons if r.startswith("training loss at epoch")]


def test_a_low_held_out_accuracy_with_a_normal_loss_fails() -> None:
    """A broken augmentation: the model learns what it is shown (a normal training loss),
    both sides miss the target, but its held-out accuracy stays low (real runs, issue 49)."""
    a = [curve("tf", s, None, BASE) for s in range(5)]
    b = [curve("torch", s, None, BASE) for s in range(5)]
    for c in b:
        c.accuracy = [0.25] * len(c.accuracy)
    verdict = compare(a, b, GOAL)
    assert not verdict.passed
    assert verdict.reasons[0].startswith("held-out accuracy at epoch 0.5: torch's median 0.25")


def test_never_reaching_the_target_fails() -> None:
    b = [curve("tf", s, None, BASE) for s in range(5)]
    verdict = compare(A, b, GOAL)
    assert not verdict.passed and "12.5" in verdict.reasons[0]


def test_the_checks_config_takes_dotted_overrides() -> None:
    cfg = base_config({"goal.target": "0.9", "data.cache": "true", "optimizer.lr": "0.1"})
    assert (cfg.goal.target, cfg.data.cache, cfg.optimizer.lr) == (0.9, True, 0.1)
    with pytest.raises(ValueError, match="goal.nope"):
        base_config({"goal.nope": "1"})
