"""The convergence check's verdict (bench.parity.convergence.compare) on REAL runs replayed
from tests/data/convergence_runs.json (its "about" says how they were recorded: lenet5 on
digits to 0.95, 5 seeds per side, each injected fault in torch, a halved learning rate in
tf too): clean frameworks converge alike with room left under every rule, each fault fails
by a stated figure over its limit, and the check refuses to judge when most runs of both
sides miss the target.  Then the verdict's words on constructed curves, and the command's
exit codes (its trials replaced by the recorded runs).  No trial runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.core.config import GoalConfig
from bench.parity import convergence
from bench.parity.convergence import ACCURACY, EPOCHS, LOSS, Curve, base_config, compare

RUNS = json.loads((Path(__file__).parent.parent / "data" / "convergence_runs.json").read_text())
GOAL = GoalConfig(name="accuracy", **RUNS["goal"])


def runs(side: str) -> list[Curve]:
    return [Curve(**c) for c in RUNS["runs"][side]]


def test_the_recorded_workload_is_the_checks_default() -> None:
    goal = base_config({}).goal
    assert (goal.target, goal.max_epochs, goal.eval_every) == tuple(RUNS["goal"].values())
    assert base_config({}).optimizer.lr == 0.01


CLEAN = ["torch", "tf", "jax", "mxnet", "torch_b", "tf_b"]  # *_b: seeds 5-9
PAIRS = [(a, b) for i, a in enumerate(CLEAN) for b in CLEAN[i + 1 :]]
# The least room each rule left between clean frameworks on these runs (its worst median
# this far inside its limit): epochs; a fraction of the median training loss; accuracy.
ROOM = {EPOCHS: 0.5, LOSS: 0.1, ACCURACY: 0.035}


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_clean_real_runs_converge_alike_with_room(a: str, b: str) -> None:
    for first, second in ((a, b), (b, a)):
        verdict = compare(runs(first), runs(second), GOAL)
        assert verdict.passed and verdict.judged, verdict.reasons
        for rule, least in ROOM.items():
            assert verdict.over[rule] <= -least, (rule, verdict.over)


# Each fault (injected in torch; half_lr in tf too) against every clean side, listed first or
# second: it fails, and the rules named lie at least this far over their limits (the least
# seen on these runs).
FAULTS = {
    "torch_half_lr": {LOSS: 0.1, ACCURACY: 0.095},
    "tf_half_lr": {LOSS: 0.45},
    "torch_label_smoothing": {LOSS: 0.8},
    "torch_broken_augmentation": {EPOCHS: 7.5, ACCURACY: 0.6},
}
CASES = [(fault, clean) for fault in FAULTS for clean in CLEAN]


@pytest.mark.parametrize(("faulty", "reference"), CASES, ids=[f"{f}-{r}" for f, r in CASES])
def test_each_real_fault_fails_by_its_margin(faulty: str, reference: str) -> None:
    for first, second in ((reference, faulty), (faulty, reference)):
        verdict = compare(runs(first), runs(second), GOAL)
        assert verdict.judged and not verdict.passed
        for rule, least in FAULTS[faulty].items():
            assert verdict.over[rule] >= least, (rule, verdict.over)


def test_a_halved_learning_rate_is_seen_by_the_curves_not_always_by_the_epochs() -> None:
    """5.5 epochs against torch's 3.5..5 widened by one evaluation: at the limit, not over.
    What 5 seeds cannot tell by epochs to target, the loss and accuracy curves do."""
    verdict = compare(runs("torch"), runs("torch_half_lr"), GOAL)
    assert verdict.over[EPOCHS] == 0 and not verdict.passed
    assert [r.split(":")[0] for r in verdict.reasons][:2] == [
        "training loss at epoch 1.5",
        "held-out accuracy at epoch 1.5",
    ]


def test_a_fault_that_never_reaches_the_target_fails_not_refused() -> None:
    """A broken augmentation (training images transposed): 0 of 5 runs reach the target while
    the reference's all do; the check says so rather than refusing to judge."""
    verdict = compare(runs("tf"), runs("torch_broken_augmentation"), GOAL)
    assert verdict.judged and not verdict.passed
    assert verdict.reached == {"tf": [5, 5], "torch+broken_augmentation": [0, 5]}
    assert verdict.reasons[0] == (
        "reached the target: 5 of 5 tf runs and 0 of 5 torch+broken_augmentation runs "
        "(most of each side must)"
    )


