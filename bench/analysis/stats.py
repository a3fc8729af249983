"""The statistics behind the report's verdicts; plain numbers in, no I/O.

A comparison takes two samples of per-run times (one value per run, lower is faster) and
says which side is faster, and by how much, only when the data support it:

- ``not comparable`` when the runs differ in what they ran on (environment), in what they
  ran (parameter counts; within each side only when two architectures are compared on
  purpose), or a side is unstable (coefficient of variation >= 10%);
- otherwise the ratio of mean times gets a 95% percentile-bootstrap confidence interval
  (seeded, so a report is reproducible).  With at least ``BOOTSTRAP_MIN_RUNS`` runs a side,
  the difference is significant when that interval excludes 1; with fewer, a two-sided
  exact Mann-Whitney U test must also reject equality at the 5% level;
- ``not tested`` when the runs are too few for any test to find a difference (one run a
  side; or so few that even the exact test's smallest p-value is not below 5%): saying
  "no significant difference" there would claim a test that could not have found one;
- ``equivalent within ±m%`` when the difference is not significant and two one-sided
  tests at the 5% level (Welch's t on log times: the 90% interval of the ratio of
  geometric means) put the whole interval within ±``margin`` (2% by default): evidence of
  no difference that matters, which "no significant difference" is not;
- ``no significant difference`` in every other case, with about how many more runs a
  side would give a verdict either way with an 80% chance, if the observed difference is
  the true one (:func:`bench.analysis.sequential.more_runs`).

Runs of a ``repeats=auto`` sweep get the sequential verdict instead: the look at which the
sweep's rounds stopped looking at the pair (:func:`stopped_at`), on the runs up to it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np

ALPHA = 0.05
UNSTABLE_CV = 0.10
BOOTSTRAP_MIN_RUNS = 8
BOOTSTRAP_RESAMPLES = 10_000
SEED = 20240917

T = TypeVar("T")

FASTER = "faster"
SAME = "no significant difference"
NOT_COMPARABLE = "not comparable"
NOT_TESTED = "not tested"
EQUIVALENT = "equivalent"
DEFAULT_MARGIN = 0.02


@dataclass
class Sample:
    """The runs of one side of a comparison."""

    name: str
    values: Sequence[float]  # one time per run (lower is faster), e.g. ms per sample
    # Per run: what it ran on (device, CPU, versions...); compared as described in compare().
    environments: Sequence[Mapping[str, str]] = field(default_factory=list)
    num_parameters: Sequence[int] = field(default_factory=list)
    # Per run: the length of its timed windows (s), to say so when a side is unstable.
    windows_s: Sequence[float] = field(default_factory=list)
    # The runs came from a repeats=auto sweep planned for this many looks (max_repeats - 1;
    # 0: a fixed number of repeats): its verdict is then the sequential one, at the level
    # its last look spent (bench.analysis.sequential), not a fixed-level test.
    looks: int = 0
    margin: float = DEFAULT_MARGIN  # the sweep's equivalence_margin
    # Per run: the round (0-based repeat) it ran in, for a repeats=auto verdict to be the one
    # at the look where the pair stopped (empty: the look its runs reach, as before).
    rounds: Sequence[int] = field(default_factory=list)
    # What steadies this side's runs when it is unstable, where the timed windows' length is
    # not the lever ("" : lengthen the windows, min_window_s or steps_per_epoch).
    remedy: str = ""


@dataclass
class Verdict:
    kind: str  # FASTER, SAME, NOT_TESTED or NOT_COMPARABLE
    text: str
    ratio: float = math.nan  # mean time of b / mean time of a
    ci_low: float = math.nan
    ci_high: float = math.nan
    p_value: float = math.nan  # Mann-Whitney, when the samples are small
    faster: str = ""  # the faster side's name when kind == FASTER
    reasons: list[str] = field(default_factory=list)


def cv(values: Sequence[float]) -> float:
    """Coefficient of variation (sample standard deviation / mean); nan below 2 values."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or x.mean() == 0:
        return math.nan
    return float(x.std(ddof=1) / abs(x.mean()))


