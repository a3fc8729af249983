"""Convergence alike, proven: the frameworks' learning curves to a quality target over
several seeds, compared as MLPerf compares a submission's epochs to target with its
reference convergence points (docs/accuracy.md).

``python -m bench.parity.convergence torch,tf [--seeds 5] [--fault NAME --faulty tf]
[KEY=VALUE ...]`` trains lenet5 on digits to ``goal.target`` (goal=accuracy) once per seed in
each framework, every framework's seeds in one child process of its own interpreter, and
prints the verdict; exit 0 when every framework converges as the first does, 1 when one
differs, 3 when one could not be judged.
``--fault``: inject one of :data:`bench.trial.faults.FAULTS` into ``--faulty``'s trials (the
check must then fail).

The verdict (:func:`compare`, pure) between the reference A (the first framework) and B:

* not judged (exit 3) when fewer than most runs reach the target on both sides: both would
  count as ``max_epochs`` and "converge alike" whatever they do (lower ``goal.target``, raise
  ``goal.max_epochs`` or fix the learning rate); when only one side's runs mostly miss it,
  the two differ (a broken framework must not escape by missing the target);
* epochs to target: B's median lies within A's spread over the seeds (min to max), widened
  by :data:`EPOCH_MARGIN` evaluation intervals (the measurement's granularity), and A's
  median within B's; a run that did not reach the target counts as ``max_epochs`` plus one
  interval;
* the training-loss curve: at every evaluation that all runs of both made, B's median
  training loss lies within A's spread widened by :data:`LOSS_MARGIN` of A's median, and
  A's within B's;
* the held-out accuracy curve, likewise, widened by :data:`ACCURACY_MARGIN` (absolute).

Each rule's figure (:attr:`Verdict.over`) is how far the worst median lies beyond its limit,
in the rule's unit (epochs, a fraction of the median loss, accuracy): above 0
it fails, below 0 it is the room left.  The margins are calibrated on real runs
(docs/accuracy.md; the runs replayed in tests/unit/test_convergence.py).

Seeds are not matched across frameworks (their random streams differ): the check compares
distributions, so it needs several seeds (3 at least) and says nothing finer than their
spread.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.core import metrics
from bench.core.config import (
    BenchConfig,
    DataConfig,
    FrameworkConfig,
    GoalConfig,
    ModelConfig,
    OptimizerConfig,
    TelemetryConfig,
    from_dict,
    to_dict,
)
from bench.core.result import OK, TrialResult

# The margins, calibrated on real runs of the default workload (5 seeds a side; the runs
# are tests/data/convergence_runs.json, the figures docs/accuracy.md's): how far beyond the
# other side's spread a median lay, at worst, between clean frameworks, and at least for a
# fault the rule must see.
# Epochs to target's tolerance, in evaluation intervals (goal.eval_every).  Clean: every
# median within the other's spread; a halved learning rate: 0.5-1 epoch beyond it.
EPOCH_MARGIN = 1.0
# The training-loss curves' tolerance, a fraction of the reference's median at each
# evaluation.  Clean: 0.29 at worst (where the loss leaves its plateau near 2.3, 3 seeds of
# 5 later than the others: 0.25 failed clean torch against jax there); a halved learning
# rate: 0.51 at least; label smoothing: 1.20 at least.
LOSS_MARGIN = 0.4
# The held-out accuracy curves' tolerance, in accuracy (absolute).  Clean: 0.11 at worst
# (0.05 failed clean torch against jax); a halved learning rate: 0.25 at least; a broken
# augmentation: 0.77 at least.
ACCURACY_MARGIN = 0.15
MIN_SEEDS = 3
# The rules, as Verdict.over names them.
EPOCHS, LOSS, ACCURACY = "epochs to target", "training loss", "held-out accuracy"


@dataclass
class Curve:
    """One seed's run to the target: its evaluations (epochs trained at each, training loss
    over the window before it, held-out accuracy) and its epochs to target (None: not
    reached)."""

    framework: str
    seed: int
    epochs: list[float]
    train_loss: list[float]
    accuracy: list[float]
    epochs_to_target: float | None
    time_to_target_s: float | None = None
    status: str = OK

    @classmethod
    def of(cls, result: TrialResult, seed: int) -> Curve:
        records = result.epochs
        return cls(
            result.framework,
            seed,
            [r.extra.get(metrics.EVAL_EPOCH, float(r.epoch)) for r in records],
            [float("nan") if r.loss is None else r.loss for r in records],
            [r.extra.get(metrics.TEST_ACCURACY, float("nan")) for r in records],
            result.summary.get(metrics.EPOCHS_TO_TARGET),
            result.summary.get(metrics.TIME_TO_TARGET_S),
            result.status,
        )


@dataclass
class Verdict:
    """B (``other``) against A (``reference``).  ``judged``: False when fewer than most runs
    reached the target on both sides (``passed`` is then False too); ``reached``: per
    framework, [runs that reached the target, runs]; ``over``: per rule, how far the worst
    median lies beyond its limit in the rule's unit (> 0 fails; < 0: the room left)."""

    reference: str
    other: str
    passed: bool
    reasons: list[str] = field(default_factory=list)
    epochs: dict[str, list[float]] = field(default_factory=dict)
    judged: bool = True
    reached: dict[str, list[int]] = field(default_factory=dict)
    over: dict[str, float] = field(default_factory=dict)


