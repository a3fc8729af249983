"""A sweep against a baseline (``bench report --baseline SWEEP_OR_EXPERIMENT``): each
configuration of the current runs against the same configuration in the baseline's runs
(matched by configuration, framework version included, not by run), with the verdict
rules of the framework comparison, worded as changes: "regression of x% [CI]",
"improvement of x% [CI]", "no significant change", "not comparable" (naming what differs:
hardware, image, parameter count), "not tested" (too few runs).  ``--fail-on-regression
PCT`` makes the command exit 1 when any significant regression exceeds PCT percent, so a CI
pipeline can gate on it."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from bench.analysis import stats
from bench.report.document import Cell, Section, Table, num
from bench.report.sections.common import sample
from bench.report.trials import Labeller, Trial, fmt_mean_sd, group
from bench.tracking.records import framework_of

REGRESSION, IMPROVEMENT = "regression", "improvement"
NO_CHANGE, NOT_COMPARABLE, NOT_TESTED = "no significant change", "not comparable", "not tested"
MISSING = "not in the baseline"


@dataclass
class Change:
    framework: str
    label: str
    kind: str  # REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE, NOT_TESTED or MISSING
    text: str
    pct: float = math.nan  # the change of the time per sample, in percent (+ is slower)
    now: str = ""
    before: str = ""


def _ms(t: Trial) -> float:
    return t.ms_per_sample


def _compared(t: Trial) -> bool:
    return t.ok and math.isfinite(_ms(t))


def needed(current: Sequence[Trial]) -> frozenset[tuple[str, str | None]]:
    """The (framework, model) pairs of the configurations :func:`compare` looks up in the
    baseline (``only`` of :func:`bench.tracking.load_runs`): a baseline run of any other pair
    matches none of them, so the baseline's other runs need not be read.  A model of None
    (a run without a model.name in its configuration) stands for every model."""
    return frozenset(
        (framework_of(t.record.tags, t.record.params), dict(t.config).get("model.name"))
        for t in current
        if _compared(t)
    )


def compare(current: Sequence[Trial], baseline: Sequence[Trial]) -> list[Change]:
    """Every configuration of ``current`` against ``baseline``, regressions first (the
    largest first), then improvements, unchanged, and the rest."""
    now = group([t for t in current if _compared(t)], lambda t: (t.framework, t.config))
    before = group([t for t in baseline if _compared(t)], lambda t: (t.framework, t.config))
    lab = Labeller([*(t for ts in now.values() for t in ts)])
    out: list[Change] = []
    for (framework, config), runs in now.items():
        label = lab.label(config)
        shown_now = fmt_mean_sd([_ms(t) for t in runs])
        if (framework, config) not in before:
            out.append(Change(framework, label, MISSING, MISSING, now=shown_now))
            continue
        old = before[(framework, config)]
        v = stats.compare(sample("baseline", old, _ms), sample("this sweep", runs, _ms))
        pct = (v.ratio - 1) * 100
        interval = f"[95% CI {(v.ci_low - 1) * 100:+.1f}%, {(v.ci_high - 1) * 100:+.1f}%]"
        if v.kind == stats.FASTER and v.faster == "baseline":
            kind, text = REGRESSION, f"regression of {pct:.1f}% {interval}"
        elif v.kind == stats.FASTER:
            kind, text = IMPROVEMENT, f"improvement of {-pct:.1f}% {interval}"
        elif v.kind in (stats.SAME, stats.EQUIVALENT):
            same = "; " + v.text.split(" (")[0] if v.kind == stats.EQUIVALENT else ""
            kind, text = NO_CHANGE, f"{NO_CHANGE} ({pct:+.1f}% {interval}{same})"
        elif v.kind == stats.NOT_COMPARABLE:
            kind, text = NOT_COMPARABLE, v.text
        else:
            kind, text = NOT_TESTED, v.text
        out.append(Change(framework, label, kind, text, pct, shown_now,
                          fmt_mean_sd([_ms(t) for t in old])))  # fmt: skip
    order = {REGRESSION: 0, IMPROVEMENT: 1, NO_CHANGE: 2, NOT_COMPARABLE: 3, NOT_TESTED: 4}
    return sorted(out, key=lambda c: (order.get(c.kind, 5), -abs(c.pct) if c.pct == c.pct else 0))


def failing(changes: Sequence[Change], pct: float) -> list[Change]:
    """The significant regressions larger than ``pct`` percent."""
    return [c for c in changes if c.kind == REGRESSION and c.pct > pct]


def section(changes: Sequence[Change], baseline_name: str) -> Section:
    section = Section("Against the baseline", "baseline")
    counts = Counter(c.kind for c in changes)
    section.blocks.append(
        f"Each configuration of these runs against the same configuration in {baseline_name}: "
        "timed wall time per sample (ms), its change with a 95% bootstrap interval, and the "
        "verdict by the rules of the framework comparison.  "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        + "."
    )
    rows = [
        [Cell(c.framework), Cell(c.label), num(c.before or "-"), num(c.now or "-"),
         Cell(c.text, c.kind.replace(" ", "-"))]
        for c in changes
    ]  # fmt: skip
    columns = ["Framework", "Configuration", "baseline ms/sample", "now ms/sample", "Change"]
    section.blocks.append(Table(columns, rows, "Every configuration, regressions first"))
    return section
