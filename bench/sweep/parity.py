"""``parity=true``: before a sweep's first trial, the training parity checks its comparisons
rest on (:mod:`bench.parity`), once per group of trials that would be compared: the same
model, optimizer, batch, input size and strategy.  A group with two or more frameworks
gets the framework check; a group with a synchronous strategy the check covers gets the
strategy check (against the undistributed run at the same global batch), and one with an
asynchronous strategy the looser check, without momentum.  Each check's
table is logged on the sweep's parent run (``parity/<group>.txt``, tag
``bench.parity.<group>``), the parent gets ``bench.parity`` = passed / failed, and every
trial of a group its verdict as ``bench.parity``, which the report reads.

A Hugging Face causal LM (``model=hf``) gets the LM logit parity check instead
(:mod:`bench.parity.lm`, ``python -m bench.parity --lm FAMILY`` in a child process of the
pinned TF interpreter, which has transformers and keras-hub): one check per family and size
of the sweep's LMs that run under both torch and tf, in any mode, since the two sides are
the same network only if their logits agree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from bench import tracking
from bench.core.config import BenchConfig
from bench.core.frameworks import FRAMEWORKS, TF
from bench.core.zoo import NATIVE_SOURCES
from bench.parity import at_best as tuned
from bench.parity import check, strategy
from bench.trial import parity as side
from bench.trial.distributed.registry import distributes

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
    # model=hf: the family's config fields (transformers' spelling, as text) the LM logit
    # check builds it at; () for every other model.
    lm: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        if self.lm:  # one per family and size: hf-llama-logits-<digest of the fields>
            digest = hashlib.sha256(repr(self.lm).encode()).hexdigest()[:8]
            return f"hf-{self.model}-logits-{digest}"
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
    if cfg.model.source == "hf":  # the logits, whatever the batch, optimizer or mode
        from bench.trial.models import hf_lm

        fields = tuple(sorted((k, repr(v)) for k, v in hf_lm.config_fields(cfg.model).items()))
        return Group(cfg.model.name, "", 0.0, 0.0, 0.0, 0, 0, 0, cfg.seed, "none", 1, 1, fields)
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
    from bench.trial.models import MODELS

    if group.lm:  # the LM logit check compares transformers (torch) with keras-hub (tf)
        others = [f for f in frameworks if f not in FRAMEWORKS or not FRAMEWORKS[f].hf_module]
        if others or len(frameworks) < 2:
            return f"the LM logit check compares torch with tf, not {', '.join(frameworks)}"
        return ""
    spec = MODELS.get(group.model)
    if spec is None or spec.task != "image":
        return f"{group.model} is not an image model"
    for name in (f for f in frameworks if f in FRAMEWORKS):  # a plain side, not jax[source=...]
        if not spec.has_builder(name):  # MXNet's zoo is smaller
            return f"{group.model} has no {FRAMEWORKS[name].title} build"
    if distributes(group.distributed):
        runs_in = strategy.CHECKED.get(group.distributed)
        if runs_in is None or group.nodes > 1:
            return f"{group.distributed} (nodes={group.nodes}) is not covered by the check yet"
        if any(f not in runs_in for f in frameworks):
            return f"{group.distributed} runs in {', '.join(runs_in)}"
    return ""


def lm_check(group: Group) -> tuple[str, str]:
    """The LM logit parity of an hf group, torch (transformers) against tf (keras-hub), run
    by ``python -m bench.parity --lm`` with the pinned TF interpreter: its verdict and its
    output.  A size keras-hub's converter would drop is not covered, naming the field."""
    from bench.envs.interpreters import child_env, python_for

    command = [
        python_for(TF),
        "-m",
        "bench.parity",
        "--lm",
        group.model,
        "--seed",
        str(group.seed),
        *(arg for k, v in group.lm for arg in ("--lm-config", f"{k}={v}")),
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=LM_CHECK_TIMEOUT_S,
            env=child_env(CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3"),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return FAILED, f"parity: {group.name}: the LM check failed to run: {exc}"
    lines = done.stdout.strip().splitlines()
    found = next((line for line in lines if line.startswith(f"{group.model}: ")), "")
    fields = ", ".join(f"{k}={v}" for k, v in group.lm)
    if not found:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return FAILED, f"parity: {group.name}: the LM check failed to run: {last}"
    text = f"LM logit parity of {group.model} (torch: transformers, tf: keras-hub) at {fields}:\n"
    if found.startswith(f"{group.model}: refused: "):
        return NOT_COVERED, text + found
    return (PASSED if done.returncode == 0 else FAILED), text + found


LM_CHECK_TIMEOUT_S = 600.0


def run_checks(
    cfgs: Sequence[BenchConfig], store: tracking.Store, sweep_id: str
) -> dict[Group, str]:
    """Run the checks of every group with parity=true; return each group's verdict."""
    groups: dict[Group, list[str]] = {}
    at_best: set[Group] = set()  # groups with tuning=best trials: their settings are checked
    for cfg in cfgs:
        if cfg.parity and (cfg.mode == "train" or cfg.model.source == "hf"):
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
        if group.lm and why:
            verdicts[group] = NOT_COVERED
            text = f"parity: {group.name}: not checked: {why}"
        elif group.lm:
            print(f"bench: parity check of {group.name} ...", file=sys.stderr, flush=True)
            verdicts[group], text = lm_check(group)
        elif why:
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