def bootstrap_ratio(
    a: Sequence[float], b: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED
) -> tuple[float, float, float]:
    """mean(b) / mean(a) and its 95% percentile-bootstrap interval, each side resampled on
    its own (``scipy.stats.bootstrap``, seeded: the same runs give the same interval).  A
    side of one run cannot be resampled (scipy needs two): it enters as the constant it
    is, and with one run a side the interval is the ratio itself."""
    from scipy.stats import bootstrap

    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ratio = float(xb.mean() / xa.mean())
    resampled = [x for x in (xa, xb) if len(x) > 1]
    if not resampled or np.ptp(np.concatenate([xa, xb])) == 0:
        return ratio, ratio, ratio

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        given = iter(samples)
        ma = np.mean(next(given), axis=axis) if len(xa) > 1 else xa.mean()
        mb = np.mean(next(given), axis=axis) if len(xb) > 1 else xb.mean()
        return np.asarray(mb / ma)

    result = bootstrap(
        tuple(resampled),
        statistic,
        n_resamples=resamples,
        vectorized=True,
        paired=False,
        confidence_level=1 - ALPHA,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    low, high = result.confidence_interval
    return ratio, float(low), float(high)


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value (exact for small samples without ties)."""
    from scipy.stats import mannwhitneyu

    if np.ptp(np.concatenate([a, b])) == 0:
        return 1.0  # all equal: scipy would warn and return nan
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney test can give for these sizes."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


# Environment keys that must agree between the two sides of a comparison; the framework's
# own version (torch_version vs tensorflow_version) naturally differs and is not among them.
SHARED_ENVIRONMENT = ("device", "cpu_model", "gpu_names", "python_version", "image")


def _environment_problems(a: Sample, b: Sample) -> list[str]:
    problems = []
    for side in (a, b):  # repeats of one configuration: everything must agree
        keys = sorted({k for env in side.environments for k in env})
        for key in keys:
            seen = sorted({env.get(key, "?") for env in side.environments})
            if len(seen) > 1:
                problems.append(f"{side.name} runs differ in {key} ({', '.join(seen)})")
    for key in SHARED_ENVIRONMENT:
        seen_a = {env[key] for env in a.environments if key in env}
        seen_b = {env[key] for env in b.environments if key in env}
        if seen_a and seen_b and seen_a != seen_b:
            both = ", ".join(sorted(seen_a | seen_b))
            problems.append(f"{key} differs between {a.name} and {b.name} ({both})")
    return problems


def _comparability(a: Sample, b: Sample, across_architectures: bool = False) -> list[str]:
    reasons = _environment_problems(a, b)
    # Each side is one architecture; the two sides must be the same one unless the
    # comparison is between architectures by design (a claim whose sides name two models).
    groups = [a.num_parameters, b.num_parameters] if across_architectures else [
        [*a.num_parameters, *b.num_parameters]]  # fmt: skip
    for numbers in groups:
        counts = sorted({int(n) for n in numbers if n})
        if len(counts) > 1:
            reasons.append(
                "architectures differ: parameter counts " + ", ".join(f"{n:,}" for n in counts)
            )
    failed = [s.name for s in (a, b) if any(e.get("parity") == "failed" for e in s.environments)]
    if failed:
        reasons.append(
            f"the training parity check of {' and '.join(failed)} failed: they do not train "
            "alike (the table is under parity/ on the sweep's run)"
        )
    for side in (a, b):
        spread = cv(side.values)
        if spread >= UNSTABLE_CV:
            why = f"{side.name} is unstable (CV {100 * spread:.0f}% over {len(side.values)} runs"
            windows = [w for w in side.windows_s if w > 0 and math.isfinite(w)]
            if side.remedy:
                why += f"; {side.remedy}"
            elif windows:
                why += (
                    f"; its timed windows last {_seconds(statistics.median(windows))}: longer "
                    "ones (min_window_s with steps_per_epoch=-1, or more steps_per_epoch) "
                    "average out more"
                )
            reasons.append(why + ")")
    return reasons


def _seconds(value: float) -> str:
    return f"{1000 * value:.0f} ms" if value < 1 else f"{value:.1f} s"


def percent_faster(ratio: float) -> float:
    """How much longer the slower side takes, in percent, given mean time b / mean time a."""
    return 100 * ((ratio if ratio >= 1 else 1 / ratio) - 1)


def _interval_text(ratio: float, low: float, high: float) -> str:
    if ratio >= 1:
        lo, hi = 100 * (low - 1), 100 * (high - 1)
    else:
        lo, hi = 100 * (1 / high - 1), 100 * (1 / low - 1)
    return f"[95% CI {lo:.1f}%, {hi:.1f}%]"


def equivalence(
    a: Sequence[float], b: Sequence[float], margin: float, alpha: float = ALPHA
) -> tuple[bool, int | None]:
    """Two one-sided tests at ``alpha`` (Welch's t on log times): whether the ratio of
    geometric means lies within ±``margin``, and about how many more runs a side would give
    a verdict (a difference or equivalence) with an 80% chance if the observed difference
    is the true one (bench.analysis.sequential.more_runs; None: more than
    ``sequential.MORE_SHOWN``, 0: the runs have no spread to estimate from)."""
    from bench.analysis import sequential

    la, lb = np.log(np.asarray(a, dtype=float)), np.log(np.asarray(b, dtype=float))
    d, se, df = sequential.welch(la, lb)
    bound = math.log(1 + margin)
    if se == 0:
        return abs(d) < bound, 0
    inside = abs(d) + sequential.t_quantile(1 - alpha, df) * se < bound
    n = min(len(la), len(lb))
    least = next(m for m in range(2, BOOTSTRAP_MIN_RUNS + 1) if smallest_p(m, m) < alpha)
    spread = se * math.sqrt(n)
    more = sequential.more_runs(d, spread, bound, alpha, n, sequential.MORE_SHOWN, least)
    return inside, more


def compare(
    a: Sample, b: Sample, *, across_architectures: bool = False, margin: float = DEFAULT_MARGIN
) -> Verdict:
    """Which of ``a`` and ``b`` is faster, if the runs say so (see the module's docstring).

    The ratio and its interval are filled in whatever the verdict, so that a figure can
    still show them (marked) for pairs that are not comparable.  ``across_architectures``
    compares two architectures on purpose (VGG-16 against ResNet-50): the parameter counts
    must then agree within each side only.
    """
    if not a.values or not b.values:
        raise ValueError("compare: each side needs at least one run")
    sequential = bool(a.looks) and a.looks == b.looks
    sequential = sequential and all(v > 0 for v in (*a.values, *b.values))
    stop = stopped_at(a, b, min(a.margin, b.margin)) if sequential else None
    later = 0
    if stop is not None:  # the pair's verdict is the look where the rounds stopped it
        later = len(a.values) + len(b.values)
        a, b = _until(a, stop), _until(b, stop)
        later -= len(a.values) + len(b.values)
    na, nb = len(a.values), len(b.values)
    verdict = Verdict(SAME, "")
    verdict.ratio, verdict.ci_low, verdict.ci_high = bootstrap_ratio(a.values, b.values)
    small = min(na, nb) < BOOTSTRAP_MIN_RUNS
    if small:
        verdict.p_value = mann_whitney(a.values, b.values)
    verdict.reasons = _comparability(a, b, across_architectures)
    if verdict.reasons:
        verdict.kind = NOT_COMPARABLE
        verdict.text = f"{NOT_COMPARABLE}: " + "; ".join(verdict.reasons)
        return verdict
    if sequential and min(na, nb) >= 2:
        return _sequential(a, b, verdict, min(a.margin, b.margin), stop, later)
    ratio, low, high = verdict.ratio, verdict.ci_low, verdict.ci_high
    significant = low > 1 or high < 1
    if small:
        significant = significant and verdict.p_value < ALPHA
    if significant:
        fast, slow = (a, b) if ratio > 1 else (b, a)
        verdict.kind, verdict.faster = FASTER, fast.name
        verdict.text = (
            f"{fast.name} is faster than {slow.name} by {percent_faster(ratio):.1f}% "
            f"{_interval_text(ratio, low, high)}"
        )
        return verdict
    runs = f"{na} run a side" if na == nb == 1 else f"{na} vs {nb} runs"
    if min(na, nb) < 2:
        verdict.kind = NOT_TESTED
        verdict.text = f"{NOT_TESTED} ({runs}; use repeats >= 4)"
        return verdict
    why = runs
    if small:
        why += f", Mann-Whitney p = {verdict.p_value:.2g}"
        floor = smallest_p(na, nb)
        if floor >= ALPHA:
            verdict.kind = NOT_TESTED
            verdict.text = (
                f"{NOT_TESTED} ({why}: with so few runs p cannot go below {floor:.2g}; "
                "use repeats >= 4)"
            )
            return verdict
    if not all(v > 0 for v in (*a.values, *b.values)):
        verdict.text = f"{SAME} ({why})"
        return verdict
    inside, more = equivalence(a.values, b.values, margin)
    if inside:
        verdict.kind = EQUIVALENT
        verdict.text = (
            f"{EQUIVALENT} within ±{100 * margin:g}% ({runs}; ratio {ratio:.3f} "
            f"[95% CI {low:.3f}, {high:.3f}])"
        )
        return verdict
    verdict.text = f"{SAME} ({why}){_inconclusive(more)}"
    return verdict


def _inconclusive(more: int | None, left: int | None = None) -> str:
    """The estimate of more runs a verdict gives when the runs did not decide."""
    from bench.analysis import sequential

    if more == 0 and left is None:
        return ""  # no spread to estimate from
    text = sequential.more_text(more, left)
    return f"; inconclusive: {'needs ' if more or left is None else ''}{text}"


def stopped_at(a: Sample, b: Sample, margin: float) -> int | None:
    """The round (1-based: after that many rounds) at which a repeats=auto sweep stopped
    looking at the pair ``a`` / ``b`` (bench.sweep.rounds.settle's rule: the first look that
    is faster, equivalent or futile with neither side unstable by UNSTABLE_CV), or the last
    round of their runs when none did; None without every run's round."""
    from bench.analysis import sequential

    if len(a.rounds) != len(a.values) or len(b.rounds) != len(b.values) or not a.values:
        return None
    if min(*a.rounds, *b.rounds) < 0:  # a run whose round is not known
        return None
    last = max(*a.rounds, *b.rounds) + 1
    for done in range(2, last):
        xa = [v for r, v in zip(a.rounds, a.values, strict=True) if r < done]
        xb = [v for r, v in zip(b.rounds, b.values, strict=True) if r < done]
        if min(len(xa), len(xb)) < 2:
            continue
        seen = sequential.look(xa, xb, min(done - 1, a.looks), a.looks, margin)
        if seen.kind in sequential.SETTLED and max(cv(xa), cv(xb)) < UNSTABLE_CV:
            return done
    return last


def _until(side: Sample, done: int) -> Sample:
    """``side`` with only its runs of the first ``done`` rounds."""
    keep = [i for i, r in enumerate(side.rounds) if r < done]

    def pick(values: Sequence[T]) -> list[T]:
        return [values[i] for i in keep] if len(values) == len(side.rounds) else list(values)

    return replace(
        side,
        values=pick(side.values),
        environments=pick(side.environments),
        num_parameters=pick(side.num_parameters),
        windows_s=pick(side.windows_s),
        rounds=pick(side.rounds),
    )


def _sequential(
    a: Sample, b: Sample, verdict: Verdict, margin: float, stop: int | None, later: int
) -> Verdict:
    """The verdict of a repeats=auto sweep: the look at which its rounds stopped looking at
    the pair (``stop``: after that many rounds, its runs up to then, that look's spent
    level; ``later``: the runs of its sides after it, not counted), as the sweep itself
    decided when to stop (its error rates hold only so).  Without the runs' rounds
    (``stop`` None): the look its runs reach."""
    from bench.analysis import sequential

    n = min(len(a.values), len(b.values))
    k = min((stop or n) - 1, a.looks)
    seen = sequential.look(a.values, b.values, k, a.looks, margin)
    verdict.ratio, verdict.ci_low, verdict.ci_high = seen.ratio, seen.low, seen.high
    verdict.p_value = math.nan
    runs = f"{len(a.values)} vs {len(b.values)} runs"
    level = f"sequential look {k} of {a.looks} at level {seen.alpha:.3g}"
    interval = f"ratio {seen.ratio:.3f} [{seen.low:.3f}, {seen.high:.3f}]"
    if not seen.bounded:
        interval = f"ratio {seen.ratio:.3f}, {sequential.interval_text(seen.low, seen.high)}"
    if stop is not None:
        settled = seen.kind in (FASTER, EQUIVALENT) or (
            seen.kind == sequential.FUTILE and k < a.looks
        )
        level += f"; {'settled' if settled else 'not settled'} at round {stop}"
        if settled and later:
            level += f" ({later} later run{'s' if later != 1 else ''} of its sides not counted)"
    if seen.kind == sequential.FASTER:
        fast, slow = (a, b) if seen.ratio > 1 else (b, a)
        verdict.kind, verdict.faster = FASTER, fast.name
        verdict.text = (
            f"{fast.name} is faster than {slow.name} by {percent_faster(seen.ratio):.1f}% "
            f"({runs}; {interval}; {level})"
        )
    elif seen.kind == sequential.EQUIVALENT:
        verdict.kind = EQUIVALENT
        verdict.text = f"{EQUIVALENT} within ±{100 * margin:g}% ({runs}; {interval}; {level})"
    elif seen.kind == sequential.FUTILE and k == a.looks:
        verdict.text = f"{SAME} ({runs}; {interval}; {level}; max_repeats reached)"
    elif seen.kind == sequential.FUTILE:
        futile = ": more rounds cannot decide" if stop else "; settled: more rounds cannot decide"
        verdict.text = f"{SAME} ({runs}; {interval}; {level}{futile})"
    else:
        verdict.text = f"{SAME} ({runs}; {interval}; {level}){_inconclusive(seen.more, seen.left)}"
    return verdict


@dataclass
class Trend:
    text: str
    rho: float = math.nan
    p_value: float = math.nan
    direction: str = ""  # "decreases", "increases" or "" (none found)


def trend(x: Sequence[float], y: Sequence[float], what: str, against: str) -> Trend:
    """Does ``y`` move monotonically with ``x``?  Spearman's rank correlation over all runs."""
    from scipy.stats import spearmanr

    if len(set(x)) < 3:
        return Trend(f"{what}: too few {against} values to test a trend (need 3)")
    if np.ptp(np.asarray(y, dtype=float)) == 0:
        return Trend(f"{what}: no trend with {against} (all values equal)", 0.0, 1.0)
    result = spearmanr(x, y)
    rho, p = float(result.statistic), float(result.pvalue)
    stats_text = f"Spearman rho = {rho:+.2f}, p = {p:.2g}, {len(x)} runs"
    if p < ALPHA:
        direction = "decreases" if rho < 0 else "increases"
        return Trend(f"{what} {direction} with {against} ({stats_text})", rho, p, direction)
    return Trend(f"{what}: no significant trend with {against} ({stats_text})", rho, p)