def test_it_refuses_to_judge_when_most_runs_of_both_sides_miss_the_target() -> None:
    broken = runs("torch_broken_augmentation")
    other = [Curve(**{**vars(c), "framework": "tf"}) for c in broken]
    other[0].epochs_to_target = 11.5  # 1 of 5 reached it
    verdict = compare(broken, other, GOAL)
    assert not verdict.judged and not verdict.passed and not verdict.over
    assert verdict.reasons == [
        "not judged: only 0 of 5 torch+broken_augmentation runs and 1 of 5 tf runs reached "
        "the target 0.95 in 12 epochs (most runs of one side must reach it: lower "
        "goal.target, raise goal.max_epochs or fix the learning rate)"
    ]
    assert convergence.format_verdict(verdict).splitlines()[0] == (
        "tf against torch+broken_augmentation: not judged"
    )


def test_most_is_more_than_half() -> None:
    """2 of 5 on one side and 3 of 5 on the other: judged (3 is most of 5); 2 of 4 and 2 of
    4: not judged."""
    a, b = runs("tf"), runs("torch")
    for c in a[:3] + b[:2]:
        c.epochs_to_target = None
    assert compare(a, b, GOAL).judged is True
    a4, b4 = runs("tf")[:4], runs("torch")[:4]
    for c in a4[:2] + b4[:2]:
        c.epochs_to_target = None
    assert compare(a4, b4, GOAL).judged is False


@pytest.mark.parametrize(
    ("sides", "fault", "code", "said"),
    [
        (("tf", "torch"), "", 0, "torch against tf: converges alike"),
        (("tf", "torch_label_smoothing"), "label_smoothing", 1, "DIFFERS"),
        (("torch_broken_augmentation",) * 2, "", 3, "not judged"),
    ],
)
def test_the_commands_exit_status(  # noqa: PLR0913
    sides: tuple[str, str],
    fault: str,
    code: int,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0 alike, 1 differs, 3 not judged: main() with its trials replaced by recorded runs."""

    def recorded(cfg, names, seeds, fault_, faulty):  # noqa: ANN001, ANN202
        assert (fault_, faulty) == (fault, "torch" if fault else "")
        return {name: runs(side) for name, side in zip(names, sides, strict=True)}

    monkeypatch.setattr(convergence, "run", recorded)
    argv = ["tf,torch"] + (["--fault", fault, "--faulty", "torch"] if fault else [])
    assert convergence.main(argv) == code
    assert said in capsys.readouterr().out


# --- the verdict's words, on constructed curves ---

CONSTRUCTED = GoalConfig(name="accuracy", target=0.95, max_epochs=12, eval_every=0.5)


def curve(name: str, seed: int, to_target: float | None, losses: list[float]) -> Curve:
    epochs = [0.5 * (i + 1) for i in range(len(losses))]
    return Curve(name, seed, epochs, losses, [0.5] * len(losses), to_target)


BASE = [1.9, 0.9, 0.45, 0.3, 0.2, 0.15]
A = [curve("torch", s, t, [v * f for v in BASE]) for s, (t, f) in
     enumerate([(2.5, 1.0), (3.0, 1.1), (2.5, 0.9), (3.0, 1.05), (2.5, 0.95)])]  # fmt: skip


def test_more_epochs_to_target_is_said_with_the_figure_over() -> None:
    b = [curve("tf", s, t, BASE) for s, t in enumerate([4.5, 5.0, 5.0, 5.5, 4.5])]
    verdict = compare(A, b, CONSTRUCTED)
    assert not verdict.passed
    assert verdict.reasons[0] == (
        "epochs to target: tf's median 5 lies outside torch's spread 2.5..3 (+-0.5, 1 "
        "evaluation): 1.5 epochs over"
    )
    assert verdict.over[EPOCHS] == pytest.approx(1.5)


def test_a_training_loss_that_stays_high_is_said_with_the_figure_over() -> None:
    smoothed = [v + 0.5 for v in BASE]
    b = [curve("tf", s, t, smoothed) for s, t in enumerate([2.5, 3.0, 2.5, 3.0, 2.5])]
    verdict = compare(A, b, CONSTRUCTED)
    assert not verdict.passed
    last = [r for r in verdict.reasons if r.startswith("training loss at epoch 3:")]
    # tf's 0.65 lies 0.485 above torch's 0.135..0.165, 3.233 of torch's median 0.15; the
    # limit is 40% of it: 2.833 over
    assert last == [
        "training loss at epoch 3: tf's median 0.650 lies outside torch's spread "
        "0.135..0.165 (+-40% of its median): 2.833 of its median over"
    ]


def test_the_checks_config_takes_dotted_overrides() -> None:
    cfg = base_config({"goal.target": "0.9", "data.cache": "true", "optimizer.lr": "0.1"})
    assert (cfg.goal.target, cfg.data.cache, cfg.optimizer.lr) == (0.9, True, 0.1)
    with pytest.raises(ValueError, match="goal.nope"):
        base_config({"goal.nope": "1"})