def _beyond(value: float, values: list[float]) -> float:
    """How far ``value`` lies outside ``values``' range (0 inside it)."""
    return max(0.0, min(values) - value, value - max(values))


def _epochs(curves: list[Curve], goal: GoalConfig) -> list[float]:
    """Each run's epochs to target; one not reached: max_epochs plus one interval."""
    beyond = goal.max_epochs + goal.eval_every
    return [beyond if c.epochs_to_target is None else c.epochs_to_target for c in curves]


def compare(a: list[Curve], b: list[Curve], goal: GoalConfig) -> Verdict:
    """Whether B's runs converge as A's do (the rules in the module's docstring)."""
    name_a, name_b = a[0].framework, b[0].framework
    verdict = Verdict(name_a, name_b, True)
    for name, runs in ((name_a, a), (name_b, b)):
        verdict.reached[name] = [sum(c.epochs_to_target is not None for c in runs), len(runs)]
    most = {name: 2 * k > n for name, (k, n) in verdict.reached.items()}
    said = " and ".join(f"{k} of {n} {name} runs" for name, (k, n) in verdict.reached.items())
    if not any(most.values()):
        verdict.judged = verdict.passed = False
        verdict.reasons.append(
            f"not judged: only {said} reached the target {goal.target:g} in "
            f"{goal.max_epochs:g} epochs (most runs of one side must reach it: lower "
            "goal.target, raise goal.max_epochs or fix the learning rate)"
        )
        return verdict
    if not all(most.values()):
        verdict.reasons.append(f"reached the target: {said} (most of each side must)")
    ea, eb = _epochs(a, goal), _epochs(b, goal)
    verdict.epochs = {name_a: ea, name_b: eb}
    margin = EPOCH_MARGIN * goal.eval_every
    for mine, theirs, who, whom in ((eb, ea, name_b, name_a), (ea, eb, name_a, name_b)):
        median = statistics.median(mine)
        over = _beyond(median, theirs) - margin
        verdict.over[EPOCHS] = max(verdict.over.get(EPOCHS, -math.inf), over)
        if over > 0:
            verdict.reasons.append(
                f"{EPOCHS}: {who}'s median {median:g} lies outside {whom}'s spread "
                f"{min(theirs):g}..{max(theirs):g} (+-{margin:g}, {EPOCH_MARGIN:g} evaluation): "
                f"{over:g} epochs over"
            )
    shared = min(len(c.train_loss) for c in a + b)
    for k in range(shared):
        la, lb = [c.train_loss[k] for c in a], [c.train_loss[k] for c in b]
        aa, ab = [c.accuracy[k] for c in a], [c.accuracy[k] for c in b]
        epoch = a[0].epochs[k]
        _apart(verdict, LOSS, epoch, la, lb, name_a, name_b,
               lambda theirs: LOSS_MARGIN * statistics.median(theirs),
               statistics.median, f"+-{LOSS_MARGIN:.0%} of its median",
               "of its median over")  # fmt: skip
        # the held-out accuracy curve: a fault the training loss does not show (a broken
        # augmentation trains as well on what it is shown) shows here
        _apart(verdict, ACCURACY, epoch, aa, ab, name_a, name_b,
               lambda theirs: ACCURACY_MARGIN, lambda theirs: 1.0, f"+-{ACCURACY_MARGIN:g}",
               "over")  # fmt: skip
    verdict.passed = not verdict.reasons
    return verdict


