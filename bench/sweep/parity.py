"""``parity=true``: before a sweep's first trial, the training parity checks its comparisons
rest on (:mod:`bench.parity`), once per group of trials that would be compared: the same
model, optimizer, batch, input size and strategy.  A group with two or more frameworks
gets the framework check; a group with a synchronous strategy the check covers gets the
strategy check (against the undistributed run at the same global batch), and one with an
asynchronous strategy the looser check, without momentum.  Each check's
table is logged on the sweep's parent run (``parity/<group>.txt``, tag
``bench.parity.<group>``), the parent gets ``bench.parity`` = passed / failed, and every
trial of a group its verdict as ``bench.parity``, which the report reads.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from bench import tracking
from bench.core.config import BenchConfig
from bench.core.frameworks import MXNET
from bench.core.zoo import NATIVE_SOURCES
from bench.distributed.registry import distributes
from bench.parity import at_best as tuned
from bench.parity import check, side, strategy

ENV_PARITY = "BENCH_PARITY"
PASSED, FAILED, NOT_COVERED = "passed", "failed", "not-covered"
NONE = "none"  # a job handed no verdict (its sweep ran no check, or none for its group)


@dataclass(frozen=True)
class Group:
    model: str
    optimizer: str
    lr: float
    momentum: float
    weight_decay: float
    batch_size: int  # of one whole step (every worker's)
    image_size: int
    num_classes: int
    seed: int
    distributed: str
    workers: int
    nodes: int

    @property
    def name(self) -> str:
        parts = [self.model, self.optimizer, f"b{self.batch_size}", f"{self.image_size}px"]
        if distributes(self.distributed):
            parts.append(f"{self.distributed}{self.workers}")
        return "-".join(parts)

    def spec(self) -> side.Spec:
        return side.Spec(
            model=self.model,
            batch_size=self.batch_size,
            image_size=self.image_size,
            num_classes=self.num_classes,
            optimizer=self.optimizer,
            lr=self.lr,
            momentum=self.momentum if self.optimizer == "sgd" else 0.0,
            weight_decay=self.weight_decay,
            seed=self.seed,
        )


def group_of(cfg: BenchConfig) -> Group:
    o = cfg.optimizer
    # every worker sees the whole batch
    shared = not distributes(cfg.distributed.name) or strategy.whole_batch(cfg.distributed.name)
    per_step = cfg.batch_size * (1 if shared else cfg.workers * cfg.nodes)
    return Group(
        cfg.model.name, o.name, o.lr, o.momentum, o.weight_decay, per_step, cfg.image_size,
        cfg.num_classes, cfg.seed, cfg.distributed.name, cfg.workers, cfg.nodes,
    )  # fmt: skip


def side_of(cfg: BenchConfig) -> str:
    """The check's side for a trial of ``cfg``: its framework, or, for a model of a native
    source (model.source=flax), the framework with that source (``jax[source=flax]``), a
    side of its own beside the framework's Keras model."""
    if cfg.model.source in NATIVE_SOURCES:
        return side.label(cfg.framework.name, {side.SOURCE: cfg.model.source})
    return cfg.framework.name


def _covered(group: Group, frameworks: list[str]) -> str:
    """Why the checks cannot cover ``group`` ('' if they can)."""
    from bench.models import MODELS, mxnet_models

    spec = MODELS.get(group.model)
    if spec is None or spec.task != "image":
        return f"{group.model} is not an image model"
    if MXNET in frameworks and group.model not in mxnet_models():
        return f"{group.model} has no MXNet build"
    if distributes(group.distributed):
        runs_in = strategy.CHECKED.get(group.distributed)
        if runs_in is None or group.nodes > 1:
            return f"{group.distributed} (nodes={group.nodes}) is not covered by the check yet"
        if any(f not in runs_in for f in frameworks):
            return f"{group.distributed} runs in {', '.join(runs_in)}"
    return ""


