"""Parity at best: every setting a ``tuning=best`` search may pick, checked as a side of its
own against the reference, so that the search cannot pick one that changes the training
arithmetic (compiled graphs fuse operators; oneDNN and the memory format pick other
kernels).  A side that fails refuses its setting for that framework and model
(:func:`bench.trial.tuning.cache.set_refusals`); the search then skips it and says why.
"""

from __future__ import annotations

from bench.core.config import usable_cpus
from bench.parity import check
from bench.trial import models
from bench.trial import parity as sides
from bench.trial.frameworks import spaces
from bench.trial.tuning import cache


def tuned_sides(frameworks: list[str], spec: sides.Spec) -> list[str]:
    """One side per alternative of each framework's search space (on the CPU, where the
    check runs), each with that one setting changed."""
    out = []
    image = models.MODELS[spec.model].task == "image"
    for fw in frameworks:
        for knob in spaces.space(spec.config(fw), usable_cpus(), False, image):
            out += [sides.label(fw, {knob.key: value}) for value in knob.values]
    return out


def check_at_best(
    spec: sides.Spec, frameworks: list[str], tolerance: float = check.DEFAULT_TOLERANCE
) -> tuple[check.Outcome, dict[str, str]]:
    """The framework check with every tuned side beside the plain ones; each tuned side's
    verdict is recorded for the search.  Returns the outcome and the refused sides with
    their reasons: a tuned side that fails refuses its setting, it does not fail the
    comparison (:func:`plain_passed`)."""
    outcome = check.check(spec, frameworks + tuned_sides(frameworks, spec), tolerance)
    return outcome, record(outcome, spec.model)


def plain_passed(outcome: check.Outcome) -> bool:
    """Whether every side without speed settings passed (the framework comparison)."""
    plain = [d for d in outcome.deviations if not sides.split(d.framework)[1]]
    return all(d.passed(outcome.limits) for d in plain)


def record(outcome: check.Outcome, model: str) -> dict[str, str]:
    """Write each tuned side's verdict (refused or cleared); return the refusals."""
    refusals: dict[str, str] = {}
    by_framework: dict[str, dict[tuple[str, str], str]] = {}
    for deviation in outcome.deviations:
        framework, settings = sides.split(deviation.framework)
        if len(settings) != 1:
            continue
        ((key, value),) = settings.items()
        reason = ""
        if not deviation.passed(outcome.limits):
            figures = ", ".join(f"{k} {v:.2e}" for k, v in deviation.figures().items())
            reason = f"parity failed on {model} (deviations {figures}; limits as in the check)"
            refusals[deviation.framework] = reason
        by_framework.setdefault(framework, {})[(key, str(value).lower())] = reason
    for framework, verdicts in by_framework.items():
        cache.set_refusals(framework, model, verdicts)
    return refusals