def format_verdict(v: Verdict) -> str:
    word = "not judged" if not v.judged else "converges alike" if v.passed else "DIFFERS"
    head = f"{v.other} against {v.reference}: {word}"
    reached = "; ".join(f"{k} reached the target in {r[0]} of {r[1]}" for k, r in v.reached.items())
    epochs = "; ".join(f"{k} epochs to target {sorted(e)}" for k, e in v.epochs.items())
    figures = ", ".join(f"{rule} {over:+.2f}" for rule, over in v.over.items())
    lines = [head, f"  {reached}"] + [f"  {epochs}"] * bool(epochs)
    lines += [f"  beyond each rule's limit (< 0: room): {figures}"] * bool(figures)
    return "\n".join([*lines, *(f"  - {r}" for r in v.reasons)])


def base_config(overrides: dict[str, object]) -> BenchConfig:
    """lenet5 on digits to 0.95, the check's default workload; ``overrides`` by dotted key."""
    cfg = to_dict(
        BenchConfig(
            framework=FrameworkConfig(),
            model=ModelConfig(name="lenet5"),
            data=DataConfig(name="digits", workers=0),
            optimizer=OptimizerConfig(lr=0.01),  # at 0.05, 9 of 10 runs never reached 0.95
            goal=GoalConfig(name="accuracy", target=0.95, max_epochs=12, eval_every=0.5),
            telemetry=TelemetryConfig(enabled=False),
            device="cpu",
            warmup_steps=1,
        )
    )
    for key, value in overrides.items():
        node = cfg
        *path, last = key.split(".")
        for part in path:
            node = node[part]
        if last not in node:
            raise ValueError(f"{key}: no such config key")
        old = node[last]
        if isinstance(old, bool):
            node[last] = str(value).lower() in ("1", "true", "yes")
        else:
            node[last] = type(old)(value) if old is not None else value
    return from_dict(BenchConfig, cfg)


def side(config_path: Path, seeds: list[int], fault: str, out: Path) -> None:
    """One framework's seeds in this process (imports once): each seed's trial through the
    one trial loop, its curve written to ``out``."""
    import dataclasses

    from bench.trial.loop import run_trial
    from bench.trial.runtime.hooks import TrialHooks

    cfg = from_dict(BenchConfig, json.loads(config_path.read_text()))
    hooks = TrialHooks(fault=fault)
    curves = []
    for seed in seeds:
        result = run_trial(dataclasses.replace(cfg, seed=seed), hooks=hooks)
        curve = Curve.of(result, seed)
        said = f"{result.error[-400:]}" if result.status != OK else ""
        print(
            f"bench: convergence: {cfg.framework.name}{' ' + fault if fault else ''} seed "
            f"{seed}: {result.status}, epochs to target {curve.epochs_to_target} {said}",
            file=sys.stderr,
            flush=True,
        )
        curves.append(asdict(curve))
    out.write_text(json.dumps(curves))