def run_checks(
    cfgs: Sequence[BenchConfig], store: tracking.Store, sweep_id: str
) -> dict[Group, str]:
    """Run the checks of every group with parity=true; return each group's verdict."""
    groups: dict[Group, list[str]] = {}
    at_best: set[Group] = set()  # groups with tuning=best trials: their settings are checked
    for cfg in cfgs:
        if cfg.parity and cfg.mode == "train":
            found = groups.setdefault(group_of(cfg), [])
            if side_of(cfg) not in found:
                found.append(side_of(cfg))
            if cfg.tuning.name == "best":
                at_best.add(group_of(cfg))
    verdicts: dict[Group, str] = {}
    for group, found in groups.items():
        # The frameworks in the check's order; a framework's native-source side after it.
        frameworks = sorted(found, key=lambda s: (check.FRAMEWORKS.index(side.split(s)[0]), s))
        if not distributes(group.distributed) and len(frameworks) < 2 and group not in at_best:
            continue  # one framework, undistributed, untuned: nothing to compare
        why = _covered(group, frameworks)
        if why:
            verdicts[group] = NOT_COVERED
            text = f"parity: {group.name}: not checked: {why}"
        else:
            print(f"bench: parity check of {group.name} ...", file=sys.stderr, flush=True)
            texts, passed = [], True
            try:
                if group in at_best:  # every setting a search may pick, as a side
                    outcome, refusals = tuned.check_at_best(group.spec(), frameworks)
                    outcomes = []
                    texts.append(check.format_outcome(outcome))
                    texts += [f"refused for tuning=best: {k}: {v}" for k, v in refusals.items()]
                    passed = tuned.plain_passed(outcome)
                elif not distributes(group.distributed):
                    outcomes = [check.check(group.spec(), frameworks)]
                elif group.distributed in strategy.ASYNC:
                    # Momentum weighs the arrival order nobody fixes: checked without it.
                    plain = dataclasses.replace(group.spec(), momentum=0.0)
                    outcomes = [
                        strategy.check_async(plain, f, group.distributed, group.workers)
                        for f in frameworks
                    ]
                    if group.spec().momentum:
                        texts.append(
                            f"{group.distributed} is asynchronous: its check runs with momentum "
                            f"0 (the sweep's {group.momentum:g} would weigh the order in which "
                            "updates arrive, which nobody fixes); it checks the update's scale"
                        )
                else:
                    outcomes = [
                        strategy.check_strategy(group.spec(), f, group.distributed, group.workers)
                        for f in frameworks
                    ]
                for outcome in outcomes:
                    texts.append(check.format_outcome(outcome))
                    passed = passed and outcome.passed
            except Exception as exc:  # noqa: BLE001 - a check that cannot run proves nothing
                texts.append(f"parity: {group.name}: the check failed to run: {exc}")
                passed = False
            verdicts[group] = PASSED if passed else FAILED
            text = "\n\n".join(texts)
        print(f"bench: parity {group.name}: {verdicts[group]}", file=sys.stderr, flush=True)
        store.note_parity(sweep_id, group.name, text, verdicts[group])
    if verdicts:
        store.note_parity(sweep_id, "", "", FAILED if FAILED in verdicts.values() else PASSED)
    return verdicts


def overrides(cfg: BenchConfig, verdicts: dict[Group, str]) -> list[str]:
    """The job overrides that hand a trial its group's verdict: always set, to ``none`` when
    the trial has none, so that a ``BENCH_PARITY`` left in the user's shell never reaches a
    trial's tags."""
    verdict = verdicts.get(group_of(cfg)) if cfg.parity else None
    return [f"++hydra.job.env_set.{ENV_PARITY}={verdict or NONE}"]


def trial_tags() -> dict[str, str]:
    """The verdict this job was handed, as its run's tag (only one of the check's verdicts:
    anything else in the variable is no verdict)."""
    verdict = os.environ.get(ENV_PARITY, "")
    return {"bench.parity": verdict} if verdict in (PASSED, FAILED, NOT_COVERED) else {}
