"""Sequential comparisons: looking at a comparison after every round without inflating its
error rate (``repeats=auto``; docs/report.md, "Stopping when the answer is known").

A comparison of two sides (per-run times, lower is faster) is looked at after rounds
2, 3, ..., ``max_rounds``: up to ``K = max_rounds - 1`` looks.  Re-testing at the 5% level
at every look would find a difference between identical sides far more often than 5% of
the time.  Instead the error rate is *spent* over the planned looks (Lan and DeMets'
alpha-spending, with Pocock's spending function ``alpha * ln(1 + (e - 1) t)``, ``t = k / K``):
look ``k`` tests at level ``alpha_k`` = the spending function's increment, and
``sum(alpha_k) = alpha``.  By the union bound, the chance that *any* look declares a
difference between identical sides is at most ``alpha``, whatever the correlation between
looks (conservative: the true rate is below it).  Pocock's function spends evenly, so a
large difference can settle at the first look: at round 2 of 10, ``alpha_1`` = 0.0087.

Each look uses Welch's t interval of the difference of mean log times (a ratio of
geometric means; bench's per-run times are close to log-normal): a difference is
settled when the ``1 - alpha_k`` interval excludes 0; equivalence within ``±margin`` when
the ``1 - 2 alpha_k`` interval lies inside ``±log(1 + margin)`` (two one-sided tests at
``alpha_k``, so a false equivalence is bounded the same way).  A comparison is futile
when even at ``max_rounds``, with the spread seen so far, no difference the current
interval still allows could be shown and equivalence could not be either: more rounds
cannot change its verdict.  An open comparison says about how many more runs a side would
give it a verdict (:func:`more_runs`): a sample-size estimate that takes the observed
difference and spread as the truth, never counted past the rounds left.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

ALPHA = 0.05
DEFAULT_MARGIN = 0.02

FASTER = "faster"
EQUIVALENT = "equivalent"
FUTILE = "futile"  # settled: no verdict is reachable within the remaining rounds
OPEN = "open"  # not settled yet: another round may settle it
SETTLED = (FASTER, EQUIVALENT, FUTILE)

# The chance of a verdict that "about N more runs a side" aims at (the usual 80% power of a
# sample-size estimate: N for an even chance would read like a promise kept half the time).
POWER = 0.8
# An interval wider than this factor (high / low) is printed as unbounded: with 2 runs a
# side Welch's t has about 1 degree of freedom, and at round 2's level its interval can run
# from 0.000 to 58,487,079, which says only that the runs are too few.
UNBOUNDED_SPAN = 100.0


def spent(t: float, alpha: float = ALPHA) -> float:
    """Pocock-type spending function: the error rate spent by information fraction ``t``."""
    t = min(max(t, 0.0), 1.0)
    return alpha * math.log(1 + (math.e - 1) * t)


def look_alpha(look: int, looks: int, alpha: float = ALPHA) -> float:
    """The level of look ``look`` (1-based) of ``looks`` planned: the spending increment."""
    if not 1 <= look <= looks:
        raise ValueError(f"look {look} of {looks}")
    return spent(look / looks, alpha) - spent((look - 1) / looks, alpha)


@dataclass
class Look:
    kind: str  # FASTER, EQUIVALENT, FUTILE or OPEN
    ratio: float  # geometric mean time of b / a
    low: float  # the look's interval of that ratio (level 1 - alpha_k)
    high: float
    alpha: float  # the level this look tested at
    runs: int  # runs a side (the smaller side)
    # OPEN: about how many more runs a side give a POWER chance of a verdict if the observed
    # difference is the true one; 0: not within the rounds left (``left``)
    more: int
    why: str
    left: int = 0  # looks left after this one

    @property
    def bounded(self) -> bool:
        return bounded(self.low, self.high)


def bounded(low: float, high: float) -> bool:
    """Whether an interval of a ratio says more than "too few runs" (see UNBOUNDED_SPAN)."""
    return low > 0 and math.isfinite(high) and high / low <= UNBOUNDED_SPAN


def interval_text(low: float, high: float, runs: str = "") -> str:
    """``interval [0.970, 1.060]``, or what an unbounded one says."""
    if bounded(low, high):
        return f"interval [{low:.3f}, {high:.3f}]"
    return f"too few runs for a bounded interval{f' ({runs})' if runs else ''}"


def more_text(more: int | None, left: int | None = None, unit: str = "runs a side") -> str:
    """The estimate, with its assumption: "about 6 more runs a side for an 80% chance of a
    verdict, if the observed difference is the true one"; ``left`` the rounds left (None:
    no limit) when ``more`` is 0 (none within them)."""
    assume = "if the observed difference is the true one"
    if more:
        return f"about {more} more {unit} for an {100 * POWER:.0f}% chance of a verdict, {assume}"
    if left is not None:
        return f"no verdict likely within the {left} rounds left, {assume}"
    return f"more than {MORE_SHOWN} more {unit}, {assume}"


MORE_SHOWN = 1000  # the fixed-repeats estimate is not counted past this many runs a side


def welch(la: np.ndarray, lb: np.ndarray) -> tuple[float, float, float]:
    """Difference of means (b - a), its standard error and Welch's degrees of freedom."""
    va, vb = la.var(ddof=1) / len(la), lb.var(ddof=1) / len(lb)
    se = math.sqrt(va + vb)
    if se == 0:
        return float(lb.mean() - la.mean()), 0.0, math.inf
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    return float(lb.mean() - la.mean()), se, df