def run(
    cfg: BenchConfig, frameworks: list[str], seeds: list[int], fault: str = "", faulty: str = ""
) -> dict[str, list[Curve]]:
    """Every framework's seeds, each framework in a child process of its own interpreter."""
    from bench.envs import interpreters

    out: dict[str, list[Curve]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-convergence-") as tmp:
        for name in frameworks:
            import dataclasses

            mine = dataclasses.replace(cfg, framework=FrameworkConfig(name=name))
            config_path, result_path = Path(tmp) / f"{name}.json", Path(tmp) / f"{name}.out"
            config_path.write_text(json.dumps(to_dict(mine)))
            own = name in interpreters.OWN_ENVIRONMENTS
            python = interpreters.python_for(name) if own else sys.executable
            command = [python, "-m", "bench.parity.convergence", "--side", str(config_path)]
            command += ["--seed-list", ",".join(map(str, seeds)), "--out", str(result_path)]
            if fault and name == faulty:
                command += ["--fault", fault]
            subprocess.run(command, check=True, env=interpreters.child_env())
            out[name] = [Curve(**c) for c in json.loads(result_path.read_text())]
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.parity.convergence")
    parser.add_argument("frameworks", nargs="?", default="torch,tf")
    parser.add_argument("overrides", nargs="*", help="config keys, e.g. goal.target=0.9")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--fault", default="")
    parser.add_argument("--faulty", default="")
    parser.add_argument("--json", default="", help="write the curves and verdicts here")
    parser.add_argument("--side", default="", help=argparse.SUPPRESS)
    parser.add_argument("--seed-list", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.side:
        seeds = [int(s) for s in args.seed_list.split(",")]
        side(Path(args.side), seeds, args.fault, Path(args.out))
        return 0
    from bench.trial import faults

    faults.check(args.fault)
    names = args.frameworks.split(",")
    if len(names) < 2 or args.seeds < MIN_SEEDS:
        parser.error(f"give two frameworks or more and --seeds >= {MIN_SEEDS}")
    if args.fault and args.faulty not in names:
        parser.error("--fault needs --faulty, one of the frameworks")
    overrides = dict(o.split("=", 1) for o in args.overrides)
    cfg = base_config(overrides)
    curves = run(cfg, names, list(range(args.seeds)), args.fault, args.faulty)
    verdicts = [compare(curves[names[0]], curves[n], cfg.goal) for n in names[1:]]
    for v in verdicts:
        print(format_verdict(v))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "fault": args.fault,
                    "faulty": args.faulty,
                    "curves": {k: [asdict(c) for c in v] for k, v in curves.items()},
                    "verdicts": [asdict(v) for v in verdicts],
                },
                indent=1,
            )
        )
    if any(v.judged and not v.passed for v in verdicts):
        return 1
    return 0 if all(v.passed for v in verdicts) else 3


def _apart(
    verdict: Verdict,
    rule: str,
    epoch: float,
    a: list[float],
    b: list[float],
    name_a: str,
    name_b: str,
    margin: Callable[[list[float]], float],
    unit: Callable[[list[float]], float],
    said: str,
    over_said: str,
) -> None:
    """One evaluation of one curve rule: either side's median against the other's spread
    widened by ``margin`` (B against A first, then A against B); the figure beyond the limit
    in ``unit``s into ``verdict.over``, and one reason (the first found) when it fails."""
    said_one = False
    for mine, theirs, who, whom in ((b, a, name_b, name_a), (a, b, name_a, name_b)):
        median = statistics.median(mine)
        over = (_beyond(median, theirs) - margin(theirs)) / unit(theirs)
        verdict.over[rule] = max(verdict.over.get(rule, -math.inf), over)
        if over > 0 and not said_one:
            said_one = True
            verdict.reasons.append(
                f"{rule} at epoch {epoch:g}: {who}'s median {median:.3f} lies outside "
                f"{whom}'s spread {min(theirs):.3f}..{max(theirs):.3f} ({said}): "
                f"{over:.3f} {over_said}"
            )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