def t_quantile(p: float, df: float) -> float:
    from scipy.stats import t as student

    return float(student.ppf(p, df)) if math.isfinite(df) else float(_z(p))


def _z(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def look(
    a: ArrayLike,
    b: ArrayLike,
    k: int,
    looks: int,
    margin: float = DEFAULT_MARGIN,
    alpha: float = ALPHA,
) -> Look:
    """Look ``k`` of ``looks`` at the comparison of ``a`` and ``b`` (times, lower is faster)."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    n = min(len(la), len(lb))
    a_k = look_alpha(k, looks, alpha)
    if n < 2:
        raise ValueError("a look needs at least 2 runs a side")
    d, se, df = welch(la, lb)
    bound = math.log(1 + margin)
    if se == 0:  # identical values on each side: the data are exact
        kind = FASTER if d != 0 else EQUIVALENT
        ratio = math.exp(d)
        return Look(kind, ratio, ratio, ratio, a_k, n, 0, "no spread")
    half = t_quantile(1 - a_k / 2, df) * se
    tost = t_quantile(1 - a_k, df) * se  # the 1 - 2 alpha_k interval's half-width
    ratio, low, high = math.exp(d), math.exp(d - half), math.exp(d + half)
    if d - half > 0 or d + half < 0:
        return Look(FASTER, ratio, low, high, a_k, n, 0, "the interval excludes 1")
    if abs(d) + tost < bound:
        return Look(EQUIVALENT, ratio, low, high, a_k, n, 0, f"within ±{100 * margin:g}%")
    # What the last look could do with the spread seen so far (the same split of runs).
    left = looks - k
    spread = se * math.sqrt(n)  # se at one run a side
    last_alpha = look_alpha(looks, looks, alpha)
    n_max = n + left
    h_max = _z(1 - last_alpha / 2) * spread / math.sqrt(n_max)
    e_max = _z(1 - last_alpha) * spread / math.sqrt(n_max)
    # Reachable if any difference the interval still allows could be shown, or equivalence
    # could be: futility is declared only when neither end of the interval would settle.
    reachable = abs(d) + half > h_max or max(0.0, abs(d) - half) + e_max < bound

    def levels(extra: np.ndarray) -> np.ndarray:  # the levels of the looks to come
        return np.array([look_alpha(k + int(e), looks, alpha) for e in extra])

    more = more_runs(d, spread, bound, levels, n, left) or 0
    where = interval_text(low, high, f"{len(la)} vs {len(lb)} runs")
    if left == 0 or not reachable:
        why = f"{where}: no verdict within {looks + 1} rounds at this spread"
        return Look(FUTILE, ratio, low, high, a_k, n, 0, why, left)
    if not bounded(low, high):
        why = where
    elif low < 1 < high:
        why = f"{where} spans both sides"
    else:
        why = f"{where} is not yet within ±{100 * margin:g}%"
    return Look(OPEN, ratio, low, high, a_k, n, more, why, left)


def more_runs(
    d: float,
    spread: float,
    bound: float,
    level: Callable[[np.ndarray], np.ndarray] | float,
    n: int,
    limit: int,
    least: int = 2,
) -> int | None:
    """About how many more runs a side (1 to ``limit``; None: not within them) give a POWER
    chance of a verdict if ``d`` (the observed difference of mean log times) is the true one
    and ``spread`` (the standard error at one run a side) the true spread: the fewest
    ``extra`` for which, with ``m = n + extra`` runs a side, Welch's t at its ``2 (m - 1)``
    degrees of freedom and level ``level(extra)`` (the look's, for repeats=auto) shows the
    difference, or equivalence within ``bound``, with that chance.  ``least``: the fewest
    runs a side the test can decide on.  t quantiles rather than normal ones, so that the
    estimate is never below what the current look already failed to show."""
    from scipy.stats import norm
    from scipy.stats import t as student

    if limit < 1 or spread <= 0 or not math.isfinite(spread):
        return None
    extra = np.arange(1, limit + 1)
    m = n + extra
    levels = np.asarray(level(extra) if callable(level) else np.full(len(extra), level), float)
    se = spread / np.sqrt(m)
    df = 2.0 * (m - 1)
    z = float(norm.ppf(POWER))
    differs = abs(d) >= (student.ppf(1 - levels / 2, df) + z) * se
    same = abs(d) + (student.ppf(1 - levels, df) + z) * se <= bound
    found = np.flatnonzero((differs | same) & (m >= least))
    return int(extra[found[0]]) if len(found) else None


def naive(a: ArrayLike, b: ArrayLike, alpha: float = ALPHA) -> bool:
    """What re-testing after every round does: Welch's test at ``alpha``, every time."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    d, se, df = welch(la, lb)
    if se == 0:
        return d != 0
    return abs(d) > t_quantile(1 - alpha / 2, df) * se


@dataclass
class Simulated:
    """What ``simulate`` found over many sweeps of one kind."""

    faster: float  # share of sweeps that ended in a FASTER verdict
    equivalent: float
    rounds: float  # mean rounds run
    naive_faster: float  # share where re-testing every round found a difference


def simulate(
    sweeps: int,
    cv: float,
    true_ratio: float = 1.0,
    max_rounds: int = 10,
    margin: float = DEFAULT_MARGIN,
    seed: int = 0,
) -> Simulated:
    """Simulated sweeps of one comparison, each side one run per round, times log-normal
    with coefficient of variation ``cv`` and side b ``true_ratio`` times side a."""
    rng = np.random.default_rng(seed)
    sigma = math.sqrt(math.log(1 + cv**2))
    looks = max_rounds - 1
    faster = equivalent = naive_hits = rounds_total = 0
    for _ in range(sweeps):
        a = np.exp(rng.normal(0.0, sigma, max_rounds))
        b = true_ratio * np.exp(rng.normal(0.0, sigma, max_rounds))
        ended = max_rounds
        for r in range(2, max_rounds + 1):
            seen = look(a[:r], b[:r], r - 1, looks, margin)
            if seen.kind in SETTLED:
                faster += seen.kind == FASTER
                equivalent += seen.kind == EQUIVALENT
                ended = r
                break
        rounds_total += ended
        naive_hits += any(naive(a[:r], b[:r]) for r in range(2, max_rounds + 1))
    return Simulated(
        faster / sweeps, equivalent / sweeps, rounds_total / sweeps, naive_hits / sweeps
    )
